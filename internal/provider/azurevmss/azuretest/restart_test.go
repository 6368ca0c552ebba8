package azuretest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
)

const base = "https://management.azure.com/subscriptions/" + azuretest.Subscription + "/resourceGroups/" + azuretest.ResourceGroup + "/providers/Microsoft.Compute/"

// operationURL is an asynchronous operation's status URL as "Track
// asynchronous Azure operations" gives Compute's:
// .../subscriptions/{id}/providers/Microsoft.Compute/locations/{region}/operations/{id}.
var operationURL = regexp.MustCompile(`^https://management\.azure\.com/subscriptions/` + azuretest.Subscription +
	`/providers/Microsoft\.Compute/locations/westeurope/operations/[0-9a-f-]+\?api-version=2024-11-01$`)

// A restart is accepted as the REST reference and the async-operations page
// have it: 202, no body, Azure-AsyncOperation and Location; its status reads
// Succeeded, the Location 200; the instance counts one restart.
func TestARestartIsAcceptedAsAzureDocumentsIt(t *testing.T) {
	c := azuretest.NewCloud(clock.RealClock{})
	c.AddSet("web", "Standard_D4s_v5", 2)
	resp := do(t, c, http.MethodPost, base+"virtualMachineScaleSets/web/virtualmachines/1/restart?api-version=2024-11-01")
	body := read(t, resp)
	status, location := resp.Header.Get("Azure-AsyncOperation"), resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || len(body) != 0 || !operationURL.MatchString(status) || location != status+"&monitor=true" {
		t.Fatalf("restart answered %d %q, Azure-AsyncOperation %q, Location %q; want 202, no body, the operation's status URL and its monitor URL",
			resp.StatusCode, body, status, location)
	}
	if n := c.Restarts("web", "1"); n != 1 {
		t.Errorf("instance 1 restarted %d times; want 1", n)
	}
	if n := c.Restarts("web", "0"); n != 0 {
		t.Errorf("instance 0 restarted %d times; want 0", n)
	}

	resp = do(t, c, http.MethodGet, status)
	var op struct{ Name, Status, StartTime, EndTime string }
	if err := json.Unmarshal(read(t, resp), &op); err != nil || resp.StatusCode != http.StatusOK || op.Status != "Succeeded" || op.StartTime == "" || op.EndTime == "" {
		t.Errorf("the operation's status: %d %+v (%v); want 200, status Succeeded, with its start and end", resp.StatusCode, op, err)
	}
	if resp := do(t, c, http.MethodGet, location); resp.StatusCode != http.StatusOK {
		t.Errorf("the operation's Location answered %d once done; want 200", resp.StatusCode)
	}
}

// The SDK's own client restarts through the cloud: a scale set's instance
// and a Flexible set's VM, polled to the end by the headers Azure sends.
func TestTheSDKFollowsARestartToItsEnd(t *testing.T) {
	c := azuretest.NewCloud(clock.RealClock{})
	c.AddSet("web", "Standard_D4s_v5", 1)
	c.AddSetWithModel("flex", "Standard_D4s_v5", 1, azuretest.Model{Flexible: true})
	var vm string
	for name := range c.Instances("flex") {
		vm = name
	}
	f := factory(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	poll := &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}

	instance, err := f.NewVirtualMachineScaleSetVMsClient().BeginRestart(ctx, azuretest.ResourceGroup, "web", "0", nil)
	if err == nil {
		_, err = instance.PollUntilDone(ctx, poll)
	}
	if err != nil || c.Restarts("web", "0") != 1 {
		t.Errorf("restarting instance 0: %v, %d restarts; want done, 1", err, c.Restarts("web", "0"))
	}
	machine, err := f.NewVirtualMachinesClient().BeginRestart(ctx, azuretest.ResourceGroup, vm, nil)
	if err == nil {
		_, err = machine.PollUntilDone(ctx, poll)
	}
	if err != nil || c.Restarts("flex", vm) != 1 {
		t.Errorf("restarting VM %s: %v, %d restarts; want done, 1", vm, err, c.Restarts("flex", vm))
	}
}

// What is not there is a 404 with ARM's error body, its code and message as
// Azure sends them.
func TestARestartOfWhatIsNotThereIsNotFound(t *testing.T) {
	c := azuretest.NewCloud(clock.RealClock{})
	c.AddSet("web", "Standard_D4s_v5", 1)
	for _, tc := range []struct{ path, code, message string }{
		{base + "virtualMachineScaleSets/web/virtualmachines/7/restart", "NotFound", "The entity was not found in this Azure location."},
		{base + "virtualMachineScaleSets/gone/virtualmachines/0/restart", "ResourceNotFound",
			"The Resource 'Microsoft.Compute/virtualMachineScaleSets/gone' under resource group '" + azuretest.ResourceGroup +
				"' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"},
		{base + "virtualMachines/web_0badf00d/restart", "ResourceNotFound",
			"The Resource 'Microsoft.Compute/virtualMachines/web_0badf00d' under resource group '" + azuretest.ResourceGroup +
				"' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"},
		{"https://management.azure.com/subscriptions/" + azuretest.Subscription + "/resourceGroups/rg-gone/providers/Microsoft.Compute/virtualMachineScaleSets/web/virtualmachines/0/restart",
			"ResourceGroupNotFound", "Resource group 'rg-gone' could not be found."},
	} {
		resp := do(t, c, http.MethodPost, tc.path+"?api-version=2024-11-01")
		var got struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(read(t, resp), &got); err != nil || resp.StatusCode != http.StatusNotFound || got.Error.Code != tc.code || got.Error.Message != tc.message {
			t.Errorf("POST %s: %d %+v (%v); want 404 %s %q", tc.path, resp.StatusCode, got.Error, err, tc.code, tc.message)
		}
	}
	_, err := factory(t, c).NewVirtualMachineScaleSetVMsClient().BeginRestart(context.Background(), azuretest.ResourceGroup, "web", "7", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound || re.ErrorCode != "NotFound" {
		t.Errorf("the SDK's restart of an unknown instance: %v; want its ResponseError, 404 NotFound", err)
	}
	if n := c.Restarts("web", "0"); n != 0 {
		t.Errorf("instance 0 restarted %d times; want 0", n)
	}
}

func factory(t *testing.T, c *azuretest.Cloud) *armcompute.ClientFactory {
	t.Helper()
	f, err := armcompute.NewClientFactory(azuretest.Subscription, &azfake.TokenCredential{},
		&arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: c.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func do(t *testing.T, c *azuretest.Cloud, method, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Transport().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

func read(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
