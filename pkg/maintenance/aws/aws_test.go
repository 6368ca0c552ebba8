package aws

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

var epoch = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// start serves an emulator on loopback and returns it with a client. The
// server and the client each get their own fake clock, so a test can expire
// tokens on one side only.
func start(t *testing.T) (srv *Server, srvClock *clocktesting.FakeClock, c *Client, clk *clocktesting.FakeClock) {
	t.Helper()
	srvClock, clk = clocktesting.NewFakeClock(epoch), clocktesting.NewFakeClock(epoch)
	srv = NewServer(srvClock)
	ts := httptest.NewServer(srv) // 127.0.0.1 only
	t.Cleanup(ts.Close)
	c, err := NewClient(ts.URL, 2*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	return srv, srvClock, c, clk
}

// stepping moves clk on by step whenever something waits on it, until the
// returned stop is called: retry pauses then pass on the fake clock at once.
func stepping(clk *clocktesting.FakeClock, step time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if clk.HasWaiters() {
				clk.Step(step)
			} else {
				runtime.Gosched()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// waitFor polls cond until it holds, failing the test after five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func request(t *testing.T, method, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestServerGuardsItsTokens(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	srv := NewServer(clk)
	ts := httptest.NewServer(srv)
	defer ts.Close()

	resp, token := request(t, http.MethodPut, ts.URL+TokenPath, map[string]string{TokenTTLHeader: "21600"})
	if resp.StatusCode != http.StatusOK || token == "" || resp.Header.Get(TokenTTLHeader) != "21600" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("token PUT: %s, token %q, TTL header %q, type %q", resp.Status, token, resp.Header.Get(TokenTTLHeader), resp.Header.Get("Content-Type"))
	}
	valid := map[string]string{TokenHeader: token}
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		code               int
	}{
		{"PUT without TTL", http.MethodPut, TokenPath, nil, http.StatusBadRequest},
		{"PUT with TTL 0", http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "0"}, http.StatusBadRequest},
		{"PUT with TTL over six hours", http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "21601"}, http.StatusBadRequest},
		{"PUT with TTL not a number", http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "soon"}, http.StatusBadRequest},
		{"PUT through a proxy", http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "60", "X-Forwarded-For": "203.0.113.7"}, http.StatusForbidden},
		{"PUT to a versioned path", http.MethodPut, "/2021-03-23/api/token", map[string]string{TokenTTLHeader: "60"}, http.StatusForbidden},
		{"PUT with TTL 1", http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "1"}, http.StatusOK},
		{"GET without a token", http.MethodGet, SpotActionPath, nil, http.StatusUnauthorized},
		{"GET with a made-up token", http.MethodGet, ScheduledPath, map[string]string{TokenHeader: "made-up"}, http.StatusUnauthorized},
		{"GET of an absent notice", http.MethodGet, SpotActionPath, valid, http.StatusNotFound},
		{"GET of an absent lifecycle state", http.MethodGet, LifecyclePath, valid, http.StatusNotFound},
		{"GET of an empty schedule", http.MethodGet, ScheduledPath, valid, http.StatusOK},
		{"HEAD of an empty schedule", http.MethodHead, ScheduledPath, valid, http.StatusOK},
		{"GET of an unknown path", http.MethodGet, "/latest/meta-data/no-such-thing", valid, http.StatusNotFound},
		{"POST", http.MethodPost, ScheduledPath, valid, http.StatusMethodNotAllowed},
	} {
		resp, body := request(t, tc.method, ts.URL+tc.path, tc.header)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %s, want %d (%s)", tc.name, resp.Status, tc.code, body)
		}
	}
	if _, body := request(t, http.MethodGet, ts.URL+ScheduledPath, valid); body != "[]" {
		t.Errorf("empty schedule answered %q, want []", body)
	}

	// Tokens age on the server's clock: valid for ttl seconds, not one more.
	_, short := request(t, http.MethodPut, ts.URL+TokenPath, map[string]string{TokenTTLHeader: "10"})
	clk.Step(9 * time.Second)
	if resp, _ := request(t, http.MethodGet, ts.URL+ScheduledPath, map[string]string{TokenHeader: short}); resp.StatusCode != http.StatusOK {
		t.Errorf("token after 9s of 10: %s", resp.Status)
	}
	clk.Step(time.Second)
	if resp, _ := request(t, http.MethodGet, ts.URL+ScheduledPath, map[string]string{TokenHeader: short}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("token after 10s of 10: %s, want 401", resp.Status)
	}
}

