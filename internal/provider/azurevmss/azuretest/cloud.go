// Package azuretest is a resource group of VM scale sets, Uniform and
// Flexible, for tests of the azure-vmss provider: the Azure SDK's own fake
// servers (armcompute/fake) over a model of the sets that behaves as Azure
// documents it. Cloud's comment says what it models and what it
// cannot show.
package azuretest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6/fake"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Cloud is a resource group of VM scale sets behind the SDK's own
// fake servers (armcompute/fake), behaving as Azure documents it: raising a
// set's sku.capacity adds instances with the next instance IDs (never
// reused), DeleteInstances removes the named instances and lowers the
// capacity with them, a scale-out Azure cannot place fails its operation
// with AllocationFailed yet leaves the instances it started in provisioning
// state Failed, counted in the capacity (as cluster-autoscaler's Azure
// provider has to clean up after), and a missing instance is a 404. Every
// operation is a long-running one that answers 202 first (a new VM's PUT:
// 201). Requests can be
// throttled with a 429 and a Retry-After, in front of the fakes. A restart
// of an instance or VM is answered by the cloud itself, with Azure's
// headers and error bodies, and counted (restart.go).
//
// Each set has a model (Model): the image and user data its new instances
// are made from. A PATCH of the model changes it for instances made after
// it only; an instance keeps the model it was made from, and reports
// latestModelApplied false once the set's model changed, as a set whose
// upgradePolicy.mode is Manual does (the fake never rolls a set, whatever
// its mode).
//
// A set of Flexible orchestration (Model.Flexible) holds standard VMs
// (Microsoft.Compute/virtualMachines), as
// https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-orchestration-modes
// has them:
//
//   - A PUT of a VM whose virtualMachineScaleSet.id names the set adds it
//     to the set (virtual-machine-scale-sets-attach-detach-vm): the set
//     must be Flexible (a Uniform one is refused with the message that page
//     quotes), a zonal set takes VMs in one of its zones only and a
//     regional set regional VMs only. The VM runs what its PUT says (its
//     image, its user data), not what the set's model says. A PUT of a name
//     that is there is an update: its tags change, its set or zone cannot
//     (PropertyChangeNotAllowed). It answers 201 then polls to the VM; a
//     VM Azure cannot place (FailScaleOut) ends the operation in that code
//     and stays, provisioningState Failed.
//   - A GET answers the VM with its resource ID, vmId, provisioningState
//     and timeCreated, an image's exactVersion, its user data only with
//     $expand=userData, never its adminPassword or customData; an unknown
//     VM is a 404 ResourceNotFound.
//   - The VM list of the resource group takes the filter
//     'virtualMachineScaleSet/id' eq '<set id>' (VirtualMachinesClientListOptions)
//     and answers in pages of two.
//   - A DELETE removes the VM (202, then polled); one that is not there
//     answers 204, as ARM's DELETE does.
//   - The set's own scaling (AddInstance) makes VMs named
//     <set>_<8 hex digits> from its model, without sluice's tag.
//
// What it cannot show: the network interfaces and disks a VM makes and
// deletes with it (deleteOption), extensions, a set's autoscale or
// scale-in policy deleting VMs, and whether Azure counts VMs added by name
// in the set's sku.capacity: the fake answers the number of VMs in the set,
// which Azure's documents do not state. The codes of its refusals of a bad
// PUT (InvalidParameter, OperationNotAllowed for a Uniform set) are the
// fake's: the pages quote the messages, not the codes.
type Cloud struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	sets  map[string]*scaleSet // by lowercase name

	// FailScaleOut are the error codes the next scale-outs (a Flexible
	// set's VM PUTs too) fail with.
	FailScaleOut []string
	// FailDelete are the error codes the next DeleteInstances (or VM
	// DELETEs) fail with.
	FailDelete []string
	// AfterScaleOut runs once a scale-out changed the set, before Azure
	// answers.
	AfterScaleOut func(set string)
	// Refused runs when a request is answered 429, on the caller's
	// goroutine.
	Refused func(Request)
	// Answered runs after each answer the fakes gave, on the caller's
	// goroutine.
	Answered func(Request)
	// DropAnswer, when it says so, loses the answer of a request the
	// cloud carried out (a connection reset after Azure acted): the caller
	// gets a transport error, not Azure's answer.
	DropAnswer func(Request) bool
	// throttled is how many more requests answer 429, and with what
	// Retry-After (seconds).
	throttled  int
	retryAfter int
	// refusals answer the next PATCHes that change a set's capacity.
	refusals []Refusal
	// restarts are the restart operations Azure accepted, by operation ID
	// (restart.go); opSeq numbers them.
	restarts map[string]*restart
	opSeq    int

	log []Request
}

