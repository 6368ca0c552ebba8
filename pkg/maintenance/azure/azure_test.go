package azure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

func start(t *testing.T) (*Server, *Client) {
	t.Helper()
	s := NewServer()
	ts := httptest.NewServer(s) // 127.0.0.1 only
	t.Cleanup(ts.Close)
	c, err := NewClient(ts.URL, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestServerRefusesRequestsWithoutTheMetadataHeader(t *testing.T) {
	s := NewServer()
	ts := httptest.NewServer(s)
	defer ts.Close()
	for _, tc := range []struct {
		url    string
		header bool
		code   int
	}{
		{ts.URL + Path + "?api-version=" + APIVersion, false, http.StatusBadRequest},
		{ts.URL + Path, true, http.StatusBadRequest},
		{ts.URL + "/metadata/instance?api-version=" + APIVersion, true, http.StatusNotFound},
		{ts.URL + Path + "?api-version=" + APIVersion, true, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
		if tc.header {
			req.Header.Set("Metadata", "true")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s header=%v: %d, want %d", tc.url, tc.header, resp.StatusCode, tc.code)
		}
	}
}

func TestClientReadsApprovesAndFiltersByVM(t *testing.T) {
	s, c := start(t)
	s.Schedule(RawEvent{EventID: "A1", EventType: "Reboot", ResourceType: "VirtualMachine", Resources: []string{"aks-user-1234-vmss_3"},
		EventStatus: "Scheduled", NotBefore: "Sat, 21 Nov 2026 10:15:00 GMT", EventSource: "Platform", DurationInSeconds: 900})
	s.Schedule(RawEvent{EventID: "B2", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{"aks-spot-9999-vmss_0"},
		EventStatus: "Scheduled", NotBefore: "Sat, 21 Nov 2026 10:00:30 GMT", EventSource: "Platform", DurationInSeconds: -1})
	ctx := context.Background()
	doc, err := c.Document(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if doc.DocumentIncarnation != 2 {
		t.Errorf("incarnation %d, want 2", doc.DocumentIncarnation)
	}
	events, errs := doc.EventsFor("aks-user-1234-vmss_3")
	if len(errs) != 0 || len(events) != 1 {
		t.Fatalf("events %+v errs %v: want only A1", events, errs)
	}
	e := events[0]
	want := time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC)
	if e.ID != "A1" || e.Type != maintenance.TypeReboot || e.Status != maintenance.StatusScheduled || !e.NotBefore.Equal(want) || e.Duration == nil || *e.Duration != 15*time.Minute || e.Source != maintenance.SourceAzure {
		t.Errorf("normalized %+v", e)
	}
	spot, _ := doc.EventsFor("AKS-SPOT-9999-VMSS_0") // names compare case-insensitively
	if len(spot) != 1 || spot[0].Type != maintenance.TypePreempt || spot[0].Duration != nil {
		t.Errorf("spot events %+v: want the Preempt, with unknown duration", spot)
	}

	if err := c.Approve(ctx, "A1"); err != nil {
		t.Fatal(err)
	}
	doc, _ = c.Document(ctx)
	events, _ = doc.EventsFor("aks-user-1234-vmss_3")
	if len(events) != 1 || events[0].Status != maintenance.StatusStarted || !events[0].NotBefore.IsZero() || doc.DocumentIncarnation != 3 {
		t.Errorf("after approval: %+v (incarnation %d); want Started, no NotBefore, incarnation 3", events, doc.DocumentIncarnation)
	}
	if got := s.Approved(); len(got) != 1 || got[0] != "A1" {
		t.Errorf("server saw approvals %v", got)
	}
	s.Finish("A1")
	doc, _ = c.Document(ctx)
	if events, _ := doc.EventsFor("aks-user-1234-vmss_3"); len(events) != 0 {
		t.Errorf("finished event still listed: %+v", events)
	}
}

func TestClientRetriesServerErrors(t *testing.T) {
	s, c := start(t)
	s.FailNext(2)
	if _, err := c.Document(context.Background()); err != nil {
		t.Fatalf("two 500s then success: %v", err)
	}
	s.FailNext(10)
	if _, err := c.Document(context.Background()); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("persistent 500s: want an error naming it, got %v", err)
	}
}

func TestHostileAnswersAreErrorsNotActions(t *testing.T) {
	s, c := start(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not json", "<html>gateway</html>", "decoding"},
		{"oversized", `{"Events":[` + strings.Repeat(`{"EventId":"x"},`, MaxDocument/10) + `{}]}`, "larger than"},
		{"wrong types", `{"DocumentIncarnation":"one","Events":{}}`, "decoding"},
	} {
		s.AnswerRaw([]byte(tc.body))
		doc, err := c.Document(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) || doc != nil {
			t.Errorf("%s: got doc=%v err=%v; want an error containing %q and no document", tc.name, doc, err, tc.want)
		}
	}
	// Readable JSON with unreadable events: the bad ones are errors, the good one survives.
	s.AnswerRaw([]byte(`{"DocumentIncarnation":5,"Events":[
		{"EventId":"ok","EventType":"Redeploy","EventStatus":"Scheduled","Resources":["vm1"],"NotBefore":"Sat, 21 Nov 2026 10:15:00 GMT"},
		{"EventId":"t","EventType":"Explode","EventStatus":"Scheduled","Resources":["vm1"]},
		{"EventId":"n","EventType":"Reboot","EventStatus":"Scheduled","Resources":["vm1"],"NotBefore":"tomorrow"},
		{"EventId":"","EventType":"Reboot","EventStatus":"Scheduled","Resources":["vm1"]}]}`))
	doc, err := c.Document(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	events, errs := doc.EventsFor("vm1")
	if len(events) != 1 || events[0].ID != "ok" || events[0].Type != maintenance.TypeRedeploy || len(errs) != 3 {
		t.Errorf("events %+v errs %v: want the Redeploy and three errors", events, errs)
	}
}

func TestVMNameFromProviderID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-user-1234-vmss/virtualMachines/3", "aks-user-1234-vmss_3"},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/worker-7", "worker-7"},
		{"aws:///us-east-1a/i-0123", ""},
		{"azure:///subscriptions/s/resourceGroups/rg", ""},
	} {
		got, err := VMName(tc.id)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("VMName(%q) = %q, %v; want %q", tc.id, got, err, tc.want)
		}
	}
}

func TestNewClientRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"169.254.169.254", "ftp://x", "http://"} {
		if _, err := NewClient(e, time.Second); err == nil || !strings.Contains(err.Error(), "--imds-endpoint") {
			t.Errorf("NewClient(%q): %v", e, err)
		}
	}
}