func TestClientReadsAndMapsASpotNotice(t *testing.T) {
	srv, _, c, _ := start(t)
	ctx := context.Background()
	at := time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)
	srv.Spot(SpotTerminate, at)

	a, err := c.SpotAction(ctx)
	if err != nil || a == nil || *a != (SpotAction{Action: "terminate", Time: "2017-09-18T08:22:00Z"}) {
		t.Fatalf("SpotAction = %+v, %v", a, err)
	}
	obs, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := maintenance.Event{ID: "spot-terminate-20170918T082200Z", Source: maintenance.SourceAWS, Type: maintenance.TypePreempt,
		Status: maintenance.StatusScheduled, NotBefore: at, Deadline: at, Description: "Spot interruption: terminate"}
	if len(obs.Events) != 1 || len(obs.Rejected) != 0 || !equalEvent(obs.Events[0], want) {
		t.Fatalf("observed %+v (rejected %v), want only %+v", obs.Events, obs.Rejected, want)
	}
	if srv.TokensIssued() != 1 {
		t.Errorf("%d tokens for two reads, want 1 (cached)", srv.TokensIssued())
	}

	srv.ClearSpot()
	if obs, err := c.Observe(ctx); err != nil || len(obs.Events) != 0 {
		t.Errorf("after the notice is withdrawn: %+v, %v", obs.Events, err)
	}
}

func TestSpotActionMapping(t *testing.T) {
	for _, tc := range []struct {
		action, time, id string
	}{
		{"terminate", "2017-09-18T08:22:00Z", "spot-terminate-20170918T082200Z"},
		{"stop", "2017-09-18T08:22:00Z", "spot-stop-20170918T082200Z"},
		{"hibernate", "2017-09-18T08:22:00+02:00", "spot-hibernate-20170918T062200Z"},
		{"reboot", "2017-09-18T08:22:00Z", ""},
		{"", "2017-09-18T08:22:00Z", ""},
		{"terminate", "18 Sep 2017 08:22:00 GMT", ""},
		{"terminate", "", ""},
	} {
		e, err := (&SpotAction{Action: tc.action, Time: tc.time}).Event()
		if tc.id == "" {
			if err == nil {
				t.Errorf("%q at %q: mapped to %+v, want an error", tc.action, tc.time, e)
			}
			continue
		}
		if err != nil || e.ID != tc.id || e.Type != maintenance.TypePreempt || e.Deadline.IsZero() || !e.Deadline.Equal(e.NotBefore) || e.Deadline.Location() != time.UTC {
			t.Errorf("%q at %q: %+v, %v; want Preempt %s with deadline = NotBefore, in UTC", tc.action, tc.time, e, err, tc.id)
		}
	}
}