// Request is one request the cloud was sent, and its answer's status.
type Request struct {
	At     time.Time
	Method string
	Path   string
	// Query is the request's raw query (api-version, $filter,
	// forceDeletion).
	Query  string
	Status int
}

type scaleSet struct {
	name, location, size string
	flexible             bool
	zones                []string // a Flexible set's
	upgrade              armcompute.UpgradeMode
	model                *model
	next                 int
	vms                  map[string]*vm // by instance ID; a Flexible set's by VM name
}

type vm struct {
	id, vmID, state, zone string
	created               time.Time
	model                 *model // the set's when the instance was made
	// put is a Flexible set's VM as its PUT made it (a VM the set's own
	// scaling made: as its model says).
	put *armcompute.VirtualMachine
	// restarts are the restarts Azure accepted (restart.go).
	restarts int
}

// model is one version of a set's model; a change makes a new one, so an
// instance's model is its set's while it is the same pointer.
type model struct {
	// image is the imageReference, by its JSON names (id, publisher,
	// offer, sku, version, ...).
	image map[string]string
	// userData is virtualMachineProfile.userData: base64, as Azure keeps
	// it.
	userData string
	// aks, for an AKS-managed set, is what AKS starts the kubelet with
	// (from the node pool; the model shows no user data).
	aks *kubelet
}

// Model is what a scale set's new instances are made from.
type Model struct {
	// Image is virtualMachineProfile.storageProfile.imageReference; zero
	// is AKSImage.
	Image armcompute.ImageReference
	// UpgradeMode is upgradePolicy.mode; "" is Manual, Azure's default.
	UpgradeMode armcompute.UpgradeMode
	// NodeLabels and NodeTaints are what the instances' kubelet registers
	// with: the model's user data is a boot script passing them as
	// --node-labels and --register-with-taints, as a self-managed set's
	// does. (An AKS-managed set's kubelet takes them from its AKS node
	// pool's nodeLabels and nodeTaints instead, through a customData
	// AKS writes and Azure never returns.)
	NodeLabels map[string]string
	NodeTaints []corev1.Taint
	// UserData, when set, is the model's user data in plain text (the
	// cloud keeps it base64-encoded), in place of the script made from
	// NodeLabels and NodeTaints.
	UserData string
	// AKSManaged leaves the model without user data, as an AKS node pool's
	// set is: AKS writes the kubelet's flags in a customData Azure never
	// returns (Kubelet then answers NodeLabels and NodeTaints, as AKS
	// would from the node pool).
	AKSManaged bool
	// Flexible makes a set of Flexible orchestration (FlexibleSet says how
	// it behaves); AKSManaged does not go with it (AKS does not use
	// Flexible sets).
	Flexible bool
	// Zones are a Flexible set's zones; none is a regional set.
	Zones []string
}

// AKSImage is the image a set's model has unless told: an AKS node image, a
// Compute Gallery image version in AKS's own subscription, as AKS node
// pools' sets have it.
const AKSImage = "/subscriptions/109a5e88-712a-48ae-9078-9ca8b3c81345/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/images/2204gen2containerd/versions/202411.12.0"

// LatestPlatformVersion is the version the cloud resolves a platform
// image's "latest" to: an instance's exactVersion.
const LatestPlatformVersion = "22.04.202411120"

// vmIDs numbers the VMs the cloud ever made, so each vmId is its own.
var vmIDs atomic.Int64

// The cloud's subscription and resource group.
const (
	Subscription  = "6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d"
	ResourceGroup = "MC_rg_aks_westeurope"
)

// NewCloud is an empty resource group; clk dates instances and requests.
func NewCloud(clk clock.PassiveClock) *Cloud {
	return &Cloud{clock: clk, sets: map[string]*scaleSet{}}
}

