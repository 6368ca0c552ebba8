package azuretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Restarts of an instance or VM, as Azure Resource Manager documents them
// and the fakes (armcompute/fake) do not serve: their long-running
// operations answer a header of the SDK's own (Fake-Poller-Status) where
// Azure answers Azure-AsyncOperation and Location, and their errors carry
// no body. So the cloud answers these requests itself, before the fakes:
//
//   - POST .../virtualMachineScaleSets/{set}/virtualmachines/{instanceId}/restart
//     ("Virtual Machine Scale Set VMs - Restart") and
//     POST .../virtualMachines/{name}/restart ("Virtual Machines - Restart",
//     a Flexible set's VM) answer 202 Accepted with no body and the headers
//     Azure-AsyncOperation (the operation's status,
//     .../providers/Microsoft.Compute/locations/{location}/operations/{id})
//     and Location (the same with monitor=true), as "Track asynchronous
//     Azure operations" (azure-resource-manager/management/async-operations)
//     describes an asynchronous operation; the REST reference lists 200 and
//     202 for the restart. The instance counts the restart (Restarts) when
//     Azure accepts it.
//   - A GET of the Azure-AsyncOperation URL answers 200 with
//     {"name","status","startTime","endTime"} (the async-operations page's
//     body; status Succeeded once read: a restart is done when it is next
//     looked at), and of the Location URL 200 with no body once done.
//   - An unknown resource group is 404 ResourceGroupNotFound ("Resource
//     group '<name>' could not be found."), an unknown set or VM 404
//     ResourceNotFound ("The Resource 'Microsoft.Compute/...' under resource
//     group '<name>' was not found. ..."), as
//     azure-resource-manager/troubleshooting/error-not-found has them (the
//     message as Azure sends it, quoted in kubernetes/autoscaler#644 and
//     microsoft/vscode-azurevirtualmachines#220), and an unknown instance of
//     a set 404 NotFound, "The entity was not found in this Azure
//     location." (Compute's answer for an instance of a set that has none
//     of that ID, quoted in openshift/openshift-azure#1540). Errors are
//     ARM's body, {"error":{"code","message"}}.
//
// What it cannot show: a VM's power state (every instance runs, so the 409
// OperationNotAllowed "The operation requires the VM to be running (or set
// to run)." of a stopped VM never comes), how long a restart takes, and
// how Azure answers the scale set VM restart of a Flexible set's VM (the
// fake answers it as an unknown instance).

// restart is one restart operation Azure accepted.
type restart struct {
	started, ended time.Time
	done           bool
}

var (
	instanceRestartPath = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/virtualMachineScaleSets/([^/]+)/virtualMachines/([^/]+)/restart$`)
	vmRestartPath       = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/virtualMachines/([^/]+)/restart$`)
	operationPath       = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/providers/Microsoft\.Compute/locations/([^/]+)/operations/([^/]+)$`)
)

// Restarts is how many restarts of the set's instance (a Flexible set's VM:
// its name) Azure accepted.
func (c *Cloud) Restarts(set, instance string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sets[strings.ToLower(set)]
	if v := s.find(ok, instance); v != nil {
		return v.restarts
	}
	return 0
}

// serveRestart answers the request when it is a restart or the status of
// one; false leaves it to the fakes.
func (c *Cloud) serveRestart(req *http.Request) (*http.Response, bool) {
	path := req.URL.Path
	switch {
	case req.Method == http.MethodPost && instanceRestartPath.MatchString(path):
		m := instanceRestartPath.FindStringSubmatch(path)
		return c.restartInstance(req, m[1], m[2], m[3]), true
	case req.Method == http.MethodPost && vmRestartPath.MatchString(path):
		m := vmRestartPath.FindStringSubmatch(path)
		return c.restartVM(req, m[1], m[2]), true
	case req.Method == http.MethodGet && operationPath.MatchString(path):
		m := operationPath.FindStringSubmatch(path)
		return c.operationStatus(req, m[3]), true
	}
	return nil, false
}

func (c *Cloud) restartInstance(req *http.Request, rg, set, id string) *http.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.EqualFold(rg, ResourceGroup) {
		return armError(req, http.StatusNotFound, "ResourceGroupNotFound", fmt.Sprintf("Resource group '%s' could not be found.", rg))
	}
	s, ok := c.sets[strings.ToLower(set)]
	if !ok {
		return armError(req, http.StatusNotFound, "ResourceNotFound", resourceNotFound("Microsoft.Compute/virtualMachineScaleSets/"+set, rg))
	}
	v := s.vms[id]
	if v == nil || s.flexible {
		return armError(req, http.StatusNotFound, "NotFound", "The entity was not found in this Azure location.")
	}
	v.restarts++
	return c.accepted(req, s.location)
}

func (c *Cloud) restartVM(req *http.Request, rg, name string) *http.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.EqualFold(rg, ResourceGroup) {
		return armError(req, http.StatusNotFound, "ResourceGroupNotFound", fmt.Sprintf("Resource group '%s' could not be found.", rg))
	}
	s, v := c.vmNamed(name)
	if v == nil {
		return armError(req, http.StatusNotFound, "ResourceNotFound", resourceNotFound("Microsoft.Compute/virtualMachines/"+name, rg))
	}
	v.restarts++
	return c.accepted(req, s.location)
}

// accepted starts a restart operation and answers 202 with its URLs.
func (c *Cloud) accepted(req *http.Request, location string) *http.Response {
	if c.restarts == nil {
		c.restarts = map[string]*restart{}
	}
	c.opSeq++
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", c.opSeq, c.clock.Now().UnixNano()&0xffffffffffff)
	c.restarts[id] = &restart{started: c.clock.Now()}
	version := req.URL.Query().Get("api-version")
	status := fmt.Sprintf("%s://%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s?api-version=%s",
		req.URL.Scheme, req.URL.Host, Subscription, location, id, url.QueryEscape(version))
	h := http.Header{}
	h.Set("Azure-AsyncOperation", status)
	h.Set("Location", status+"&monitor=true")
	return response(req, http.StatusAccepted, h, nil)
}

// operationStatus answers a GET of a restart's Azure-AsyncOperation URL
// (its status) or of its Location URL (monitor=true: 200 once done).
func (c *Cloud) operationStatus(req *http.Request, id string) *http.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	op, ok := c.restarts[id]
	if !ok {
		return armError(req, http.StatusNotFound, "NotFound", "The entity was not found in this Azure location.")
	}
	if !op.done {
		op.done, op.ended = true, c.clock.Now()
	}
	if strings.EqualFold(req.URL.Query().Get("monitor"), "true") {
		return response(req, http.StatusOK, http.Header{}, nil)
	}
	body, _ := json.Marshal(map[string]string{ // strings always marshal
		"name": id, "status": "Succeeded",
		"startTime": op.started.UTC().Format(time.RFC3339Nano), "endTime": op.ended.UTC().Format(time.RFC3339Nano),
	})
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	return response(req, http.StatusOK, h, body)
}

// resourceNotFound is ARM's message for a resource it does not have.
func resourceNotFound(resource, rg string) string {
	return fmt.Sprintf("The Resource '%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", resource, rg)
}

// armError is an error as Azure Resource Manager sends it: the status, and
// {"error":{"code","message"}} in the body.
func armError(req *http.Request, status int, code, message string) *http.Response {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": message}}) // strings always marshal
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	return response(req, status, h, body)
}

func response(req *http.Request, status int, h http.Header, body []byte) *http.Response {
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Header: h,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}
}
