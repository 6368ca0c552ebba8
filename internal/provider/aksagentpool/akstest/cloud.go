// Package akstest is one AKS managed cluster for tests of the aks-agentpool
// provider: the Azure SDK's own fake servers (armcontainerservice/v6/fake)
// over a model of the cluster's agent pools that behaves as AKS documents
// it.
//
// The model: an agent pool has a count, a VM size, nodeLabels, nodeTaints,
// nodeInitializationTaints, enableAutoScaling, a node image version and a
// provisioning state, and its machines are the instances of its scale set
// in the node resource group MC_<group>_<cluster>_<location>. Raising the
// count with a PUT of the agent pool makes it the pool's count at once and
// starts an operation; the new machines appear in the Machines list while
// it runs (at its first poll, or when Release ends a Hold), and it ends
// Succeeded after, as AKS's scale-out does. Machines are named as AKS
// names them, aks-<pool>-<8 digits>-vmss<instance ID in 6 base-36 digits>
// (the Machines API examples of the 2025-02-01 REST reference), with
// instance IDs never reused; DeleteMachines removes the named machines and
// lowers the count with them. A PUT or a DeleteMachines while another operation
// runs on the pool (one of its own, or one a test starts as AKS's upgrade)
// is refused 409 OperationNotAllowed with the message AKS answers ("Another
// operation (Scaling) is in progress ..."). Every operation is a
// long-running one polled through the SDK's poller, and ends when its last
// poll is answered. A machine's kubelet (Kubelet) registers with AKS's own
// labels, the pool's nodeLabels, its nodeTaints and the
// nodeInitializationTaints the pool's scale set model held when the
// machine was made.
//
// What it cannot show:
//   - nodeInitializationTaints is a preview field, not in the GA API
//     (2025-02-01) armcontainerservice/v6 speaks. The fake answers a GET of
//     an agent pool at a preview api-version itself, outside the SDK's
//     fake, with the GA model plus that field; it knows nothing else of the
//     preview API. A PUT that carries the field (which AKS refuses at the
//     agent pool level) is not refused.
//   - AKS's own reconciliation: it never repairs, upgrades or replaces a
//     machine by itself, and a change of a pool's nodeLabels or nodeTaints
//     reaches only the machines made after it (AKS also updates the Nodes
//     already there).
//   - What AKS leaves behind after an allocation failure part-way through
//     a scale-out: FailScale rolls the pool back to what it was.
//   - The error code AKS answers a DeleteMachines of an unknown machine
//     with (the fake answers 400 InvalidParameter).
//   - The provisioning state of a pool during DeleteMachines (the fake
//     says Scaling).
//   - If-Match on a PUT of an agent pool: the fake answers 412
//     PreconditionFailed on a stale eTag. That is our assumption, not
//     verified: the REST reference lists the header, but no answer of AKS
//     to a stale one was found.
//   - Surge nodes of an upgrade come only when a test adds them
//     (AddSurge); StartOperation makes none.
package akstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake/server"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// The cluster's names.
const (
	Subscription  = "6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d"
	ResourceGroup = "rg"
	Cluster       = "aks"
	Location      = "westeurope"
	// NodeResourceGroup is where AKS keeps the pools' scale sets, named as
	// AKS names it by default.
	NodeResourceGroup = "MC_" + ResourceGroup + "_" + Cluster + "_" + Location
	// NodeImageVersion is a pool's node image unless told.
	NodeImageVersion = "AKSUbuntu-2204gen2containerd-202411.12.0"
)

// Pool is an agent pool's model, as AddPool takes it.
type Pool struct {
	VMSize                   string // Standard_D4s_v5 when ""
	NodeLabels               map[string]string
	NodeTaints               []corev1.Taint
	NodeInitializationTaints []corev1.Taint
	EnableAutoScaling        bool
	NodeImageVersion         string // NodeImageVersion when ""
	Spot                     bool
	Zones                    []string
}