func TestScheduledEventMapping(t *testing.T) {
	const nb, na = "21 Jan 2019 09:00:43 GMT", "21 Jan 2019 09:17:23 GMT"
	notBefore := time.Date(2019, 1, 21, 9, 0, 43, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		in       ScheduledEvent
		typ      maintenance.Type
		status   maintenance.Status
		duration time.Duration
		bad      bool
	}{
		{"instance-reboot", ScheduledEvent{EventID: "e", Code: "instance-reboot", State: "active", NotBefore: nb, NotAfter: na}, maintenance.TypeReboot, maintenance.StatusScheduled, 16*time.Minute + 40*time.Second, false},
		{"system-reboot", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "active", NotBefore: nb, NotAfter: na}, maintenance.TypeReboot, maintenance.StatusScheduled, 16*time.Minute + 40*time.Second, false},
		{"system-maintenance", ScheduledEvent{EventID: "e", Code: "system-maintenance", State: "active", NotBefore: nb, NotAfter: na}, maintenance.TypeMaintenance, maintenance.StatusScheduled, 16*time.Minute + 40*time.Second, false},
		{"instance-retirement", ScheduledEvent{EventID: "e", Code: "instance-retirement", State: "active", NotBefore: nb}, maintenance.TypeTerminate, maintenance.StatusScheduled, 0, false},
		{"instance-stop without NotAfter", ScheduledEvent{EventID: "e", Code: "instance-stop", State: "active", NotBefore: nb}, maintenance.TypeTerminate, maintenance.StatusScheduled, 0, false},
		{"canceled", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "canceled", NotBefore: nb, NotAfter: na}, maintenance.TypeReboot, maintenance.StatusCanceled, 16*time.Minute + 40*time.Second, false},
		{"completed", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "completed", NotBefore: nb, NotAfter: na}, maintenance.TypeReboot, maintenance.StatusCompleted, 16*time.Minute + 40*time.Second, false},
		{"unknown code", ScheduledEvent{EventID: "e", Code: "instance-explode", State: "active", NotBefore: nb}, "", "", 0, true},
		{"unknown state", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "pending", NotBefore: nb}, "", "", 0, true},
		{"no EventId", ScheduledEvent{Code: "system-reboot", State: "active", NotBefore: nb}, "", "", 0, true},
		{"RFC 3339 NotBefore", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "active", NotBefore: "2019-01-21T09:00:43Z"}, "", "", 0, true},
		{"bad NotAfter", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "active", NotBefore: nb, NotAfter: "later"}, "", "", 0, true},
		{"NotAfter before NotBefore", ScheduledEvent{EventID: "e", Code: "system-reboot", State: "active", NotBefore: na, NotAfter: nb}, "", "", 0, true},
	} {
		e, err := tc.in.Event()
		if tc.bad {
			if err == nil {
				t.Errorf("%s: mapped to %+v, want an error", tc.name, e)
			}
			continue
		}
		if err != nil || e.ID != "e" || e.Source != maintenance.SourceAWS || e.Type != tc.typ || e.Status != tc.status ||
			!e.NotBefore.Equal(notBefore) || !e.Deadline.Equal(notBefore) || lasts(e) != tc.duration {
			t.Errorf("%s: %+v, %v; want %s/%s from %s lasting %s", tc.name, e, err, tc.typ, tc.status, notBefore, tc.duration)
		}
	}
}

