package azurevmss

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"

	"github.com/sluice-dev/sluice/internal/provider"
)

// TagNodePool is the tag every VM the provider makes in a Flexible set
// carries, naming its pool: it is how a VM is known to be the pool's. It is
// not contract.TagNodePool because Azure's tag names cannot hold a "/"
// (https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations).
const TagNodePool = "sluice-nodepool"

// vmOf is the VM that a Flexible set's model describes, named name, for the
// pool, booting image ("" the model's). It is the model's
// virtualMachineProfile written as a standalone VM's properties, with
// virtualMachineScaleSet.id naming the set, as
// https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-attach-detach-vm
// adds a new VM to a Flexible set. set is as Azure answers a GET with
// $expand=userData.
//
// What the model holds and Azure never returns cannot be carried over: its
// customData and adminPassword. A model needing an adminPassword (Windows,
// or password login) is refused (osProfileOf). customData cannot be
// detected (Azure answers without it, set or not), so a model that starts
// its kubelet from customData is not refused: its VMs boot without it and
// never join. Nor are the model's extensions made (they are separate
// resources of a VM, and not refused either). The model's kubelet must
// therefore start from its user data or its image; docs/providers.md says
// so.
//
// avoid says which of the set's zones to pass over (nil: none).
func vmOf(set *armcompute.VirtualMachineScaleSet, r ref, name, pool, image string, avoid func(zone string) bool) (armcompute.VirtualMachine, error) {
	props := set.Properties
	if set.ID == nil || set.SKU == nil || set.SKU.Name == nil || props == nil {
		return armcompute.VirtualMachine{}, fmt.Errorf("scale set %s: Azure answered without its id, sku or properties", r)
	}
	profile := props.VirtualMachineProfile
	if profile == nil {
		return armcompute.VirtualMachine{}, flexRefusal(r, "has no VM profile (a scaling profile) to make VMs from")
	}
	if props.SinglePlacementGroup != nil && *props.SinglePlacementGroup {
		return armcompute.VirtualMachine{}, flexRefusal(r, "has singlePlacementGroup true; Azure attaches VMs only to a Flexible set whose singlePlacementGroup is false")
	}
	os, err := osProfileOf(profile.OSProfile, r, name)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	storage, err := storageProfileOf(profile.StorageProfile, r, image)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	network, err := networkProfileOf(profile.NetworkProfile, r)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	size := armcompute.VirtualMachineSizeTypes(*set.SKU.Name)
	vm := armcompute.VirtualMachine{
		Location: set.Location,
		Plan:     set.Plan,
		Identity: identityOf(set.Identity),
		Tags:     map[string]*string{TagNodePool: to.Ptr(pool)},
		Zones:    zoneOf(set.Zones, name, avoid),
		Properties: &armcompute.VirtualMachineProperties{
			VirtualMachineScaleSet: &armcompute.SubResource{ID: set.ID},
			HardwareProfile:        &armcompute.HardwareProfile{VMSize: &size},
			OSProfile:              os,
			StorageProfile:         storage,
			NetworkProfile:         network,
			UserData:               profile.UserData,
			Priority:               profile.Priority,
			EvictionPolicy:         profile.EvictionPolicy,
			BillingProfile:         profile.BillingProfile,
			SecurityProfile:        profile.SecurityProfile,
			DiagnosticsProfile:     profile.DiagnosticsProfile,
			CapacityReservation:    profile.CapacityReservation,
			ScheduledEventsProfile: profile.ScheduledEventsProfile,
			ApplicationProfile:     profile.ApplicationProfile,
			LicenseType:            profile.LicenseType,
			AdditionalCapabilities: props.AdditionalCapabilities,
		},
	}
	if profile.HardwareProfile != nil {
		vm.Properties.HardwareProfile.VMSizeProperties = profile.HardwareProfile.VMSizeProperties
	}
	return vm, nil
}

func flexRefusal(r ref, why string) error {
	return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf("Flexible scale set %s %s", r, why)}
}

