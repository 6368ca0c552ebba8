package azuretest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6/fake"
)

// The Flexible sets' model: a Linux VM logging in by SSH key, on one
// subnet of the resource group's virtual network.
const (
	AdminUsername = "azureuser"
	SSHPublicKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2Uga2V5IGZvciBhenVyZXRlc3Q= azuretest"
	Subnet        = "/subscriptions/" + Subscription + "/resourceGroups/" + ResourceGroup + "/providers/Microsoft.Network/virtualNetworks/nodes-vnet/subnets/nodes"
)

// flexibleModel is the rest of a Flexible set as GET answers it: its zones,
// singlePlacementGroup false (Azure attaches VMs to no other), and a VM
// profile a VM can be made from.
func flexibleModel(s *scaleSet, set *armcompute.VirtualMachineScaleSet) {
	for _, z := range s.zones {
		set.Zones = append(set.Zones, to.Ptr(z))
	}
	p := set.Properties
	p.SinglePlacementGroup, p.PlatformFaultDomainCount = to.Ptr(false), to.Ptr[int32](1)
	profile := p.VirtualMachineProfile
	profile.OSProfile = &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr(s.name), AdminUsername: to.Ptr(AdminUsername),
		LinuxConfiguration: &armcompute.LinuxConfiguration{DisablePasswordAuthentication: to.Ptr(true), SSH: &armcompute.SSHConfiguration{
			PublicKeys: []*armcompute.SSHPublicKey{{Path: to.Ptr("/home/" + AdminUsername + "/.ssh/authorized_keys"), KeyData: to.Ptr(SSHPublicKey)}}}}}
	profile.StorageProfile.OSDisk = &armcompute.VirtualMachineScaleSetOSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
		Caching: to.Ptr(armcompute.CachingTypesReadWrite), OSType: to.Ptr(armcompute.OperatingSystemTypesLinux),
		DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
		ManagedDisk:  &armcompute.VirtualMachineScaleSetManagedDiskParameters{StorageAccountType: to.Ptr(armcompute.StorageAccountTypesPremiumLRS)}}
	profile.NetworkProfile = &armcompute.VirtualMachineScaleSetNetworkProfile{NetworkAPIVersion: to.Ptr(armcompute.NetworkAPIVersionTwoThousandTwenty1101),
		NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{Name: to.Ptr(s.name + "-nic"),
			Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{Primary: to.Ptr(true), EnableAcceleratedNetworking: to.Ptr(true),
				DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete),
				IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{Name: to.Ptr("ipconfig1"),
					Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{Primary: to.Ptr(true),
						Subnet: &armcompute.APIEntityReference{ID: to.Ptr(Subnet)}}}}}}}}
}

// addOwnVM is a VM the Flexible set's own scaling makes from its model.
func (s *scaleSet) addOwnVM(state string, now time.Time) *vm {
	n := vmIDs.Add(1)
	// Azure names a Flexible set's own VM <set>_<8 hex> and its computer
	// <computerNamePrefix><6 characters>: the Node is named after the
	// second.
	name := fmt.Sprintf("%s_%08x", s.name, n*2654435761&0xffffffff)
	computer := fmt.Sprintf("%s%06x", s.name, n*2246822519&0xffffff)
	put := &armcompute.VirtualMachine{Location: to.Ptr(s.location), Properties: &armcompute.VirtualMachineProperties{
		HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(s.size))},
		StorageProfile:  &armcompute.StorageProfile{ImageReference: imageReference(s.model.image, false)},
		OSProfile:       &armcompute.OSProfile{ComputerName: to.Ptr(computer), AdminUsername: to.Ptr(AdminUsername)},
		UserData:        to.Ptr(s.model.userData),
	}}
	v := &vm{id: name, vmID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), state: state, created: now, put: put}
	if len(s.zones) > 0 {
		v.zone = s.zones[s.next%len(s.zones)]
	}
	s.next++
	s.vms[name] = v
	return v
}

// find is the set's instance or VM (a VM's name in any case); nil for none.
func (s *scaleSet) find(ok bool, id string) *vm {
	if !ok {
		return nil
	}
	if v := s.vms[id]; v != nil {
		return v
	}
	for name, v := range s.vms {
		if s.flexible && strings.EqualFold(name, id) {
			return v
		}
	}
	return nil
}