// Cloud is one managed cluster's agent pools behind the SDK's fake servers.
type Cloud struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	pools map[string]*pool

	// DropAnswer, when it says so, loses the answer of a request the cloud
	// carried out (a connection reset after AKS accepted it): the caller
	// gets a transport error; the operation goes on and ends.
	DropAnswer func(Request) bool
	// Answered runs after each answer, on the caller's goroutine.
	Answered func(Request)

	held                  bool      // scale-outs' machines wait for Release
	refusals              []Refusal // the next count-raising PUTs
	failures              []string  // codes the next scale-outs' operations fail with
	throttled, retryAfter int

	log     []Request
	lastPut map[string]map[string]any
	lro     map[string]*fake.ServerFactoryTransport // by operation path
}

// Request is one request the cloud was sent, and its answer's status.
type Request struct {
	At     time.Time
	Method string
	Path   string
	Status int
}

type pool struct {
	name, vmSize, image, state, hash string
	labels                           map[string]string
	taints, initTaints               []corev1.Taint
	appliedInit                      []corev1.Taint // the scale set model's
	autoscale, spot                  bool
	zones                            []string
	etag                             int
	operation                        string // "" when none runs
	opPath                           string // the request path of the operation, for its polls
	next                             int    // the next instance ID
	count                            int    // the count AKS has, ahead of machines while a scale-out runs
	failing                          string // the code the running scale-out fails with
	machines                         map[string]*machine
}

type machine struct {
	name    string
	id      int
	zone    string
	created time.Time
	labels  map[string]string
	taints  []corev1.Taint
}

// NewCloud is a cluster with no agent pools; clk dates machines and
// requests.
func NewCloud(clk clock.PassiveClock) *Cloud {
	return &Cloud{clock: clk, pools: map[string]*pool{}, lastPut: map[string]map[string]any{}, lro: map[string]*fake.ServerFactoryTransport{}}
}

// AddPool makes an agent pool with count machines.
func (c *Cloud) AddPool(name string, count int, m Pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &pool{name: name, vmSize: m.VMSize, image: m.NodeImageVersion, state: "Succeeded", hash: hashOf(name),
		labels: maps.Clone(m.NodeLabels), taints: slices.Clone(m.NodeTaints), initTaints: slices.Clone(m.NodeInitializationTaints),
		appliedInit: slices.Clone(m.NodeInitializationTaints), autoscale: m.EnableAutoScaling, spot: m.Spot, zones: slices.Clone(m.Zones),
		etag: 1, machines: map[string]*machine{}}
	if p.vmSize == "" {
		p.vmSize = "Standard_D4s_v5"
	}
	if p.image == "" {
		p.image = NodeImageVersion
	}
	c.pools[name] = p
	for range count {
		p.add(c.clock.Now())
	}
	p.count = count
}

// hashOf is the 8 digits AKS puts in a pool's scale set name (derived from
// the cluster; here from the pool too, so each set's differs).
func hashOf(pool string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(Cluster + "/" + pool)) // never fails
	return fmt.Sprintf("%08d", h.Sum32()%100000000)
}

func (p *pool) vmss() string { return "aks-" + p.name + "-" + p.hash + "-vmss" }

// add makes the next machine as the pool's scale set model is now.
func (p *pool) add(now time.Time) *machine {
	id := p.next
	p.next++
	suffix := strconv.FormatInt(int64(id), 36)
	m := &machine{name: p.vmss() + strings.Repeat("0", max(0, 6-len(suffix))) + suffix, id: id, created: now,
		labels: p.kubeletLabels(), taints: append(slices.Clone(p.taints), p.appliedInit...)}
	if len(p.zones) > 0 {
		m.zone = p.zones[id%len(p.zones)]
	}
	if p.spot {
		// AKS taints a spot pool's nodes itself.
		m.taints = append(m.taints, corev1.Taint{Key: "kubernetes.azure.com/scalesetpriority", Value: "spot", Effect: corev1.TaintEffectNoSchedule})
	}
	p.machines[m.name] = m
	return m
}

// kubeletLabels are AKS's own labels on the pool's nodes and its
// nodeLabels.
func (p *pool) kubeletLabels() map[string]string {
	l := maps.Clone(p.labels)
	if l == nil {
		l = map[string]string{}
	}
	l["agentpool"] = p.name
	l["kubernetes.azure.com/agentpool"] = p.name
	l["kubernetes.azure.com/cluster"] = NodeResourceGroup
	l["kubernetes.azure.com/mode"] = "user"
	l["kubernetes.azure.com/node-image-version"] = p.image
	if p.spot {
		l["kubernetes.azure.com/scalesetpriority"] = "spot"
	}
	return l
}

