package aws

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The emulator plays each fault as documented on SetFault, for as many
// answers as it is given, then answers as before.
func TestServerPlaysFaults(t *testing.T) {
	s := NewServer(nil)
	s.Spot(SpotTerminate, time.Date(2026, 11, 21, 10, 2, 0, 0, time.UTC))
	s.ScheduleMaintenance(ScheduledEvent{EventID: "instance-event-1", Code: CodeSystemReboot, NotBefore: "21 Nov 2026 11:00:00 GMT"})
	ts := httptest.NewServer(s)
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodPut, ts.URL+TokenPath, nil)
	req.Header.Set(TokenTTLHeader, "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	get := func(path string, timeout time.Duration) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set(TokenHeader, string(token))
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	_, spot, _ := get(SpotActionPath, time.Second)
	_, scheduled, _ := get(ScheduledPath, time.Second)
	if !strings.Contains(spot, SpotTerminate) || !strings.Contains(scheduled, "instance-event-1") {
		t.Fatalf("the documents: %q, %q", spot, scheduled)
	}

	type answer struct {
		path string
		code int
		body string
	}
	serverError := "<html><head><title>500 - Internal Server Error</title></head><body><h1>500 - Internal Server Error</h1></body></html>\n"
	notFound := "<html><head><title>404 - Not Found</title></head><body><h1>404 - Not Found</h1></body></html>\n"
	for _, tc := range []struct {
		fault   maintenance.Fault
		answers []answer
	}{
		{maintenance.Fault{Kind: maintenance.FaultServerError, Answers: 2}, []answer{
			{SpotActionPath, 500, serverError}, {HistoryPath, 500, serverError}}},
		{maintenance.Fault{Kind: maintenance.FaultTruncated, Answers: 2}, []answer{
			{SpotActionPath, 200, spot[:len(spot)/2]}, {RebalancePath, 404, notFound}, {ScheduledPath, 200, scheduled[:len(scheduled)/2]}}},
		// Only a document that announces something counts, and hides it.
		{maintenance.Fault{Kind: maintenance.FaultFlap, Answers: 2}, []answer{
			{SpotActionPath, 404, notFound}, {HistoryPath, 200, "[]"}, {ScheduledPath, 200, "[]"}}},
	} {
		s.SetFault(tc.fault)
		for _, a := range tc.answers {
			if code, body, err := get(a.path, time.Second); err != nil || code != a.code || body != a.body {
				t.Errorf("%s, %s: %d %q, %v; want %d %q", tc.fault.Kind, a.path, code, body, err, a.code, a.body)
			}
		}
		if code, body, err := get(SpotActionPath, time.Second); err != nil || code != http.StatusOK || body != spot {
			t.Errorf("after %s: %d %q, %v; want the notice", tc.fault.Kind, code, body, err)
		}
		if f := s.Fault(); f != (maintenance.Fault{}) {
			t.Errorf("after %s: fault %+v left", tc.fault.Kind, f)
		}
	}

	s.SetFault(maintenance.Fault{Kind: maintenance.FaultSlow, Delay: 300 * time.Millisecond})
	for range 2 {
		if _, _, err := get(SpotActionPath, 100*time.Millisecond); !isTimeout(err) {
			t.Errorf("slow answer: %v; want the client's timeout", err)
		}
	}
	s.SetFault(maintenance.Fault{})
	if code, body, err := get(SpotActionPath, 100*time.Millisecond); err != nil || code != http.StatusOK || body != spot {
		t.Errorf("fault cleared: %d %q, %v; want the notice at once", code, body, err)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