func TestClientFollowsScheduledEventsUntilCanceled(t *testing.T) {
	srv, _, c, _ := start(t)
	ctx := context.Background()
	srv.ScheduleMaintenance(ScheduledEvent{NotBefore: "21 Jan 2019 09:00:43 GMT", Code: CodeSystemReboot, Description: "scheduled reboot",
		EventID: "instance-event-0d59937288b749b32", NotAfter: "21 Jan 2019 09:17:23 GMT"})
	srv.ScheduleMaintenance(ScheduledEvent{NotBefore: "25 Feb 2021 02:00:00 GMT", Code: CodeInstanceStop,
		Description: "The instance is running on degraded hardware", EventID: "instance-event-087e363178449a61e"})

	obs, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Events) != 2 || obs.Events[0].Type != maintenance.TypeReboot || lasts(obs.Events[0]) != 16*time.Minute+40*time.Second ||
		obs.Events[1].Type != maintenance.TypeTerminate || obs.Events[1].Duration != nil || len(obs.Rejected) != 0 {
		t.Fatalf("observed %+v (rejected %v); want the reboot and the stop", obs.Events, obs.Rejected)
	}

	if !srv.SetMaintenanceState("instance-event-0d59937288b749b32", StateCanceled) {
		t.Fatal("SetMaintenanceState found no such event")
	}
	obs, err = c.Observe(ctx)
	if err != nil || len(obs.Events) != 1 || obs.Events[0].ID != "instance-event-087e363178449a61e" {
		t.Fatalf("after canceling the reboot: %+v, %v; want only the stop", obs.Events, err)
	}
	history, err := c.MaintenanceHistory(ctx)
	if err != nil || len(history.Unreadable) != 0 || len(history.Events) != 1 {
		t.Fatalf("history %+v, %v", history, err)
	}
	if h := history.Events[0]; h.State != StateCanceled || h.Description != "[Canceled] scheduled reboot" {
		t.Errorf("history entry %+v; want State canceled and a [Canceled] description", h)
	}
	if e, err := history.Events[0].Event(); err != nil || e.Status != maintenance.StatusCanceled {
		t.Errorf("history entry maps to %+v, %v; want Canceled", e, err)
	}
	if srv.SetMaintenanceState("instance-event-0d59937288b749b32", StateCompleted) || srv.SetMaintenanceState("instance-event-087e363178449a61e", "done") {
		t.Error("SetMaintenanceState accepted a canceled event or an unknown state")
	}

	// Should the service ever list a canceled event among the scheduled
	// ones, it is reported as Canceled, not as something to act on.
	srv.AnswerRaw(ScheduledPath, []byte(`[ {"NotBefore" : "21 Jan 2019 09:00:43 GMT", "Code" : "system-reboot", "Description" : "[Canceled] scheduled reboot",
		"EventId" : "instance-event-0d59937288b749b32", "NotAfter" : "21 Jan 2019 09:17:23 GMT", "State" : "canceled"} ]`))
	obs, err = c.Observe(ctx)
	if err != nil || len(obs.Events) != 1 || obs.Events[0].Status != maintenance.StatusCanceled || obs.Events[0].Active() {
		t.Errorf("canceled entry in the scheduled list: %+v, %v", obs.Events, err)
	}

	// Once every event is over the list is empty again.
	srv.AnswerRaw(ScheduledPath, nil)
	srv.SetMaintenanceState("instance-event-087e363178449a61e", StateCompleted)
	if obs, err := c.Observe(ctx); err != nil || len(obs.Events) != 0 {
		t.Errorf("empty schedule: %+v, %v", obs.Events, err)
	}
}

func TestScheduledListAnswering404MeansNoEvents(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			_, _ = io.WriteString(w, "token")
			return
		}
		writeError(w, http.StatusNotFound)
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, time.Second, clocktesting.NewFakeClock(epoch))
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := c.Observe(context.Background()); err != nil || len(obs.Events)+len(obs.Rejected) != 0 {
		t.Errorf("every document 404: %+v, %v; want an empty observation", obs, err)
	}
}

func TestClientReadsARebalanceRecommendation(t *testing.T) {
	srv, _, c, _ := start(t)
	srv.Rebalance(time.Date(2020, 10, 27, 8, 22, 0, 0, time.UTC))
	obs, err := c.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Events) != 1 {
		t.Fatalf("observed %+v, want one rebalance", obs.Events)
	}
	e := obs.Events[0]
	if e.ID != "rebalance-20201027T082200Z" || e.Type != maintenance.TypeRebalance || e.Status != maintenance.StatusScheduled || !e.Deadline.IsZero() || !e.NotBefore.IsZero() {
		t.Errorf("rebalance mapped to %+v; want Rebalance with no deadline", e)
	}
	srv.ClearRebalance()
	if obs, err := c.Observe(context.Background()); err != nil || len(obs.Events) != 0 {
		t.Errorf("after ClearRebalance: %+v, %v", obs.Events, err)
	}
}

