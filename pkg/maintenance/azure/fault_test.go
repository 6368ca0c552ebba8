package azure

import (
	"context"
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
	s := NewServer()
	s.Schedule(RawEvent{EventID: "A1", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{"vm1"},
		EventStatus: "Scheduled", NotBefore: "Sat, 21 Nov 2026 10:15:00 GMT", EventSource: "Platform", DurationInSeconds: -1})
	ts := httptest.NewServer(s)
	defer ts.Close()
	get := func(timeout time.Duration) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+Path+"?api-version="+APIVersion, nil)
		req.Header.Set("Metadata", "true")
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	_, whole, err := get(time.Second)
	if err != nil || !strings.Contains(whole, `"A1"`) {
		t.Fatalf("the document: %q, %v", whole, err)
	}
	empty := `{"DocumentIncarnation":1,"Events":[]}` + "\n"

	for _, tc := range []struct {
		fault maintenance.Fault
		code  int
		body  string
	}{
		{maintenance.Fault{Kind: maintenance.FaultServerError, Answers: 2}, http.StatusInternalServerError, `{"error":"Internal server error"}` + "\n"},
		{maintenance.Fault{Kind: maintenance.FaultTruncated, Answers: 2}, http.StatusOK, whole[:len(whole)/2]},
		{maintenance.Fault{Kind: maintenance.FaultFlap, Answers: 2}, http.StatusOK, empty},
	} {
		s.SetFault(tc.fault)
		for i := range 2 {
			if code, body, err := get(time.Second); err != nil || code != tc.code || body != tc.body {
				t.Errorf("%s, answer %d: %d %q, %v; want %d %q", tc.fault.Kind, i+1, code, body, err, tc.code, tc.body)
			}
		}
		if code, body, err := get(time.Second); err != nil || code != http.StatusOK || body != whole {
			t.Errorf("after %s: %d %q, %v; want the document", tc.fault.Kind, code, body, err)
		}
		if f := s.Fault(); f != (maintenance.Fault{}) {
			t.Errorf("after %s: fault %+v left", tc.fault.Kind, f)
		}
	}

	s.SetFault(maintenance.Fault{Kind: maintenance.FaultSlow, Delay: 300 * time.Millisecond})
	for range 2 {
		if _, _, err := get(100 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			t.Errorf("slow answer: %v; want the client's timeout", err)
		}
	}
	if code, body, err := get(time.Second); err != nil || code != http.StatusOK || body != whole {
		t.Errorf("slow answer within the client's patience: %d %q, %v", code, body, err)
	}
	s.SetFault(maintenance.Fault{})
	if code, body, err := get(100 * time.Millisecond); err != nil || code != http.StatusOK || body != whole {
		t.Errorf("fault cleared: %d %q, %v; want the document at once", code, body, err)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