// zoneOf is the zone of the set's zones the VM named name goes to: one of
// those avoid does not pass over (a zone that lately had no capacity for
// the set's size), chosen by the name's hash, so a PUT asked again asks
// for the same zone while the zones passed over stay the same (a VM's zone
// cannot change). When avoid passes over every zone, any of them. None for
// a regional set, whose VMs must be regional too.
func zoneOf(zones []*string, name string, avoid func(zone string) bool) []*string {
	open := slices.DeleteFunc(slices.Clone(zones), func(z *string) bool { return z == nil || avoid != nil && avoid(*z) })
	if len(open) == 0 {
		open = slices.DeleteFunc(slices.Clone(zones), func(z *string) bool { return z == nil })
	}
	if len(open) == 0 {
		return nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name)) // never fails
	return []*string{open[int(h.Sum32())%len(open)]}
}

// identityOf carries the set's user-assigned identities over (Flexible sets
// have no other kind).
func identityOf(id *armcompute.VirtualMachineScaleSetIdentity) *armcompute.VirtualMachineIdentity {
	if id == nil || id.Type == nil {
		return nil
	}
	out := &armcompute.VirtualMachineIdentity{Type: id.Type}
	if len(id.UserAssignedIdentities) > 0 {
		out.UserAssignedIdentities = map[string]*armcompute.UserAssignedIdentitiesValue{}
		for k := range id.UserAssignedIdentities {
			out.UserAssignedIdentities[k] = &armcompute.UserAssignedIdentitiesValue{}
		}
	}
	return out
}

// osProfileOf names the VM's computer (its Node's name) after the VM. Only
// a Linux model logging in by SSH key can be copied: Azure never returns a
// model's adminPassword, which a Windows VM or password login needs.
func osProfileOf(os *armcompute.VirtualMachineScaleSetOSProfile, r ref, name string) (*armcompute.OSProfile, error) {
	switch {
	case os == nil:
		return nil, flexRefusal(r, "has no osProfile in its VM profile")
	case os.WindowsConfiguration != nil || os.LinuxConfiguration == nil:
		return nil, flexRefusal(r, "is not Linux: a Windows VM needs the model's adminPassword, which Azure never returns")
	case os.LinuxConfiguration.DisablePasswordAuthentication == nil || !*os.LinuxConfiguration.DisablePasswordAuthentication:
		return nil, flexRefusal(r, "allows password login: a new VM would need the model's adminPassword, which Azure never returns; log in by SSH key only (disablePasswordAuthentication true)")
	}
	return &armcompute.OSProfile{
		ComputerName:                to.Ptr(name),
		AdminUsername:               os.AdminUsername,
		LinuxConfiguration:          os.LinuxConfiguration,
		Secrets:                     os.Secrets,
		AllowExtensionOperations:    os.AllowExtensionOperations,
		RequireGuestProvisionSignal: os.RequireGuestProvisionSignal,
	}, nil
}

// storageProfileOf boots image ("" the model's). The disks go with the VM
// unless the model says otherwise: a standalone VM's default deleteOption
// is Detach, which would leave them behind.
func storageProfileOf(s *armcompute.VirtualMachineScaleSetStorageProfile, r ref, image string) (*armcompute.StorageProfile, error) {
	if s == nil || s.OSDisk == nil {
		return nil, flexRefusal(r, "has no storageProfile.osDisk in its VM profile")
	}
	out := &armcompute.StorageProfile{ImageReference: s.ImageReference}
	if image != "" {
		ref, err := imageReference(image)
		if err != nil {
			return nil, err
		}
		out.ImageReference = ref
	}
	if s.DiskControllerType != nil {
		out.DiskControllerType = to.Ptr(armcompute.DiskControllerTypes(*s.DiskControllerType))
	}
	d := s.OSDisk
	out.OSDisk = &armcompute.OSDisk{CreateOption: d.CreateOption, Caching: d.Caching, DiskSizeGB: d.DiskSizeGB, OSType: d.OSType,
		DiffDiskSettings: d.DiffDiskSettings, WriteAcceleratorEnabled: d.WriteAcceleratorEnabled,
		ManagedDisk: managedDiskOf(d.ManagedDisk), DeleteOption: deleteDisk(d.DeleteOption)}
	for _, dd := range s.DataDisks {
		if dd == nil {
			continue
		}
		out.DataDisks = append(out.DataDisks, &armcompute.DataDisk{Lun: dd.Lun, CreateOption: dd.CreateOption, Caching: dd.Caching,
			DiskSizeGB: dd.DiskSizeGB, DiskIOPSReadWrite: dd.DiskIOPSReadWrite, DiskMBpsReadWrite: dd.DiskMBpsReadWrite,
			WriteAcceleratorEnabled: dd.WriteAcceleratorEnabled, ManagedDisk: managedDiskOf(dd.ManagedDisk), DeleteOption: deleteDisk(dd.DeleteOption)})
	}
	return out, nil
}