func TestLifecycleStateMapping(t *testing.T) {
	srv, _, c, _ := start(t)
	for _, tc := range []struct {
		state    string
		id       string // "" for no event
		rejected bool
	}{
		{"", "", false},
		{"InService", "", false},
		{"Standby", "", false},
		{"Detached", "", false},
		{"Warmed:Running", "", false},
		{"Warmed:Stopped", "", false},
		{"Warmed:Hibernated", "", false},
		{"Terminated", "asg-terminated", false},
		{"Warmed:Terminated", "asg-warmed-terminated", false},
		{"Terminating:Wait", "", true},
	} {
		srv.SetLifecycleState(tc.state)
		obs, err := c.Observe(context.Background())
		if err != nil {
			t.Errorf("%q: %v", tc.state, err)
			continue
		}
		if tc.rejected != (len(obs.Rejected) == 1) {
			t.Errorf("%q: rejected %v, want rejected=%v", tc.state, obs.Rejected, tc.rejected)
		}
		switch {
		case tc.id == "" && len(obs.Events) != 0:
			t.Errorf("%q: events %+v, want none", tc.state, obs.Events)
		case tc.id != "" && (len(obs.Events) != 1 || obs.Events[0].ID != tc.id || obs.Events[0].Type != maintenance.TypeTerminate):
			t.Errorf("%q: events %+v, want Terminate %s", tc.state, obs.Events, tc.id)
		}
	}
}

func TestClientRenewsItsTokenBeforeItExpires(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch) // one clock for both sides
	srv := NewServer(clk)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, err := NewClient(ts.URL, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(MaxTokenTTL - 2*time.Minute)
	if _, err := c.Observe(ctx); err != nil || srv.TokensIssued() != 1 {
		t.Fatalf("two minutes before expiry: %v, %d tokens; want the cached one", err, srv.TokensIssued())
	}
	clk.Step(90 * time.Second)
	if _, err := c.Observe(ctx); err != nil || srv.TokensIssued() != 2 || srv.Unauthorized() != 0 {
		t.Fatalf("30s before expiry: %v, %d tokens, %d refusals; want a new token and no 401", err, srv.TokensIssued(), srv.Unauthorized())
	}
}

func TestClientGetsANewTokenAfterA401(t *testing.T) {
	srv, srvClock, c, _ := start(t)
	srv.SetLifecycleState(LifecycleTerminated)
	ctx := context.Background()
	if _, err := c.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	// The service forgets the token while the client still trusts it (a
	// restart, a live migration, a clock that disagrees).
	srvClock.Step(MaxTokenTTL)
	obs, err := c.Observe(ctx)
	if err != nil || len(obs.Events) != 1 {
		t.Fatalf("after the token lapsed on the server: %+v, %v", obs.Events, err)
	}
	if srv.TokensIssued() != 2 || srv.Unauthorized() != 1 {
		t.Errorf("%d tokens, %d refusals; want 2 and 1", srv.TokensIssued(), srv.Unauthorized())
	}
}

func TestClientGivesUpWhenEvenANewTokenIsRefused(t *testing.T) {
	var puts, gets atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts.Add(1)
			_, _ = io.WriteString(w, "token")
			return
		}
		gets.Add(1)
		writeError(w, http.StatusUnauthorized)
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, time.Second, clocktesting.NewFakeClock(epoch))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Observe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("persistent 401: %v; want an error naming it", err)
	}
	if puts.Load() != 2 || gets.Load() != 2 {
		t.Errorf("%d PUTs and %d GETs; want one new token and one second try", puts.Load(), gets.Load())
	}
}

func TestClientDoesNotRetryARefusal(t *testing.T) {
	var puts atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		puts.Add(1)
		writeError(w, http.StatusForbidden) // the metadata service is turned off
	}))
	defer ts.Close()
	clk := clocktesting.NewFakeClock(epoch)
	c, err := NewClient(ts.URL, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	stop := stepping(clk, 200*time.Millisecond)
	defer stop()
	_, err = c.Observe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("403 on the token PUT: %v; want an error naming it", err)
	}
	if puts.Load() != 1 || clk.Since(epoch) != 0 {
		t.Errorf("%d requests and %s of pauses; want one request and no retry", puts.Load(), clk.Since(epoch))
	}
}