// vmNamed is the Flexible set's VM of the name, in any case (VM names are
// unique in a resource group).
func (c *Cloud) vmNamed(name string) (*scaleSet, *vm) {
	for _, s := range c.sets {
		if v := s.find(s.flexible, name); v != nil {
			return s, v
		}
	}
	return nil, nil
}

// ProviderID is the providerID cloud-provider-azure writes on the Node of
// the set's instance (a Flexible set's VM: its name), the resource group
// lowercased; "" for none.
func (c *Cloud) ProviderID(set, instance string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sets[strings.ToLower(set)]
	v := s.find(ok, instance)
	switch {
	case v == nil:
		return ""
	case s.flexible:
		return "azure://" + strings.Replace(vmID(v.id), "/resourceGroups/"+ResourceGroup+"/", "/resourceGroups/"+strings.ToLower(ResourceGroup)+"/", 1)
	}
	return "azure://" + strings.Replace(c.armID(s, v.id), "/resourceGroups/"+ResourceGroup+"/", "/resourceGroups/"+strings.ToLower(ResourceGroup)+"/", 1)
}

// NodeName is the name the instance's kubelet registers its Node with: a
// Flexible set's VM's computerName, lowercased (as cloud-provider-azure
// has it); a Uniform set's instance's computer name, the set's name (an
// AKS set's computerNamePrefix) and the instance ID in six base-36 digits.
// "" for none.
func (c *Cloud) NodeName(set, instance string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sets[strings.ToLower(set)]
	v := s.find(ok, instance)
	switch {
	case v == nil:
		return ""
	case v.put != nil:
		if p := v.put.Properties; p != nil && p.OSProfile != nil && p.OSProfile.ComputerName != nil {
			return strings.ToLower(*p.OSProfile.ComputerName)
		}
		return strings.ToLower(v.id)
	}
	id, _ := strconv.ParseInt(v.id, 10, 64)
	return fmt.Sprintf("%s%06s", strings.ToLower(s.name), strconv.FormatInt(id, 36))
}

// VM is the Flexible set's VM of the name as a GET with $expand=userData
// answers it; false for none.
func (c *Cloud) VM(set, name string) (armcompute.VirtualMachine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sets[strings.ToLower(set)]
	v := s.find(ok && s.flexible, name)
	if v == nil {
		return armcompute.VirtualMachine{}, false
	}
	return c.vmResource(s, v, true), true
}

func vmID(name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", Subscription, ResourceGroup, name)
}

// vmResource is the VM as GET answers it.
func (c *Cloud) vmResource(s *scaleSet, v *vm, userData bool) armcompute.VirtualMachine {
	out := cloneVM(v.put)
	out.ID, out.Name, out.Type = to.Ptr(vmID(v.id)), to.Ptr(v.id), to.Ptr("Microsoft.Compute/virtualMachines")
	out.Location = to.Ptr(s.location)
	out.Zones = nil
	if v.zone != "" {
		out.Zones = []*string{to.Ptr(v.zone)}
	}
	if out.Properties == nil {
		out.Properties = &armcompute.VirtualMachineProperties{}
	}
	p := out.Properties
	p.ProvisioningState, p.VMID, p.TimeCreated = to.Ptr(v.state), to.Ptr(v.vmID), to.Ptr(v.created)
	p.VirtualMachineScaleSet = &armcompute.SubResource{ID: to.Ptr(setID(s.name))}
	if p.OSProfile != nil {
		p.OSProfile.AdminPassword, p.OSProfile.CustomData = nil, nil
	}
	if !userData {
		p.UserData = nil
	}
	if p.StorageProfile != nil && p.StorageProfile.ImageReference != nil {
		p.StorageProfile.ImageReference = imageReference(imageMap(p.StorageProfile.ImageReference), true)
	}
	return out
}

func cloneVM(v *armcompute.VirtualMachine) armcompute.VirtualMachine {
	var out armcompute.VirtualMachine
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		panic("azuretest: copying a VM: " + err.Error()) // the SDK's own models always round-trip
	}
	return out
}