// AddMachine adds a machine to the pool that sluice did not ask for (the
// cluster autoscaler's, a person's `az aks nodepool scale`), and returns its
// name.
func (c *Cloud) AddMachine(pool string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[pool]
	p.etag++
	p.count++
	return p.add(c.clock.Now()).name
}

// AddSurge adds a machine to the pool without changing its count, as AKS's
// upgrade adds its surge nodes, and returns its name.
func (c *Cloud) AddSurge(pool string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pools[pool].add(c.clock.Now()).name
}

// PoolCount is the agent pool's count as AKS has it.
func (c *Cloud) PoolCount(pool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pools[pool].count
}

// Hold keeps the machines of scale-outs from appearing, and their
// operations running (polls answer InProgress), until Release: AKS has
// raised the count and not made the VMs yet.
func (c *Cloud) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
}

// Release ends Hold: the machines appear at the next poll, and the
// operations then end as they would have.
func (c *Cloud) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
}

// progress brings a running scale-out's machines into the pool, unless
// held or failing.
func (c *Cloud) progress(p *pool) {
	if c.held || p.failing != "" {
		return
	}
	for len(p.machines) < p.count {
		p.add(c.clock.Now())
	}
}

// Machines are the pool's machine names and their provisioning states.
func (c *Cloud) Machines(pool string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for name := range c.pools[pool].machines {
		out[name] = "Succeeded"
	}
	return out
}

// Kubelet is what the machine's kubelet registers its Node with: AKS's own
// labels and the pool's nodeLabels, its nodeTaints and the initialization
// taints, as the pool had them when the machine was made; the node name
// (AKS names a node after its machine) and the providerID
// cloud-provider-azure writes (the resource group lowercased). ok is false
// for an unknown machine.
func (c *Cloud) Kubelet(machineName string) (labels map[string]string, taints []corev1.Taint, nodeName, providerID string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		if m, found := p.machines[machineName]; found {
			id := "azure://" + strings.Replace(resourceID(p, m), NodeResourceGroup, strings.ToLower(NodeResourceGroup), 1)
			return maps.Clone(m.labels), slices.Clone(m.taints), m.name, id, true
		}
	}
	return nil, nil, "", "", false
}

// SetNodeInitializationTaints changes the pool's nodeInitializationTaints
// as `az aks update --node-init-taints` does. AKS writes them into the
// pool's scale set model only at the next operation that updates the model
// (a node image upgrade), so machines made before UpgradeNodeImage keep
// registering with the old ones (use-node-taints.md).
func (c *Cloud) SetNodeInitializationTaints(pool string, taints []corev1.Taint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[pool]
	p.initTaints, p.etag = slices.Clone(taints), p.etag+1
}

// UpgradeNodeImage brings the pool's scale set model up to its
// nodeInitializationTaints and image (the machines already there are not
// reimaged).
func (c *Cloud) UpgradeNodeImage(pool, image string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[pool]
	p.appliedInit, p.image, p.etag = slices.Clone(p.initTaints), image, p.etag+1
}

// StartOperation makes an operation of the kind (Upgrading, as AKS
// upgrading the pool) run on the pool until FinishOperations.
func (c *Cloud) StartOperation(pool, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pools[pool].operation, c.pools[pool].state = kind, kind
}

// FinishOperations ends every operation running, as AKS finishes them on
// its own time whether or not anyone polls.
func (c *Cloud) FinishOperations() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		c.end(p)
	}
}

// end ends the pool's operation: a failed scale-out's count goes back to
// the machines there, a successful one's machines are all there.
func (c *Cloud) end(p *pool) {
	if p.failing != "" {
		p.count, p.failing = len(p.machines), ""
	}
	for len(p.machines) < p.count {
		p.add(c.clock.Now())
	}
	p.operation, p.state, p.opPath = "", "Succeeded", ""
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

// LastPut is the JSON body of the last PUT of the agent pool, as sent.
func (c *Cloud) LastPut(pool string) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastPut[pool]
}

// Throttle makes the next n requests answer 429 with Retry-After seconds,
// as Azure Resource Manager does.
func (c *Cloud) Throttle(n, seconds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttled, c.retryAfter = n, seconds
}