func TestClientRetriesServerErrorsWithBackoff(t *testing.T) {
	srv, _, c, clk := start(t)
	ctx := context.Background()
	stop := stepping(clk, 200*time.Millisecond)
	defer stop()

	srv.FailNext(2) // the token PUT fails twice, then all is well
	began := clk.Now()
	if _, err := c.Observe(ctx); err != nil {
		t.Fatalf("two 500s then success: %v", err)
	}
	if waited := clk.Since(began); waited != 600*time.Millisecond {
		t.Errorf("waited %s on the clock, want 200ms + 400ms", waited)
	}

	srv.FailNext(100)
	began = clk.Now()
	_, err := c.Observe(ctx)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("persistent 500s: %v; want an error naming them", err)
	}
	if waited := clk.Since(began); waited != 1400*time.Millisecond {
		t.Errorf("waited %s on the clock, want 200ms + 400ms + 800ms", waited)
	}
}

func TestClientRetriesTransportErrors(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there any more
	clk := clocktesting.NewFakeClock(epoch)
	c, err := NewClient(url, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	stop := stepping(clk, 200*time.Millisecond)
	defer stop()
	_, err = c.Observe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "getting a metadata token") {
		t.Fatalf("unreachable service: %v", err)
	}
	if waited := clk.Since(epoch); waited != 1400*time.Millisecond {
		t.Errorf("waited %s on the clock, want three pauses (1.4s)", waited)
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			_, _ = io.WriteString(w, "token")
			return
		}
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, time.Second, clocktesting.NewFakeClock(epoch))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Observe(context.Background()); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("redirect: %v; want an error naming the 302", err)
	}
	if elsewhere.Load() != 0 {
		t.Errorf("the token travelled to the redirect target %d times", elsewhere.Load())
	}
}

func TestHostileAnswersAreErrorsNotEvents(t *testing.T) {
	srv, _, c, _ := start(t)
	srv.Spot(SpotTerminate, epoch.Add(2*time.Minute)) // a good document beside each bad one
	big := "[" + strings.Repeat(`{"EventId":"x"},`, MaxDocument/15) + `{}]`
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"HTML schedule", ScheduledPath, "<html><body>Gateway Timeout</body></html>", "decoding"},
		{"HTML spot notice", SpotActionPath, "<html><body>Gateway Timeout</body></html>", "decoding"},
		{"oversized schedule", ScheduledPath, big, "larger than"},
		{"oversized lifecycle state", LifecyclePath, strings.Repeat("A", MaxDocument+1), "larger than"},
		{"schedule as an object", ScheduledPath, `{"Events":[]}`, "decoding"},
		{"spot notice with wrong types", SpotActionPath, `{"action": false, "time": 1505722920}`, "decoding"},
		{"spot notice as a list", SpotActionPath, `[]`, "decoding"},
		{"rebalance with a number", RebalancePath, `{"noticeTime": 1603786920}`, "decoding"},
		{"truncated rebalance", RebalancePath, `{"noticeTime": "2020-10-27T08:22:00Z"`, "decoding"},
		{"empty schedule body", ScheduledPath, ``, "decoding"},
		{"HTML lifecycle state", LifecyclePath, "<html><body>Terminated</body></html>", "not a state name"},
	} {
		srv.AnswerRaw(tc.path, []byte(tc.body))
		obs, err := c.Observe(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(obs.Events) != 0 || len(obs.Rejected) != 0 {
			t.Errorf("%s: observed %+v, %v; want an error containing %q and nothing else", tc.name, obs, err, tc.want)
		}
		srv.AnswerRaw(tc.path, nil)
	}

	// Readable documents with unreadable entries: each bad entry is rejected,
	// the good one survives.
	srv.AnswerRaw(ScheduledPath, []byte(`[
		{"NotBefore": "21 Jan 2019 09:00:43 GMT", "Code": "system-reboot", "EventId": "good", "NotAfter": "21 Jan 2019 09:17:23 GMT", "State": "active"},
		{"NotBefore": "tomorrow", "Code": "system-reboot", "EventId": "bad-time", "State": "active"},
		{"NotBefore": 1548061243, "Code": "system-reboot", "EventId": "wrong-type", "State": "active"},
		{"NotBefore": "21 Jan 2019 09:00:43 GMT", "Code": "instance-explode", "EventId": "bad-code", "State": "active"},
		"not an event"]`))
	srv.AnswerRaw(SpotActionPath, []byte(`{"action": "explode", "time": "2017-09-18T08:22:00Z"}`))
	srv.AnswerRaw(RebalancePath, []byte(`{"noticeTime": "27 Oct 2020 08:22:00 GMT"}`))
	srv.AnswerRaw(LifecyclePath, []byte("Pending:Wait"))
	obs, err := c.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Events) != 1 || obs.Events[0].ID != "good" || len(obs.Rejected) != 7 {
		t.Errorf("events %+v, rejected %d: %v; want only the good event and 7 rejections", obs.Events, len(obs.Rejected), obs.Rejected)
	}
}

func TestSourcePacesItselfOnTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	srv := NewServer(clk)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, err := NewClient(ts.URL, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(c, clk, 5*time.Second)
	next := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			obs, err := src.Next(ctx)
			if err == nil && len(obs.Events) > 1 {
				err = errors.New("more than one event")
			}
			done <- err
		}()
		return done
	}
	await := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Next did not return")
			return nil
		}
	}

	if err := await(next(context.Background())); err != nil { // the first call answers at once
		t.Fatal(err)
	}
	done := next(context.Background())
	waitFor(t, "Next to wait on the clock", clk.HasWaiters)
	clk.Step(5*time.Second - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Next returned (%v) before the interval had passed", err)
	default:
	}
	clk.Step(time.Millisecond)
	if err := await(done); err != nil {
		t.Fatal(err)
	}

	clk.Step(time.Minute) // long after the last poll: no wait
	if err := await(next(context.Background())); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done = next(ctx)
	waitFor(t, "Next to wait on the clock", clk.HasWaiters)
	cancel()
	if err := await(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled while waiting: %v", err)
	}
}

func TestSourceFailsWholeWhenADocumentFails(t *testing.T) {
	srv, _, c, clk := start(t)
	srv.Spot(SpotTerminate, epoch.Add(2*time.Minute))
	srv.AnswerRaw(RebalancePath, []byte("<html>proxy error</html>"))
	src := NewSource(c, clk, time.Second)
	obs, err := src.Next(context.Background())
	if err == nil || len(obs.Events) != 0 {
		t.Fatalf("one unreadable document: %+v, %v; want an error and no events, so the caller keeps what it knew", obs, err)
	}
}

func TestNewClientRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"169.254.169.254", "ftp://169.254.169.254", "http://", "http://169.254.169.254/latest/meta-data"} {
		if _, err := NewClient(e, time.Second, nil); err == nil || !strings.Contains(err.Error(), "--imds-endpoint") {
			t.Errorf("NewClient(%q): %v", e, err)
		}
	}
	if _, err := NewClient("", 0, nil); err == nil {
		t.Error("NewClient with no timeout: no error")
	}
	if c, err := NewClient("", time.Second, nil); err != nil || c.base != DefaultEndpoint {
		t.Errorf("NewClient(\"\") = %v, %v; want the default endpoint", c, err)
	}
}

func equalEvent(a, b maintenance.Event) bool {
	return a.ID == b.ID && a.Source == b.Source && a.Type == b.Type && a.Status == b.Status && a.NotBefore.Equal(b.NotBefore) &&
		a.Deadline.Equal(b.Deadline) && lasts(a) == lasts(b) && (a.Duration == nil) == (b.Duration == nil) && a.Description == b.Description && len(a.Resources) == len(b.Resources)
}

// lasts is the event's duration, zero when unknown.
func lasts(e maintenance.Event) time.Duration {
	if e.Duration == nil {
		return 0
	}
	return *e.Duration
}