func managedDiskOf(m *armcompute.VirtualMachineScaleSetManagedDiskParameters) *armcompute.ManagedDiskParameters {
	if m == nil {
		return nil
	}
	return &armcompute.ManagedDiskParameters{StorageAccountType: m.StorageAccountType, DiskEncryptionSet: m.DiskEncryptionSet, SecurityProfile: m.SecurityProfile}
}

func deleteDisk(o *armcompute.DiskDeleteOptionTypes) *armcompute.DiskDeleteOptionTypes {
	if o != nil {
		return o
	}
	return to.Ptr(armcompute.DiskDeleteOptionTypesDelete)
}

// networkProfileOf has the VM make its own network interfaces from the
// model's configurations, which a VM does only with a networkApiVersion
// (2020-11-01 when the model names none). The model's public IP
// configurations are not carried over.
func networkProfileOf(n *armcompute.VirtualMachineScaleSetNetworkProfile, r ref) (*armcompute.NetworkProfile, error) {
	if n == nil || len(n.NetworkInterfaceConfigurations) == 0 {
		return nil, flexRefusal(r, "has no network interface configurations in its VM profile")
	}
	out := &armcompute.NetworkProfile{NetworkAPIVersion: n.NetworkAPIVersion}
	if out.NetworkAPIVersion == nil {
		out.NetworkAPIVersion = to.Ptr(armcompute.NetworkAPIVersionTwoThousandTwenty1101)
	}
	for _, nic := range n.NetworkInterfaceConfigurations {
		if nic == nil || nic.Properties == nil {
			continue
		}
		out.NetworkInterfaceConfigurations = append(out.NetworkInterfaceConfigurations, nicOf(nic))
	}
	return out, nil
}

func nicOf(nic *armcompute.VirtualMachineScaleSetNetworkConfiguration) *armcompute.VirtualMachineNetworkInterfaceConfiguration {
	p := nic.Properties
	props := &armcompute.VirtualMachineNetworkInterfaceConfigurationProperties{
		Primary: p.Primary, EnableAcceleratedNetworking: p.EnableAcceleratedNetworking, EnableIPForwarding: p.EnableIPForwarding,
		EnableFpga: p.EnableFpga, NetworkSecurityGroup: p.NetworkSecurityGroup, DisableTCPStateTracking: p.DisableTCPStateTracking,
		AuxiliaryMode: p.AuxiliaryMode, AuxiliarySKU: p.AuxiliarySKU, DeleteOption: p.DeleteOption,
	}
	if props.DeleteOption == nil {
		props.DeleteOption = to.Ptr(armcompute.DeleteOptionsDelete)
	}
	if p.DNSSettings != nil {
		props.DNSSettings = &armcompute.VirtualMachineNetworkInterfaceDNSSettingsConfiguration{DNSServers: p.DNSSettings.DNSServers}
	}
	for _, ip := range p.IPConfigurations {
		if ip == nil || ip.Properties == nil {
			continue
		}
		ipp := ip.Properties
		c := &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{Primary: ipp.Primary,
			LoadBalancerBackendAddressPools:       ipp.LoadBalancerBackendAddressPools,
			ApplicationGatewayBackendAddressPools: ipp.ApplicationGatewayBackendAddressPools,
			ApplicationSecurityGroups:             ipp.ApplicationSecurityGroups}
		if ipp.Subnet != nil {
			c.Subnet = &armcompute.SubResource{ID: ipp.Subnet.ID}
		}
		if ipp.PrivateIPAddressVersion != nil {
			c.PrivateIPAddressVersion = to.Ptr(armcompute.IPVersions(*ipp.PrivateIPAddressVersion))
		}
		props.IPConfigurations = append(props.IPConfigurations, &armcompute.VirtualMachineNetworkInterfaceIPConfiguration{Name: ip.Name, Properties: c})
	}
	return &armcompute.VirtualMachineNetworkInterfaceConfiguration{Name: nic.Name, Properties: props}
}