func (c *Cloud) vmServer() fake.VirtualMachinesServer {
	return fake.VirtualMachinesServer{
		Get: func(_ context.Context, rg, name string, o *armcompute.VirtualMachinesClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachinesClientGetResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			s, v := c.vmNamed(name)
			if v == nil || !strings.EqualFold(rg, ResourceGroup) {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			userData := o != nil && o.Expand != nil && *o.Expand == armcompute.InstanceViewTypesUserData
			resp.SetResponse(http.StatusOK, armcompute.VirtualMachinesClientGetResponse{VirtualMachine: c.vmResource(s, v, userData)}, nil)
			return
		},
		BeginCreateOrUpdate: c.putVM,
		BeginDelete:         c.deleteVM,
		NewListPager:        c.listVMs,
	}
}

// putVM is the PUT of a VM into a Flexible set
// (https://learn.microsoft.com/rest/api/compute/virtual-machines/create-or-update).
func (c *Cloud) putVM(_ context.Context, rg, name string, params armcompute.VirtualMachine, _ *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	if !strings.EqualFold(rg, ResourceGroup) {
		c.mu.Unlock()
		errResp.SetResponseError(http.StatusNotFound, "ResourceGroupNotFound")
		return
	}
	s, status, code := c.setOfVM(&params)
	if s == nil {
		c.mu.Unlock()
		errResp.SetResponseError(status, code)
		return
	}
	if owner, v := c.vmNamed(name); v != nil {
		defer c.mu.Unlock()
		if owner != s || !slices.Equal(zonesOf(params.Zones), zonesOf(c.vmResource(owner, v, false).Zones)) {
			errResp.SetResponseError(http.StatusConflict, "PropertyChangeNotAllowed")
			return
		}
		v.put.Tags = params.Tags
		resp.AddNonTerminalResponse(http.StatusOK, nil)
		resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientCreateOrUpdateResponse{VirtualMachine: c.vmResource(s, v, false)}, nil)
		return
	}
	if !validVM(s, &params) {
		c.mu.Unlock()
		errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
		return
	}
	failure := ""
	if len(c.FailScaleOut) > 0 {
		failure, c.FailScaleOut = c.FailScaleOut[0], c.FailScaleOut[1:]
	}
	state := "Succeeded"
	if failure != "" {
		state = "Failed"
	}
	put := cloneVM(&params)
	v := &vm{id: name, vmID: fmt.Sprintf("00000000-0000-4000-8000-%012d", vmIDs.Add(1)), state: state, created: c.clock.Now(), put: &put}
	if z := zonesOf(params.Zones); len(z) > 0 {
		v.zone = z[0]
	}
	s.vms[name] = v
	answer := c.vmResource(s, v, false)
	hook := c.AfterScaleOut
	c.mu.Unlock()
	if hook != nil {
		hook(s.name)
	}
	resp.AddNonTerminalResponse(http.StatusCreated, nil) // a new VM answers 201, provisioningState Creating
	if failure != "" {
		resp.SetTerminalError(http.StatusOK, failure)
		return
	}
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientCreateOrUpdateResponse{VirtualMachine: answer}, nil)
	return
}

// setOfVM is the Flexible set the VM's PUT names, or the status and code
// of its refusal.
func (c *Cloud) setOfVM(params *armcompute.VirtualMachine) (*scaleSet, int, string) {
	p := params.Properties
	if p == nil || p.VirtualMachineScaleSet == nil || p.VirtualMachineScaleSet.ID == nil {
		return nil, http.StatusBadRequest, "InvalidParameter" // the fake models scale sets' VMs only
	}
	id := *p.VirtualMachineScaleSet.ID
	s, ok := c.sets[strings.ToLower(id[strings.LastIndex(id, "/")+1:])]
	switch {
	case !ok || !strings.EqualFold(id, setID(s.name)):
		return nil, http.StatusBadRequest, "InvalidParameter"
	case !s.flexible:
		return nil, http.StatusConflict, "OperationNotAllowed"
	}
	return s, 0, ""
}

// validVM says whether Azure would make the VM in the set: its location
// and zone fit the set's, it has a size, an image Azure takes, a computer
// name and an admin who logs in by SSH key or password, and network
// interfaces (made by the VM only with a networkApiVersion).
func validVM(s *scaleSet, vm *armcompute.VirtualMachine) bool {
	p := vm.Properties
	switch {
	case vm.Location == nil || !strings.EqualFold(*vm.Location, s.location) || !fitsZones(s, zonesOf(vm.Zones)):
		return false
	case p.HardwareProfile == nil || p.HardwareProfile.VMSize == nil:
		return false
	case p.StorageProfile == nil || p.StorageProfile.ImageReference == nil || !validImage(imageMap(p.StorageProfile.ImageReference)):
		return false
	case p.OSProfile == nil || p.OSProfile.ComputerName == nil || p.OSProfile.AdminUsername == nil || !logsIn(p.OSProfile):
		return false
	}
	n := p.NetworkProfile
	return n != nil && (len(n.NetworkInterfaceConfigurations) > 0 && n.NetworkAPIVersion != nil ||
		len(n.NetworkInterfaceConfigurations) == 0 && len(n.NetworkInterfaces) > 0)
}