// FailScale makes the next scale-out's operation end Failed with the code,
// as AKS ends one it could not allocate VMs for
// (OverconstrainedZonalAllocationRequest, AllocationFailed), leaving the
// pool as it was.
func (c *Cloud) FailScale(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, code)
}

// Refusal is how AKS refuses a request before it starts an operation: the
// HTTP status and the error body's code and message.
type Refusal struct {
	Status        int
	Code, Message string
}

// RefuseScale makes the next PUT that raises a pool's count be refused as
// r says, with nothing changed.
func (c *Cloud) RefuseScale(r Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refusals = append(c.refusals, r)
}

// VCPUQuota is AKS's refusal of a scale-out the subscription's vCPU quota
// cannot hold, as AKS answers it before it starts (code and message as
// reported in github.com/1ChristianAlex/motordesk/issues/14).
func VCPUQuota(family string) Refusal {
	return Refusal{Status: http.StatusBadRequest, Code: "ErrCode_InsufficientVCPUQuota", Message: fmt.Sprintf(
		"Insufficient vcpu quota requested 4, remaining 0 for family %s for region %s. Surge nodes would also consume vcpu quota.", family, Location)}
}

// Requests are the requests sent so far.
func (c *Cloud) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// resourceID is the machine's scale set VM, as the Machines API reports it.
func resourceID(p *pool, m *machine) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%d",
		Subscription, NodeResourceGroup, p.vmss(), m.id)
}

// transport logs every request, throttles, refuses and drops as told, in
// front of the fakes.
type transport struct {
	c      *Cloud
	shared *fake.ServerFactoryTransport
}

// Transport is the cloud's end of the SDK's clients
// (policy.ClientOptions.Transport).
func (c *Cloud) Transport() policy.Transporter {
	return &transport{c: c, shared: fake.NewServerFactoryTransport(c.servers())}
}

var poolPath = regexp.MustCompile(`(?i)/managedClusters/([^/]+)/agentPools/([^/]+)`)

func (t *transport) Do(req *http.Request) (*http.Response, error) {
	r := Request{At: t.c.clock.Now(), Method: req.Method, Path: req.URL.Path}
	if resp := t.before(req, &r); resp != nil {
		return resp, nil
	}
	next := t.route(req)
	resp, err := next.Do(req)
	t.c.mu.Lock()
	if err == nil {
		r.Status = resp.StatusCode
	}
	t.c.log = append(t.c.log, r)
	t.ended(req, resp, err)
	drop, hook := t.c.DropAnswer, t.c.Answered
	t.c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if drop != nil && drop(r) {
		t.c.mu.Lock()
		t.c.finish(req) // AKS's operation goes on and ends; the caller asks anew
		t.c.mu.Unlock()
		return nil, errDropped
	}
	if hook != nil {
		hook(r)
	}
	return resp, nil
}

// before answers what the SDK's fakes cannot: a throttled request, a
// refused scale-out, and a GET at a preview api-version.
func (t *transport) before(req *http.Request, r *Request) *http.Response {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.c.throttled > 0 {
		t.c.throttled--
		r.Status = http.StatusTooManyRequests
		t.c.log = append(t.c.log, *r)
		resp := errorResponse(req, http.StatusTooManyRequests, "TooManyRequests", "The request is being throttled as the limit has been reached for operation group.")
		resp.Header.Set("Retry-After", strconv.Itoa(t.c.retryAfter))
		return resp
	}
	t.c.keepPut(req)
	if req.Method == http.MethodPut || req.Method == http.MethodPost {
		if resp := t.c.refuse(req); resp != nil {
			r.Status = resp.StatusCode
			t.c.log = append(t.c.log, *r)
			return resp
		}
	}
	if resp := t.c.poll(req); resp != nil {
		r.Status = resp.StatusCode
		t.c.log = append(t.c.log, *r)
		return resp
	}
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Query().Get("api-version"), "-preview") {
		resp := t.c.previewGet(req)
		r.Status = resp.StatusCode
		t.c.log = append(t.c.log, *r)
		return resp
	}
	return nil
}

