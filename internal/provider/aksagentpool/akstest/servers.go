package akstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
	corev1 "k8s.io/api/core/v1"
)

func (c *Cloud) servers() *fake.ServerFactory {
	return &fake.ServerFactory{
		AgentPoolsServer: fake.AgentPoolsServer{
			Get: func(_ context.Context, rg, cluster, name string, _ *armcontainerservice.AgentPoolsClientGetOptions) (resp azfake.Responder[armcontainerservice.AgentPoolsClientGetResponse], errResp azfake.ErrorResponder) {
				c.mu.Lock()
				defer c.mu.Unlock()
				if p := c.pool(rg, cluster, name, &errResp); p != nil {
					resp.SetResponse(http.StatusOK, armcontainerservice.AgentPoolsClientGetResponse{AgentPool: p.model()}, nil)
				}
				return
			},
			BeginCreateOrUpdate: c.put,
			BeginDeleteMachines: c.deleteMachines,
		},
		MachinesServer: fake.MachinesServer{
			Get: func(_ context.Context, rg, cluster, name, machineName string, _ *armcontainerservice.MachinesClientGetOptions) (resp azfake.Responder[armcontainerservice.MachinesClientGetResponse], errResp azfake.ErrorResponder) {
				c.mu.Lock()
				defer c.mu.Unlock()
				p := c.pool(rg, cluster, name, &errResp)
				if p == nil {
					return
				}
				m, ok := p.machines[machineName]
				if !ok {
					errResp.SetResponseError(http.StatusNotFound, "NotFound")
					return
				}
				resp.SetResponse(http.StatusOK, armcontainerservice.MachinesClientGetResponse{Machine: p.machineModel(m)}, nil)
				return
			},
			NewListPager: func(rg, cluster, name string, _ *armcontainerservice.MachinesClientListOptions) (resp azfake.PagerResponder[armcontainerservice.MachinesClientListResponse]) {
				c.mu.Lock()
				defer c.mu.Unlock()
				p, ok := c.pools[name]
				if !ok || !strings.EqualFold(rg, ResourceGroup) || !strings.EqualFold(cluster, Cluster) {
					resp.AddResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				// Pages of two, so the provider must follow nextLink.
				names := p.names()
				for i := 0; i < len(names) || i == 0; i += 2 {
					var page []*armcontainerservice.Machine
					for _, n := range names[i:min(i+2, len(names))] {
						page = append(page, to.Ptr(p.machineModel(p.machines[n])))
					}
					resp.AddPage(http.StatusOK, armcontainerservice.MachinesClientListResponse{MachineListResult: armcontainerservice.MachineListResult{Value: page}}, nil)
				}
				return
			},
		},
	}
}

// pool finds the agent pool, or answers 404 as ARM does.
func (c *Cloud) pool(rg, cluster, name string, errResp *azfake.ErrorResponder) *pool {
	p, ok := c.pools[name]
	if !ok || !strings.EqualFold(rg, ResourceGroup) || !strings.EqualFold(cluster, Cluster) {
		errResp.SetResponseError(http.StatusNotFound, "NotFound")
		return nil
	}
	return p
}

// put is AgentPools_CreateOrUpdate of a pool there: the fake changes its
// count only (the rest of the body is kept in LastPut for tests to read).
// As AKS does, a raised count is the pool's at once and the operation goes
// on: its new machines appear in the Machines list at the operation's
// first poll (or when it ends unpolled; later while Hold holds them), and
// the operation ends Succeeded at the next poll. A lowered count removes
// the newest machines at once. The PUT answers 200 with provisioningState
// Scaling.
func (c *Cloud) put(_ context.Context, rg, cluster, name string, params armcontainerservice.AgentPool, _ *armcontainerservice.AgentPoolsClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcontainerservice.AgentPoolsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[name]
	if !ok || !strings.EqualFold(rg, ResourceGroup) || !strings.EqualFold(cluster, Cluster) {
		errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter") // the fake makes no new agent pools
		return
	}
	if params.Properties == nil || params.Properties.Count == nil || *params.Properties.Count < 0 {
		errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
		return
	}
	want := int(*params.Properties.Count)
	failure := ""
	if want > p.count && len(c.failures) > 0 {
		failure, c.failures = c.failures[0], c.failures[1:]
	}
	for names := p.names(); len(names) > want; names = names[:len(names)-1] {
		delete(p.machines, names[len(names)-1])
	}
	p.operation, p.state, p.opPath, p.etag = "Scaling", "Scaling", opPath(rg, cluster, name, ""), p.etag+1
	p.count, p.failing = want, failure
	resp.AddNonTerminalResponse(http.StatusOK, nil) // the PUT's own answer
	resp.AddNonTerminalResponse(http.StatusOK, nil) // the first poll: the machines appear
	if failure != "" {
		// Nothing was allocated; the count goes back as it was.
		resp.SetTerminalError(http.StatusOK, failure)
		return
	}
	model := p.model()
	model.Properties.ProvisioningState = to.Ptr("Succeeded")
	resp.SetTerminalResponse(http.StatusOK, armcontainerservice.AgentPoolsClientCreateOrUpdateResponse{AgentPool: model}, nil)
	return
}

func opPath(rg, cluster, pool, tail string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.ContainerService/managedClusters/%s/agentPools/%s%s", Subscription, rg, cluster, pool, tail)
}

// deleteMachines is AgentPools_DeleteMachines: the named machines go, and
// the count with them. It answers 202, then its terminal state.
func (c *Cloud) deleteMachines(_ context.Context, rg, cluster, name string, machines armcontainerservice.AgentPoolDeleteMachinesParameter, _ *armcontainerservice.AgentPoolsClientBeginDeleteMachinesOptions) (resp azfake.PollerResponder[armcontainerservice.AgentPoolsClientDeleteMachinesResponse], errResp azfake.ErrorResponder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pool(rg, cluster, name, &errResp)
	if p == nil {
		return
	}
	if len(machines.MachineNames) == 0 {
		errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
		return
	}
	for _, n := range machines.MachineNames {
		if n == nil || p.machines[*n] == nil {
			errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
			return
		}
	}
	for _, n := range machines.MachineNames {
		delete(p.machines, *n)
		p.count--
	}
	p.operation, p.state, p.opPath, p.etag = "Scaling", "Scaling", opPath(rg, cluster, name, "/deleteMachines"), p.etag+1
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	resp.SetTerminalResponse(http.StatusOK, armcontainerservice.AgentPoolsClientDeleteMachinesResponse{}, nil)
	return
}

// names are the pool's machine names by instance ID.
func (p *pool) names() []string {
	out := make([]string, 0, len(p.machines))
	for n := range p.machines {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int { return p.machines[a].id - p.machines[b].id })
	return out
}

func (p *pool) etagString() string { return strconv.Itoa(p.etag) }

// model is the agent pool as GET answers it at the GA api-version.
func (p *pool) model() armcontainerservice.AgentPool {
	props := &armcontainerservice.ManagedClusterAgentPoolProfileProperties{
		Count:  to.Ptr(int32(p.count)), //nolint:gosec // AKS caps a pool at 1000 machines
		VMSize: to.Ptr(p.vmSize), EnableAutoScaling: to.Ptr(p.autoscale),
		Mode: to.Ptr(armcontainerservice.AgentPoolModeUser), Type: to.Ptr(armcontainerservice.AgentPoolTypeVirtualMachineScaleSets),
		OSType: to.Ptr(armcontainerservice.OSTypeLinux), OrchestratorVersion: to.Ptr("1.31"), CurrentOrchestratorVersion: to.Ptr("1.31.2"),
		NodeImageVersion: to.Ptr(p.image), ProvisioningState: to.Ptr(p.state), ETag: to.Ptr(p.etagString()),
		ScaleSetPriority: to.Ptr(armcontainerservice.ScaleSetPriorityRegular),
	}
	if p.spot {
		props.ScaleSetPriority = to.Ptr(armcontainerservice.ScaleSetPrioritySpot)
	}
	for _, z := range p.zones {
		props.AvailabilityZones = append(props.AvailabilityZones, to.Ptr(z))
	}
	if len(p.labels) > 0 {
		props.NodeLabels = map[string]*string{}
		for k, v := range p.labels {
			props.NodeLabels[k] = to.Ptr(v)
		}
	}
	props.NodeTaints = taintStrings(p.taints)
	return armcontainerservice.AgentPool{ID: to.Ptr(opPath(ResourceGroup, Cluster, p.name, "")), Name: to.Ptr(p.name),
		Type: to.Ptr("Microsoft.ContainerService/managedClusters/agentPools"), Properties: props}
}

// taintStrings are taints as AKS spells them: key=value:Effect.
func taintStrings(taints []corev1.Taint) []*string {
	var out []*string
	for _, t := range taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, to.Ptr(s+":"+string(t.Effect)))
	}
	return out
}