// AddSet makes a Uniform scale set of the VM size with n instances, whose
// model is the zero Model's.
func (c *Cloud) AddSet(name, size string, n int) {
	c.AddSetWithModel(name, size, n, Model{})
}

// AddSetWithModel makes a scale set of the VM size with n instances made
// from the model m: Uniform, or Flexible when m says so (its n VMs are the
// set's own, made from its model, not sluice's).
func (c *Cloud) AddSetWithModel(name, size string, n int, m Model) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.AKSManaged = m.AKSManaged && !m.Flexible
	s := &scaleSet{name: name, location: "westeurope", size: size, upgrade: m.UpgradeMode, model: newModel(m), vms: map[string]*vm{},
		flexible: m.Flexible, zones: slices.Clone(m.Zones)}
	if s.upgrade == "" {
		s.upgrade = armcompute.UpgradeModeManual
	}
	c.sets[strings.ToLower(name)] = s
	for range n {
		s.add("Succeeded", c.clock.Now())
	}
}

func newModel(m Model) *model {
	image := imageMap(&m.Image)
	if len(image) == 0 {
		image["id"] = AKSImage
	}
	if m.AKSManaged {
		return &model{image: image, aks: &kubelet{labels: maps.Clone(m.NodeLabels), taints: slices.Clone(m.NodeTaints)}}
	}
	text := m.UserData
	if text == "" {
		text = bootScript(m.NodeLabels, m.NodeTaints)
	}
	return &model{image: image, userData: base64.StdEncoding.EncodeToString([]byte(text))}
}

// kubelet is what an AKS node pool registers its kubelets with.
type kubelet struct {
	labels map[string]string
	taints []corev1.Taint
}

// bootScript is a self-managed set's boot script starting its kubelet with
// the labels and taints.
func bootScript(labels map[string]string, taints []corev1.Taint) string {
	args := []string{"/usr/bin/kubelet", "--kubeconfig=/var/lib/kubelet/kubeconfig", "--cloud-provider=external"}
	if len(labels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			kv = append(kv, k+"="+labels[k])
		}
		args = append(args, "--node-labels="+strings.Join(kv, ","))
	}
	if len(taints) > 0 {
		var ts []string
		for _, t := range taints {
			s := t.Key
			if t.Value != "" {
				s += "=" + t.Value
			}
			ts = append(ts, s+":"+string(t.Effect))
		}
		args = append(args, "--register-with-taints="+strings.Join(ts, ","))
	}
	return "#!/bin/bash\nset -euo pipefail\nexec " + strings.Join(args, " ") + "\n"
}

// AddFlexibleSet makes an empty regional scale set of Flexible
// orchestration whose model is the zero Model's.
func (c *Cloud) AddFlexibleSet(name, size string) {
	c.AddSetWithModel(name, size, 0, Model{Flexible: true})
}

// AddInstance adds an instance to the set as its own scaling would (or a
// cluster autoscaler's).
func (c *Cloud) AddInstance(set string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets[strings.ToLower(set)].add("Succeeded", c.clock.Now())
}

func (s *scaleSet) add(state string, now time.Time) *vm {
	if s.flexible {
		return s.addOwnVM(state, now)
	}
	v := &vm{id: strconv.Itoa(s.next), vmID: fmt.Sprintf("00000000-0000-4000-8000-%012d", vmIDs.Add(1)),
		state: state, zone: strconv.Itoa(s.next%3 + 1), created: now, model: s.model}
	s.next++
	s.vms[v.id] = v
	return v
}

