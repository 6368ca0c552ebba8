package azurevmss

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"

	"github.com/sluice-dev/sluice/internal/provider"
)

// flexSet is a Flexible set as Azure answers it, with a model a VM can be
// made from; change changes it.
func flexSet(change func(*armcompute.VirtualMachineScaleSet)) *armcompute.VirtualMachineScaleSet {
	set := &armcompute.VirtualMachineScaleSet{
		ID:       to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/web-flex"),
		Location: to.Ptr("westeurope"), Zones: []*string{to.Ptr("1"), to.Ptr("2")},
		SKU: &armcompute.SKU{Name: to.Ptr("Standard_D4s_v5")},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			OrchestrationMode: to.Ptr(armcompute.OrchestrationModeFlexible), SinglePlacementGroup: to.Ptr(false),
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				Priority: to.Ptr(armcompute.VirtualMachinePriorityTypesSpot), EvictionPolicy: to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete),
				UserData: to.Ptr("IyEvYmluL2Jhc2g="),
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr("web"), AdminUsername: to.Ptr("azureuser"),
					LinuxConfiguration: &armcompute.LinuxConfiguration{DisablePasswordAuthentication: to.Ptr(true)}},
				StorageProfile: &armcompute.VirtualMachineScaleSetStorageProfile{
					ImageReference: &armcompute.ImageReference{ID: to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/images/node")},
					OSDisk:         &armcompute.VirtualMachineScaleSetOSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage)}},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
					Name: to.Ptr("nic"), Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
						IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{Name: to.Ptr("ip"),
							Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{Subnet: &armcompute.APIEntityReference{ID: to.Ptr("/subnets/nodes")}}}}}}}},
			},
		},
	}
	if change != nil {
		change(set)
	}
	return set
}

// The VM is the model written as a standalone VM of the set.
func TestVMOfCopiesTheModel(t *testing.T) {
	r := ref{"s", "rg", "web-flex"}
	vm, err := vmOf(flexSet(nil), r, "web-a1b2c", "web", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := vm.Properties
	switch {
	case *p.VirtualMachineScaleSet.ID != *flexSet(nil).ID:
		t.Errorf("virtualMachineScaleSet = %s", *p.VirtualMachineScaleSet.ID)
	case *p.HardwareProfile.VMSize != "Standard_D4s_v5":
		t.Errorf("vmSize = %s, want the set's sku", *p.HardwareProfile.VMSize)
	case *p.Priority != armcompute.VirtualMachinePriorityTypesSpot || *p.EvictionPolicy != armcompute.VirtualMachineEvictionPolicyTypesDelete:
		t.Error("the model's spot priority is lost")
	case *p.UserData != "IyEvYmluL2Jhc2g=" || *p.OSProfile.ComputerName != "web-a1b2c" || *p.OSProfile.AdminUsername != "azureuser":
		t.Errorf("osProfile = %+v, userData %s", p.OSProfile, *p.UserData)
	case *p.NetworkProfile.NetworkAPIVersion != armcompute.NetworkAPIVersionTwoThousandTwenty1101:
		t.Error("no networkApiVersion: Azure makes no network interface for the VM without one")
	case *p.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.Subnet.ID != "/subnets/nodes":
		t.Error("the model's subnet is lost")
	case *p.StorageProfile.OSDisk.DeleteOption != armcompute.DiskDeleteOptionTypesDelete:
		t.Error("the OS disk would outlive the VM (a standalone VM's default is Detach)")
	case len(vm.Zones) != 1 || *vm.Zones[0] != "1" && *vm.Zones[0] != "2":
		t.Errorf("zones = %v, want one of the set's", vm.Zones)
	case *vm.Tags[TagNodePool] != "web":
		t.Errorf("tags = %v", vm.Tags)
	}
	again, _ := vmOf(flexSet(nil), r, "web-a1b2c", "web", "", nil)
	if *again.Zones[0] != *vm.Zones[0] {
		t.Error("the same name goes to another zone: a PUT asked again would ask to move the VM")
	}
	regional, _ := vmOf(flexSet(func(s *armcompute.VirtualMachineScaleSet) { s.Zones = nil }), r, "web-a1b2c", "web", "", nil)
	if regional.Zones != nil {
		t.Errorf("a regional set's VM has zones %v", regional.Zones)
	}
}

// A model a VM cannot be made from is the template's fault.
func TestVMOfRefusesWhatAzureNeverReturns(t *testing.T) {
	for name, change := range map[string]func(*armcompute.VirtualMachineScaleSet){
		"no VM profile": func(s *armcompute.VirtualMachineScaleSet) { s.Properties.VirtualMachineProfile = nil },
		"password login": func(s *armcompute.VirtualMachineScaleSet) {
			s.Properties.VirtualMachineProfile.OSProfile.LinuxConfiguration.DisablePasswordAuthentication = to.Ptr(false)
		},
		"Windows": func(s *armcompute.VirtualMachineScaleSet) {
			s.Properties.VirtualMachineProfile.OSProfile.LinuxConfiguration = nil
			s.Properties.VirtualMachineProfile.OSProfile.WindowsConfiguration = &armcompute.WindowsConfiguration{}
		},
		"single placement group": func(s *armcompute.VirtualMachineScaleSet) { s.Properties.SinglePlacementGroup = to.Ptr(true) },
		"no network":             func(s *armcompute.VirtualMachineScaleSet) { s.Properties.VirtualMachineProfile.NetworkProfile = nil },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := vmOf(flexSet(change), ref{"s", "rg", "web-flex"}, "web-a1b2c", "web", "", nil)
			if pe, ok := provider.AsError(err); !ok || pe.Code != provider.CodeInvalidTemplate || !strings.Contains(pe.Message, "web-flex") {
				t.Errorf("vmOf = %v, want InvalidTemplate naming the set", err)
			}
		})
	}
	if _, err := vmOf(flexSet(nil), ref{"s", "rg", "web-flex"}, "web-a1b2c", "web", "Canonical:ubuntu:22_04:latest", nil); err == nil {
		t.Error("an image azure-vmss refuses was taken")
	}
}