// machineModel is the machine as the Machines API answers it at the GA
// api-version (2025-02-01): its name, and its scale set VM's resource ID.
func (p *pool) machineModel(m *machine) armcontainerservice.Machine {
	return armcontainerservice.Machine{
		ID: to.Ptr(opPath(ResourceGroup, Cluster, p.name, "/machines/"+m.name)), Name: to.Ptr(m.name),
		Type: to.Ptr("Microsoft.ContainerService/managedClusters/agentPools/machines"),
		Properties: &armcontainerservice.MachineProperties{ResourceID: to.Ptr(resourceID(p, m)),
			Network: &armcontainerservice.MachineNetworkProperties{IPAddresses: []*armcontainerservice.MachineIPAddress{
				{Family: to.Ptr(armcontainerservice.IPFamilyIPv4), IP: to.Ptr(fmt.Sprintf("10.224.0.%d", 4+m.id%250))}}}},
	}
}

var poolOnly = regexp.MustCompile(`(?i)/managedClusters/([^/]+)/agentPools/([^/]+)$`)

// previewGet answers a GET of an agent pool at a preview api-version: the
// GA model plus nodeInitializationTaints, the field the GA API lacks.
func (c *Cloud) previewGet(req *http.Request) *http.Response {
	m := poolOnly.FindStringSubmatch(req.URL.Path)
	if m == nil {
		return errorResponse(req, http.StatusNotFound, "NotFound", "the fake answers a preview api-version for agent pools only")
	}
	p, ok := c.pools[m[2]]
	if !ok || !strings.EqualFold(m[1], Cluster) {
		return errorResponse(req, http.StatusNotFound, "NotFound", fmt.Sprintf("agent pool %s not found", m[2]))
	}
	raw, err := json.Marshal(p.model())
	if err != nil {
		return errorResponse(req, http.StatusInternalServerError, "InternalServerError", err.Error())
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body) // it was just marshalled
	if init := taintStrings(p.initTaints); len(init) > 0 {
		body["properties"].(map[string]any)["nodeInitializationTaints"] = init
	}
	raw, _ = json.Marshal(body) // maps of JSON values always marshal
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h, Body: io.NopCloser(bytes.NewReader(raw)), Request: req}
}

// keepPut keeps a PUT's body as sent, and leaves it to be read again.
func (c *Cloud) keepPut(req *http.Request) {
	m := poolPath.FindStringSubmatch(req.URL.Path)
	if req.Method != http.MethodPut || m == nil || req.Body == nil {
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var v map[string]any
	if json.Unmarshal(body, &v) == nil {
		c.lastPut[m[2]] = v
	}
}