func (s *scaleSet) ids() []string {
	out := make([]string, 0, len(s.vms))
	for id := range s.vms {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	return out
}

// Instances are the set's instance IDs (a Flexible set's VM names) and
// their provisioning states.
func (c *Cloud) Instances(set string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for id, v := range c.sets[strings.ToLower(set)].vms {
		out[id] = v.state
	}
	return out
}

// VMIDs are the vmIds of the set's instances, by instance ID order.
func (c *Cloud) VMIDs(set string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sets[strings.ToLower(set)]
	var out []string
	for _, id := range s.ids() {
		out = append(out, s.vms[id].vmID)
	}
	return out
}

// Count is how many requests of the method went to paths containing part.
func (c *Cloud) Count(method, part string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.log {
		if r.Method == method && strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

// Requests are the requests sent so far.
func (c *Cloud) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

func (c *Cloud) armID(s *scaleSet, id string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%s", Subscription, ResourceGroup, s.name, id)
}

// setModel is the set as GET answers it; its userData only when asked for
// with $expand=userData
// (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/get#expandtypesforgetvmscalesets).
func (c *Cloud) setModel(s *scaleSet, userData bool) armcompute.VirtualMachineScaleSet {
	mode := armcompute.OrchestrationModeUniform
	if s.flexible {
		mode = armcompute.OrchestrationModeFlexible
	}
	profile := &armcompute.VirtualMachineScaleSetVMProfile{
		StorageProfile: &armcompute.VirtualMachineScaleSetStorageProfile{ImageReference: imageReference(s.model.image, false)}}
	if userData && s.model.userData != "" {
		profile.UserData = to.Ptr(s.model.userData)
	}
	set := armcompute.VirtualMachineScaleSet{
		ID: to.Ptr(setID(s.name)), Name: to.Ptr(s.name), Location: to.Ptr(s.location), Type: to.Ptr("Microsoft.Compute/virtualMachineScaleSets"),
		SKU: &armcompute.SKU{Name: to.Ptr(s.size), Tier: to.Ptr("Standard"), Capacity: to.Ptr(int64(len(s.vms)))},
		Properties: &armcompute.VirtualMachineScaleSetProperties{OrchestrationMode: &mode,
			UpgradePolicy: &armcompute.UpgradePolicy{Mode: to.Ptr(s.upgrade)}, VirtualMachineProfile: profile},
	}
	if s.flexible {
		flexibleModel(s, &set)
	}
	return set
}

func setID(name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s", Subscription, ResourceGroup, name)
}

// vmModel is the instance as GET and List answer it: its storageProfile is
// the model it was made from, with a platform image's exactVersion
// (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-set-vms/get).
func (c *Cloud) vmModel(s *scaleSet, v *vm) armcompute.VirtualMachineScaleSetVM {
	return armcompute.VirtualMachineScaleSetVM{
		ID: to.Ptr(c.armID(s, v.id)), InstanceID: to.Ptr(v.id), Name: to.Ptr(s.name + "_" + v.id),
		Location: to.Ptr(s.location), Zones: []*string{to.Ptr(v.zone)},
		SKU: &armcompute.SKU{Name: to.Ptr(s.size), Tier: to.Ptr("Standard")},
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{ProvisioningState: to.Ptr(v.state), TimeCreated: to.Ptr(v.created), VMID: to.Ptr(v.vmID),
			LatestModelApplied: to.Ptr(v.model == s.model),
			StorageProfile:     &armcompute.StorageProfile{ImageReference: imageReference(v.model.image, true)}},
	}
}

func imageReference(image map[string]string, instance bool) *armcompute.ImageReference {
	get := func(k string) *string {
		if v, ok := image[k]; ok {
			return to.Ptr(v)
		}
		return nil
	}
	r := &armcompute.ImageReference{ID: get("id"), Publisher: get("publisher"), Offer: get("offer"), SKU: get("sku"), Version: get("version"),
		SharedGalleryImageID: get("sharedGalleryImageId"), CommunityGalleryImageID: get("communityGalleryImageId")}
	if instance && r.Version != nil {
		// exactVersion "differs from version only if the value specified
		// in version field is latest" (ImageReference, REST reference).
		r.ExactVersion = to.Ptr(*r.Version)
		if strings.EqualFold(*r.Version, "latest") {
			r.ExactVersion = to.Ptr(LatestPlatformVersion)
		}
	}
	return r
}

// validImage says whether Azure takes the imageReference: a resource ID
// (or a shared or community gallery's unique ID), or a platform image's
// publisher, offer, sku and version, not both.
func validImage(image map[string]string) bool {
	ids := 0
	for _, k := range []string{"id", "sharedGalleryImageId", "communityGalleryImageId"} {
		if image[k] != "" {
			ids++
		}
	}
	urn := 0
	for _, k := range []string{"publisher", "offer", "sku", "version"} {
		if image[k] != "" {
			urn++
		}
	}
	return ids == 1 && urn == 0 || ids == 0 && urn == 4
}

// set finds the scale set, or answers 404 as Azure does.
func (c *Cloud) set(rg, name string, errResp *azfake.ErrorResponder) *scaleSet {
	s, ok := c.sets[strings.ToLower(name)]
	if !ok || !strings.EqualFold(rg, ResourceGroup) {
		errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
		return nil
	}
	return s
}

func (c *Cloud) servers() *fake.ServerFactory {
	return &fake.ServerFactory{
		VirtualMachineScaleSetsServer: fake.VirtualMachineScaleSetsServer{
			Get: func(_ context.Context, rg, name string, o *armcompute.VirtualMachineScaleSetsClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachineScaleSetsClientGetResponse], errResp azfake.ErrorResponder) {
				c.mu.Lock()
				defer c.mu.Unlock()
				userData := o != nil && o.Expand != nil && *o.Expand == armcompute.ExpandTypesForGetVMScaleSetsUserData
				if s := c.set(rg, name, &errResp); s != nil {
					resp.SetResponse(http.StatusOK, armcompute.VirtualMachineScaleSetsClientGetResponse{VirtualMachineScaleSet: c.setModel(s, userData)}, nil)
				}
				return
			},
			BeginUpdate:          c.update,
			BeginDeleteInstances: c.deleteInstances,
		},
		VirtualMachinesServer: c.vmServer(),
		VirtualMachineScaleSetVMsServer: fake.VirtualMachineScaleSetVMsServer{
			Get: func(_ context.Context, rg, name, id string, _ *armcompute.VirtualMachineScaleSetVMsClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachineScaleSetVMsClientGetResponse], errResp azfake.ErrorResponder) {
				c.mu.Lock()
				defer c.mu.Unlock()
				s := c.set(rg, name, &errResp)
				if s == nil {
					return
				}
				v, ok := s.vms[id]
				if !ok {
					errResp.SetResponseError(http.StatusNotFound, "NotFound")
					return
				}
				resp.SetResponse(http.StatusOK, armcompute.VirtualMachineScaleSetVMsClientGetResponse{VirtualMachineScaleSetVM: c.vmModel(s, v)}, nil)
				return
			},
			NewListPager: func(rg, name string, _ *armcompute.VirtualMachineScaleSetVMsClientListOptions) (resp azfake.PagerResponder[armcompute.VirtualMachineScaleSetVMsClientListResponse]) {
				c.mu.Lock()
				defer c.mu.Unlock()
				s, ok := c.sets[strings.ToLower(name)]
				if !ok {
					resp.AddResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				// Pages of two, so the provider must follow nextLink.
				ids := s.ids()
				for i := 0; i < len(ids) || i == 0; i += 2 {
					var page []*armcompute.VirtualMachineScaleSetVM
					for _, id := range ids[i:min(i+2, len(ids))] {
						page = append(page, to.Ptr(c.vmModel(s, s.vms[id])))
					}
					resp.AddPage(http.StatusOK, armcompute.VirtualMachineScaleSetVMsClientListResponse{
						VirtualMachineScaleSetVMListResult: armcompute.VirtualMachineScaleSetVMListResult{Value: page}}, nil)
				}
				return
			},
		},
	}
}

// update is the PATCH of a set
// (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/update):
// a JSON merge patch of its model (an imageReference's field sent as null
// is removed) and of its sku.capacity. A model change applies to the
// instances made after it, in the same PATCH too.
func (c *Cloud) update(ctx context.Context, rg, name string, params armcompute.VirtualMachineScaleSetUpdate, _ *armcompute.VirtualMachineScaleSetsClientBeginUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachineScaleSetsClientUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	s := c.set(rg, name, &errResp)
	if s == nil {
		c.mu.Unlock()
		return
	}
	var capacity *int64
	if params.SKU != nil {
		capacity = params.SKU.Capacity
	}
	next, changed := patchModel(ctx, s.model, params)
	if capacity != nil && *capacity < int64(len(s.vms)) || changed && !validImage(next.image) {
		c.mu.Unlock()
		errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
		return
	}
	if changed {
		s.model = &next
	}
	failure := ""
	if capacity != nil && len(c.FailScaleOut) > 0 {
		failure, c.FailScaleOut = c.FailScaleOut[0], c.FailScaleOut[1:]
	}
	state := "Succeeded"
	if failure != "" {
		state = "Failed"
	}
	for capacity != nil && int64(len(s.vms)) < *capacity {
		s.add(state, c.clock.Now())
	}
	model := c.setModel(s, false)
	hook := c.AfterScaleOut
	c.mu.Unlock()
	if hook != nil {
		hook(name)
	}
	resp.AddNonTerminalResponse(http.StatusOK, nil) // PATCH answers 200, provisioningState Updating
	if failure != "" {
		resp.SetTerminalError(http.StatusOK, failure)
		return
	}
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachineScaleSetsClientUpdateResponse{VirtualMachineScaleSet: model}, nil)
	return
}

// patchModel is the model after the PATCH's changes to it (the image
// reference as the request's raw body has it, the user data), and whether
// it changed.
func patchModel(ctx context.Context, m *model, params armcompute.VirtualMachineScaleSetUpdate) (model, bool) {
	next, changed := *m, false
	if patch, ok := ctx.Value(imagePatchKey{}).(map[string]*string); ok {
		next.image, changed = maps.Clone(m.image), true
		for k, v := range patch {
			if v == nil {
				delete(next.image, k)
			} else {
				next.image[k] = *v
			}
		}
	}
	if p := params.Properties; p != nil && p.VirtualMachineProfile != nil && p.VirtualMachineProfile.UserData != nil {
		next.userData, changed = *p.VirtualMachineProfile.UserData, true
	}
	return next, changed
}

func (c *Cloud) deleteInstances(_ context.Context, rg, name string, ids armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs, _ *armcompute.VirtualMachineScaleSetsClientBeginDeleteInstancesOptions) (resp azfake.PollerResponder[armcompute.VirtualMachineScaleSetsClientDeleteInstancesResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.set(rg, name, &errResp)
	if s == nil {
		return
	}
	for _, id := range ids.InstanceIDs {
		if _, ok := s.vms[*id]; !ok {
			errResp.SetResponseError(http.StatusNotFound, "NotFound")
			return
		}
	}
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	if len(c.FailDelete) > 0 {
		var code string
		code, c.FailDelete = c.FailDelete[0], c.FailDelete[1:]
		resp.SetTerminalError(http.StatusOK, code)
		return
	}
	for _, id := range ids.InstanceIDs {
		delete(s.vms, *id)
	}
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachineScaleSetsClientDeleteInstancesResponse{}, nil)
	return
}

// transport logs every request and throttles as told, in front of the
// fakes.
type transport struct {
	c    *Cloud
	next *fake.ServerFactoryTransport
}

// Transport is the cloud's end of the SDK's clients
// (policy.ClientOptions.Transport).
func (c *Cloud) Transport() policy.Transporter {
	return &transport{c: c, next: fake.NewServerFactoryTransport(c.servers())}
}

// imagePatchKey holds, in a PATCH's context, the imageReference's fields as
// sent, null ones too (the fakes' typed parameters cannot tell a null from
// an absent field).
type imagePatchKey struct{}

var setPath = regexp.MustCompile(`(?i)/providers/Microsoft\.Compute/virtualMachineScaleSets/[^/]+$`)

// withImagePatch puts a PATCH's imageReference in its context.
func withImagePatch(req *http.Request) (*http.Request, error) {
	if req.Method != http.MethodPatch || !setPath.MatchString(req.URL.Path) || req.Body == nil {
		return req, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var patch struct {
		Properties struct {
			VirtualMachineProfile struct {
				StorageProfile struct {
					ImageReference map[string]*string `json:"imageReference"`
				} `json:"storageProfile"`
			} `json:"virtualMachineProfile"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(body, &patch); err != nil {
		return req, nil // the fakes answer it
	}
	if ref := patch.Properties.VirtualMachineProfile.StorageProfile.ImageReference; ref != nil {
		req = req.WithContext(context.WithValue(req.Context(), imagePatchKey{}, ref))
	}
	return req, nil
}

func (t *transport) Do(req *http.Request) (*http.Response, error) {
	req, err := withImagePatch(req)
	if err != nil {
		return nil, err
	}
	scaleOut, err := scalesOut(req)
	if err != nil {
		return nil, err
	}
	t.c.mu.Lock()
	r := Request{At: t.c.clock.Now(), Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery}
	if scaleOut && t.c.throttled == 0 && len(t.c.refusals) > 0 {
		var refusal Refusal
		refusal, t.c.refusals = t.c.refusals[0], t.c.refusals[1:]
		r.Status = refusal.Status
		t.c.log = append(t.c.log, r)
		t.c.mu.Unlock()
		return refusal.response(req), nil
	}
	if t.c.throttled > 0 {
		t.c.throttled--
		r.Status = http.StatusTooManyRequests
		t.c.log = append(t.c.log, r)
		after, refused := t.c.retryAfter, t.c.Refused
		t.c.mu.Unlock()
		if refused != nil {
			refused(r)
		}
		body := `{"error":{"code":"TooManyRequests","message":"The request is being throttled as the limit has been reached for operation group."}}`
		h := http.Header{}
		h.Set("Retry-After", strconv.Itoa(after))
		h.Set("x-ms-error-code", "TooManyRequests")
		h.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests", Header: h,
			Body: io.NopCloser(bytes.NewBufferString(body)), Request: req}, nil
	}
	next := t.next
	t.c.mu.Unlock()
	resp, served := t.c.serveRestart(req)
	if !served {
		resp, err = next.Do(req)
	}
	if err != nil {
		t.c.mu.Lock()
		defer t.c.mu.Unlock()
		// The fakes keep a poller that ended in an error as the pending
		// operation of its URL, so the next request to that URL (a retried
		// DeleteInstances) would get its empty remains; Azure would start
		// a new operation. Fresh fakes over the same cloud do.
		t.next = fake.NewServerFactoryTransport(t.c.servers())
		t.c.log = append(t.c.log, r)
		return resp, err
	}
	t.c.mu.Lock()
	r.Status = resp.StatusCode
	t.c.log = append(t.c.log, r)
	hook, drop := t.c.Answered, t.c.DropAnswer
	t.c.mu.Unlock()
	if drop != nil && drop(r) {
		t.c.mu.Lock()
		t.next = fake.NewServerFactoryTransport(t.c.servers()) // Azure's operation goes on; the caller asks anew
		t.c.mu.Unlock()
		return nil, errDropped
	}
	if hook != nil {
		hook(r)
	}
	return resp, err
}

// errDropped is a lost answer, as a reset connection is.
var errDropped = errors.New("read: connection reset by peer")

// Refusal is how Azure Resource Manager refuses a request before it starts
// an operation: the HTTP status and the error body's code and message.
type Refusal struct {
	Status        int
	Code, Message string
}

// SkuNotAvailable is Compute's refusal of a VM size it has no capacity for
// in the location or zone now, as
// https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-sku-not-available
// quotes it.
func SkuNotAvailable(set string) Refusal {
	return Refusal{Status: http.StatusConflict, Code: "SkuNotAvailable", Message: fmt.Sprintf(
		"The requested size for resource '/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s' is currently not available in location 'westeurope' zones '1' for subscription '%s'. "+
			"Please try another size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable for details.", Subscription, ResourceGroup, set, Subscription)}
}

// CoreQuotaExceeded is Compute's refusal of a request that would take the
// subscription past its regional cores quota, as
// https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-resource-quota
// quotes it (code OperationNotAllowed, the quota named in the message).
func CoreQuotaExceeded() Refusal {
	return Refusal{Status: http.StatusConflict, Code: "OperationNotAllowed",
		Message: "Operation results in exceeding quota limits of Core. Maximum allowed: 4, Current in use: 4, Additional requested: 4."}
}

// RefuseScaleOut makes the next scale-out be refused as r says, with
// nothing changed: a PATCH that changes a set's sku.capacity, or the PUT of
// a VM (into a Flexible set).
func (c *Cloud) RefuseScaleOut(r Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refusals = append(c.refusals, r)
}

// response is the refusal as ARM sends it: the status, and the error in
// the body as {"error":{"code":...,"message":...}} (no x-ms-error-code
// header: the SDK reads the code from the body).
func (r Refusal) response(req *http.Request) *http.Response {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"code": r.Code, "message": r.Message}}) // strings always marshal
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	return &http.Response{StatusCode: r.Status, Status: fmt.Sprintf("%d %s", r.Status, http.StatusText(r.Status)), Header: h,
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}
}

// vmPath is a standard VM's path.
var vmPath = regexp.MustCompile(`(?i)/providers/Microsoft\.Compute/virtualMachines/[^/]+$`)

// scalesOut says whether the request adds a machine: the PUT of a VM, or a
// PATCH of a set's sku.capacity. It leaves the body to be read again.
func scalesOut(req *http.Request) (bool, error) {
	if req.Method == http.MethodPut && vmPath.MatchString(req.URL.Path) {
		return true, nil
	}
	if req.Method != http.MethodPatch || !setPath.MatchString(req.URL.Path) || req.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return false, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var patch struct {
		SKU struct {
			Capacity *int64 `json:"capacity"`
		} `json:"sku"`
	}
	return json.Unmarshal(body, &patch) == nil && patch.SKU.Capacity != nil, nil
}

// Throttle makes the next n requests answer 429 with Retry-After seconds.
func (c *Cloud) Throttle(n, seconds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttled, c.retryAfter = n, seconds
}

// Kubelet is what the kubelet of the set's instance registers its Node
// with: the labels and taints the user data of the model the instance was
// made from passes it (--node-labels, --register-with-taints), not the
// set's model now, and never a NodePool's. ok is false for an unknown
// instance or flags a kubelet would refuse to start with. (A kubelet adds
// its own well-known labels, and cloud-node-manager the zone's; those are
// not the model's.)
//
// A Flexible set's VM (instanceID is then its name) registers with what
// the user data of its own PUT passes the kubelet: a VM is made from what
// its PUT says, not from the set's model.
func (c *Cloud) Kubelet(set, instanceID string) (labels map[string]string, taints []corev1.Taint, ok bool) {
	c.mu.Lock()
	s, found := c.sets[strings.ToLower(set)]
	var m *model
	var userData *string
	if v := s.find(found, instanceID); v != nil {
		m = v.model
		if v.put != nil && v.put.Properties != nil {
			m, userData = &model{}, v.put.Properties.UserData
		}
	}
	c.mu.Unlock()
	if m == nil {
		return nil, nil, false
	}
	if userData != nil {
		m.userData = *userData
	}
	if m.aks != nil {
		return maps.Clone(m.aks.labels), slices.Clone(m.aks.taints), true
	}
	text, err := base64.StdEncoding.DecodeString(m.userData)
	if err != nil {
		return nil, nil, false // Azure takes user data in base64 only
	}
	return kubeletFlags(string(text))
}

// kubeletFlags reads the kubelet's --node-labels and --register-with-taints
// from a boot script, as the kubelet parses them: labels key=value,
// taints key[=value]:Effect, each list comma-separated; a flag given
// twice adds to the first.
func kubeletFlags(script string) (map[string]string, []corev1.Taint, bool) {
	words := strings.FieldsFunc(script, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '"' || r == '\'' })
	labels := map[string]string{}
	var taints []corev1.Taint
	for i, w := range words {
		name, value, hasValue := strings.Cut(w, "=")
		if name != "--node-labels" && name != "--register-with-taints" {
			continue
		}
		if !hasValue && i+1 < len(words) {
			value = words[i+1]
		}
		for _, item := range strings.Split(value, ",") {
			if item == "" {
				continue
			}
			if name == "--node-labels" {
				k, v, found := strings.Cut(item, "=")
				if !found || k == "" {
					return nil, nil, false
				}
				labels[k] = v
				continue
			}
			kv, effect, found := strings.Cut(item, ":")
			k, v, _ := strings.Cut(kv, "=")
			switch e := corev1.TaintEffect(effect); {
			case !found || k == "":
				return nil, nil, false
			case e == corev1.TaintEffectNoSchedule, e == corev1.TaintEffectPreferNoSchedule, e == corev1.TaintEffectNoExecute:
				taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: e})
			default:
				return nil, nil, false
			}
		}
	}
	return labels, taints, true
}
