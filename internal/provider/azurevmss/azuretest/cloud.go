// Package azuretest is a resource group of Uniform VM scale sets for tests
// of the azure-vmss provider: the Azure SDK's own fake servers
// (armcompute/fake) over a model of the sets that behaves as Azure
// documents it.
package azuretest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
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
	"k8s.io/utils/clock"
)

// Cloud is a resource group of Uniform VM scale sets behind the SDK's own
// fake servers (armcompute/fake), behaving as Azure documents it: raising a
// set's sku.capacity adds instances with the next instance IDs (never
// reused), DeleteInstances removes the named instances and lowers the
// capacity with them, a scale-out Azure cannot place fails its operation
// with AllocationFailed yet leaves the instances it started in provisioning
// state Failed, counted in the capacity (as cluster-autoscaler's Azure
// provider has to clean up after), and a missing instance is a 404. Every
// operation is a long-running one that answers 202 first. Requests can be
// throttled with a 429 and a Retry-After, in front of the fakes.
type Cloud struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	sets  map[string]*scaleSet // by lowercase name

	// FailScaleOut are the error codes the next scale-outs fail with.
	FailScaleOut []string
	// FailDelete are the error codes the next DeleteInstances fail with.
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
	// throttled is how many more requests answer 429, and with what
	// Retry-After (seconds).
	throttled  int
	retryAfter int

	log []Request
}

// Request is one request the cloud was sent, and its answer's status.
type Request struct {
	At     time.Time
	Method string
	Path   string
	Status int
}

type scaleSet struct {
	name, location, size string
	flexible             bool
	next                 int
	vms                  map[string]*vm
}

type vm struct {
	id, vmID, state, zone string
	created               time.Time
}

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

// AddSet makes a Uniform scale set of the VM size with n instances.
func (c *Cloud) AddSet(name, size string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &scaleSet{name: name, location: "westeurope", size: size, vms: map[string]*vm{}}
	c.sets[strings.ToLower(name)] = s
	for range n {
		s.add("Succeeded", c.clock.Now())
	}
}

// AddFlexibleSet makes a scale set of Flexible orchestration.
func (c *Cloud) AddFlexibleSet(name, size string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets[strings.ToLower(name)] = &scaleSet{name: name, location: "westeurope", size: size, flexible: true, vms: map[string]*vm{}}
}

// AddInstance adds an instance to the set as its own scaling would (or a
// cluster autoscaler's).
func (c *Cloud) AddInstance(set string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets[strings.ToLower(set)].add("Succeeded", c.clock.Now())
}

func (s *scaleSet) add(state string, now time.Time) *vm {
	v := &vm{id: strconv.Itoa(s.next), vmID: fmt.Sprintf("00000000-0000-4000-8000-%012d", vmIDs.Add(1)),
		state: state, zone: strconv.Itoa(s.next%3 + 1), created: now}
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

// Instances are the set's instance IDs and their provisioning states.
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

func (c *Cloud) setModel(s *scaleSet) armcompute.VirtualMachineScaleSet {
	mode := armcompute.OrchestrationModeUniform
	if s.flexible {
		mode = armcompute.OrchestrationModeFlexible
	}
	return armcompute.VirtualMachineScaleSet{
		Name: to.Ptr(s.name), Location: to.Ptr(s.location),
		SKU:        &armcompute.SKU{Name: to.Ptr(s.size), Tier: to.Ptr("Standard"), Capacity: to.Ptr(int64(len(s.vms)))},
		Properties: &armcompute.VirtualMachineScaleSetProperties{OrchestrationMode: &mode},
	}
}

func (c *Cloud) vmModel(s *scaleSet, v *vm) armcompute.VirtualMachineScaleSetVM {
	return armcompute.VirtualMachineScaleSetVM{
		ID: to.Ptr(c.armID(s, v.id)), InstanceID: to.Ptr(v.id), Name: to.Ptr(s.name + "_" + v.id),
		Location: to.Ptr(s.location), Zones: []*string{to.Ptr(v.zone)},
		SKU:        &armcompute.SKU{Name: to.Ptr(s.size), Tier: to.Ptr("Standard")},
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{ProvisioningState: to.Ptr(v.state), TimeCreated: to.Ptr(v.created), VMID: to.Ptr(v.vmID)},
	}
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
			Get: func(_ context.Context, rg, name string, _ *armcompute.VirtualMachineScaleSetsClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachineScaleSetsClientGetResponse], errResp azfake.ErrorResponder) {
				c.mu.Lock()
				defer c.mu.Unlock()
				if s := c.set(rg, name, &errResp); s != nil {
					resp.SetResponse(http.StatusOK, armcompute.VirtualMachineScaleSetsClientGetResponse{VirtualMachineScaleSet: c.setModel(s)}, nil)
				}
				return
			},
			BeginUpdate:          c.update,
			BeginDeleteInstances: c.deleteInstances,
		},
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

func (c *Cloud) update(_ context.Context, rg, name string, params armcompute.VirtualMachineScaleSetUpdate, _ *armcompute.VirtualMachineScaleSetsClientBeginUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachineScaleSetsClientUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	s := c.set(rg, name, &errResp)
	if s == nil {
		c.mu.Unlock()
		return
	}
	if params.SKU == nil || params.SKU.Capacity == nil || *params.SKU.Capacity < int64(len(s.vms)) {
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
	for int64(len(s.vms)) < *params.SKU.Capacity {
		s.add(state, c.clock.Now())
	}
	model := c.setModel(s)
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

func (t *transport) Do(req *http.Request) (*http.Response, error) {
	t.c.mu.Lock()
	r := Request{At: t.c.clock.Now(), Method: req.Method, Path: req.URL.Path}
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
	resp, err := next.Do(req)
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
	hook := t.c.Answered
	t.c.mu.Unlock()
	if hook != nil {
		hook(r)
	}
	return resp, err
}

// Throttle makes the next n requests answer 429 with Retry-After seconds.
func (c *Cloud) Throttle(n, seconds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttled, c.retryAfter = n, seconds
}
