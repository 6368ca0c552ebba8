package gcp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The emulator plays each fault as documented on SetFault, for as many
// answers as it is given, then answers as before; a fault answers the long
// polls being held, and holds none while it lasts.
func TestServerPlaysFaults(t *testing.T) {
	s := NewServer(nil)
	s.SetMaintenanceEvent(MaintenanceTerminate)
	ts := httptest.NewServer(s)
	defer ts.Close()
	type answer struct {
		code       int
		body, etag string
		err        error
	}
	read := func(path, query string, timeout time.Duration) answer {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+BasePath+path+query, nil)
		req.Header.Set(FlavorHeader, Flavor)
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(body), resp.Header.Get("ETag"), err}
	}
	whole := answer{200, MaintenanceTerminate, etag([]byte(MaintenanceTerminate)), nil}
	poll := "?wait_for_change=true&timeout_sec=30&last_etag=" + whole.etag
	unavailable := answer{503, "<!DOCTYPE html>\n<html><body><p>503 Service Unavailable</p></body></html>\n", "", nil}

	// A held poll is answered by the fault; the next is not held.
	held := make(chan answer, 1)
	go func() { held <- read(PathMaintenanceEvent, poll, 10*time.Second) }()
	if err := s.AwaitHeld(bounded(t), 1); err != nil {
		t.Fatal(err)
	}
	s.SetFault(maintenance.Fault{Kind: maintenance.FaultServerError, Answers: 2})
	if a := <-held; a != unavailable {
		t.Errorf("held poll when the fault was set: %+v; want %+v", a, unavailable)
	}
	if a := read(PathMaintenanceEvent, poll, 10*time.Second); a != unavailable {
		t.Errorf("poll while the fault lasts: %+v; want %+v", a, unavailable)
	}
	if s.Fault() != (maintenance.Fault{}) {
		t.Errorf("after two answers: fault %+v left", s.Fault())
	}

	cut := answer{200, MaintenanceTerminate[:len(MaintenanceTerminate)/2], whole.etag, nil}
	none := answer{200, MaintenanceNone, etag([]byte(MaintenanceNone)), nil}
	notPreempted := answer{200, PreemptedFalse, etag([]byte(PreemptedFalse)), nil}
	for _, tc := range []struct {
		fault   maintenance.Fault
		paths   []string
		answers []answer
	}{
		{maintenance.Fault{Kind: maintenance.FaultTruncated, Answers: 2},
			[]string{PathMaintenanceEvent, PathMaintenanceEvent}, []answer{cut, cut}},
		// preempted FALSE announces nothing: it does not count.
		{maintenance.Fault{Kind: maintenance.FaultFlap, Answers: 2},
			[]string{PathMaintenanceEvent, PathPreempted, PathMaintenanceEvent}, []answer{none, notPreempted, none}},
	} {
		s.SetFault(tc.fault)
		for i, path := range tc.paths {
			if a := read(path, poll, 10*time.Second); a != tc.answers[i] {
				t.Errorf("%s, %s, answer %d: %+v; want %+v", tc.fault.Kind, path, i+1, a, tc.answers[i])
			}
		}
		if a := read(PathMaintenanceEvent, "", time.Second); a != whole {
			t.Errorf("after %s: %+v; want %+v", tc.fault.Kind, a, whole)
		}
	}

	// The delay and the client's timeout race on the real clock: a delay
	// only a little longer lost that race on a loaded machine (a stall of
	// 200 ms let the answer in). A slow answer ends when its client goes
	// away, so a long delay costs nothing; "at once" is within a few
	// seconds, far short of it.
	s.SetFault(maintenance.Fault{Kind: maintenance.FaultSlow, Delay: time.Minute})
	for range 2 {
		if a := read(PathMaintenanceEvent, "", 100*time.Millisecond); a.err == nil {
			t.Errorf("slow answer: %+v; want the client's timeout", a)
		}
	}
	s.SetFault(maintenance.Fault{})
	if a := read(PathMaintenanceEvent, "", 5*time.Second); a != whole {
		t.Errorf("fault cleared: %+v; want %+v at once", a, whole)
	}
}