// route sends a long-running operation's or a pager's requests to fakes of
// their own, so that one abandoned (a controller that died mid-poll) leaves
// no remains for the next request to the same path.
func (t *transport) route(req *http.Request) *fake.ServerFactoryTransport {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	base := server.SanitizePagerPollerPath(req.URL.Path)
	if base != req.URL.Path {
		if tr, ok := t.c.lro[base]; ok {
			return tr
		}
		return t.shared
	}
	if req.Method == http.MethodGet && !strings.HasSuffix(req.URL.Path, "/machines") && !strings.HasSuffix(req.URL.Path, "/agentPools") {
		return t.shared
	}
	tr := fake.NewServerFactoryTransport(t.c.servers())
	t.c.lro[base] = tr
	return tr
}

// ended notes an operation whose last answer was given.
func (t *transport) ended(req *http.Request, resp *http.Response, err error) {
	if req.Method == http.MethodGet && server.SanitizePagerPollerPath(req.URL.Path) == req.URL.Path {
		return
	}
	if err != nil || resp.Header.Get("Fake-Poller-Status") == "Succeeded" {
		t.c.finish(req)
	}
}

// finish ends the operation running on the request's pool.
func (c *Cloud) finish(req *http.Request) {
	m := poolPath.FindStringSubmatch(req.URL.Path)
	if m == nil {
		return
	}
	if p, ok := c.pools[m[2]]; ok && p.opPath != "" && p.opPath == server.SanitizePagerPollerPath(req.URL.Path) {
		c.end(p)
	}
}

// refuse answers a PUT or a DeleteMachines of a pool AKS would not start:
// another operation runs on the pool (409 OperationNotAllowed, with the
// message AKS answers, as quoted in github.com/Azure/AKS/issues/1561), a
// stale If-Match (412), or the next refusal of a count-raising PUT.
func (c *Cloud) refuse(req *http.Request) *http.Response {
	m := poolPath.FindStringSubmatch(req.URL.Path)
	if m == nil || server.SanitizePagerPollerPath(req.URL.Path) != req.URL.Path {
		return nil
	}
	p, ok := c.pools[m[2]]
	if !ok {
		return nil
	}
	if p.operation != "" {
		return errorResponse(req, http.StatusConflict, "OperationNotAllowed", fmt.Sprintf(
			"Operation is not allowed: Another operation (%s) is in progress, please wait for it to finish before starting a new operation. See https://aka.ms/aks-pending-operation for more details", p.operation))
	}
	if match := req.Header.Get("If-Match"); req.Method == http.MethodPut && match != "" && match != p.etagString() {
		return errorResponse(req, http.StatusPreconditionFailed, "PreconditionFailed", fmt.Sprintf(
			"Operation is not allowed: the agent pool %s was changed (eTag %s, If-Match %s)", p.name, p.etagString(), match))
	}
	if req.Method != http.MethodPut || len(c.refusals) == 0 {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var put struct {
		Properties struct {
			Count *int `json:"count"`
		} `json:"properties"`
	}
	if json.Unmarshal(body, &put) != nil || put.Properties.Count == nil || *put.Properties.Count <= p.count {
		return nil
	}
	r := c.refusals[0]
	c.refusals = c.refusals[1:]
	return errorResponse(req, r.Status, r.Code, r.Message)
}

// poll moves a scale-out on at a poll of its operation: its machines
// appear. While held, the cloud answers the poll itself, InProgress, and
// the SDK's fake never sees it.
func (c *Cloud) poll(req *http.Request) *http.Response {
	base := server.SanitizePagerPollerPath(req.URL.Path)
	m := poolPath.FindStringSubmatch(req.URL.Path)
	if req.Method != http.MethodGet || base == req.URL.Path || m == nil {
		return nil
	}
	p, ok := c.pools[m[2]]
	if !ok || p.opPath != base {
		return nil
	}
	if !c.held {
		c.progress(p)
		return nil
	}
	h := http.Header{}
	h.Set("Fake-Poller-Status", "InProgress") // the SDK's fake poller's own header
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}
}

// errDropped is a lost answer, as a reset connection is.
var errDropped = errors.New("read: connection reset by peer")

// errorResponse is an error as ARM sends it: the status, and
// {"error":{"code":...,"message":...}} in the body.
func errorResponse(req *http.Request, status int, code, message string) *http.Response {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": message}}) // strings always marshal
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("x-ms-error-code", code)
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Header: h,
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}
}