// fitsZones: a regional set takes regional VMs, a zonal one VMs in one of
// its zones.
func fitsZones(s *scaleSet, zones []string) bool {
	if len(s.zones) == 0 {
		return len(zones) == 0
	}
	return len(zones) == 1 && slices.Contains(s.zones, zones[0])
}

func logsIn(os *armcompute.OSProfile) bool {
	l := os.LinuxConfiguration
	if l != nil && l.DisablePasswordAuthentication != nil && *l.DisablePasswordAuthentication {
		return l.SSH != nil && len(l.SSH.PublicKeys) > 0
	}
	return os.AdminPassword != nil
}

func zonesOf(zones []*string) []string {
	var out []string
	for _, z := range zones {
		if z != nil {
			out = append(out, *z)
		}
	}
	return out
}

func imageMap(r *armcompute.ImageReference) map[string]string {
	image := map[string]string{}
	for k, v := range map[string]*string{"id": r.ID, "publisher": r.Publisher, "offer": r.Offer, "sku": r.SKU,
		"version": r.Version, "sharedGalleryImageId": r.SharedGalleryImageID, "communityGalleryImageId": r.CommunityGalleryImageID} {
		if v != nil {
			image[k] = *v
		}
	}
	return image
}

// deleteVM is the DELETE of a VM
// (https://learn.microsoft.com/rest/api/compute/virtual-machines/delete).
func (c *Cloud) deleteVM(_ context.Context, rg, name string, _ *armcompute.VirtualMachinesClientBeginDeleteOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientDeleteResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, v := c.vmNamed(name)
	if v == nil || !strings.EqualFold(rg, ResourceGroup) {
		resp.SetTerminalResponse(http.StatusNoContent, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
		return
	}
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	if len(c.FailDelete) > 0 {
		var code string
		code, c.FailDelete = c.FailDelete[0], c.FailDelete[1:]
		resp.SetTerminalError(http.StatusOK, code)
		return
	}
	delete(s.vms, v.id)
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
	return
}

// setFilter is the one $filter the VM list takes.
var setFilter = regexp.MustCompile(`^'virtualMachineScaleSet/id' eq '([^']+)'$`)

// listVMs is the resource group's VM list
// (https://learn.microsoft.com/rest/api/compute/virtual-machines/list),
// of one set's VMs with its filter.
func (c *Cloud) listVMs(rg string, o *armcompute.VirtualMachinesClientListOptions) (resp azfake.PagerResponder[armcompute.VirtualMachinesClientListResponse]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.EqualFold(rg, ResourceGroup) {
		resp.AddResponseError(http.StatusNotFound, "ResourceGroupNotFound")
		return
	}
	only := ""
	if o != nil && o.Filter != nil {
		m := setFilter.FindStringSubmatch(*o.Filter)
		if m == nil {
			resp.AddResponseError(http.StatusBadRequest, "InvalidParameter")
			return
		}
		only = m[1]
	}
	var all []armcompute.VirtualMachine
	for _, s := range c.sets {
		if !s.flexible || only != "" && !strings.EqualFold(only, setID(s.name)) {
			continue
		}
		for _, v := range s.vms {
			all = append(all, c.vmResource(s, v, false))
		}
	}
	slices.SortFunc(all, func(a, b armcompute.VirtualMachine) int { return strings.Compare(*a.Name, *b.Name) })
	for i := 0; i < len(all) || i == 0; i += 2 {
		var page []*armcompute.VirtualMachine
		for j := i; j < min(i+2, len(all)); j++ {
			page = append(page, &all[j])
		}
		resp.AddPage(http.StatusOK, armcompute.VirtualMachinesClientListResponse{VirtualMachineListResult: armcompute.VirtualMachineListResult{Value: page}}, nil)
	}
	return
}
