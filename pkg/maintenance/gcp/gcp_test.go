package gcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// start serves an emulator on loopback, reading time from clk, and returns a
// client for it whose retries do not wait long.
func start(t *testing.T, clk *clocktesting.FakeClock) (*Server, *Client) {
	t.Helper()
	s := NewServer(clk)
	ts := httptest.NewServer(s) // 127.0.0.1 only
	t.Cleanup(ts.Close)
	c, err := NewClient(ts.URL, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.backoff = time.Millisecond
	return s, c
}

// watch runs a long poll in the background; its answer arrives on the channel.
type polled struct {
	a   Answer
	err error
}

func watch(ctx context.Context, c *Client, path, lastETag string, wait time.Duration) <-chan polled {
	done := make(chan polled, 1)
	go func() {
		a, err := c.Watch(ctx, path, lastETag, wait)
		done <- polled{a, err}
	}()
	return done
}

func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func get(t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func TestServerRefusesRequestsWithoutFlavorOrWithForwardedFor(t *testing.T) {
	ts := httptest.NewServer(NewServer(nil))
	defer ts.Close()
	key := ts.URL + BasePath + PathPreempted
	for _, tc := range []struct {
		name   string
		url    string
		header map[string]string
		code   int
	}{
		{"no flavor", key, nil, http.StatusForbidden},
		{"wrong flavor", key, map[string]string{FlavorHeader: "google"}, http.StatusForbidden},
		{"forwarded", key, map[string]string{FlavorHeader: Flavor, "X-Forwarded-For": "10.0.0.7"}, http.StatusForbidden},
		{"unknown key", ts.URL + BasePath + "instance/foo", map[string]string{FlavorHeader: Flavor}, http.StatusNotFound},
		{"fine", key, map[string]string{FlavorHeader: Flavor}, http.StatusOK},
	} {
		resp := get(t, tc.url, tc.header)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.code)
		}
		if resp.Header.Get(FlavorHeader) != Flavor {
			t.Errorf("%s: answer lacks %s: %s", tc.name, FlavorHeader, Flavor)
		}
		if ok := resp.StatusCode == http.StatusOK; ok != (resp.Header.Get("ETag") != "") {
			t.Errorf("%s: ETag %q on a %d answer", tc.name, resp.Header.Get("ETag"), resp.StatusCode)
		}
	}
}

func TestServerETagsNameValues(t *testing.T) {
	s, c := start(t, nil)
	ctx := bounded(t)
	before, err := c.Get(ctx, PathPreempted)
	if err != nil {
		t.Fatal(err)
	}
	if before.Value != PreemptedFalse || len(before.ETag) != 16 {
		t.Fatalf("fresh VM: %+v; want FALSE with a 16-digit ETag", before)
	}
	s.Preempt()
	during, _ := c.Get(ctx, PathPreempted)
	s.Reset()
	after, _ := c.Get(ctx, PathPreempted)
	if during.Value != PreemptedTrue || during.ETag == before.ETag || after.ETag != before.ETag {
		t.Errorf("ETags %q → %q (%s) → %q: want a new one while preempted and the old one back after", before.ETag, during.ETag, during.Value, after.ETag)
	}
}

func TestLongPollIsHeldUntilPreempted(t *testing.T) {
	s, c := start(t, clocktesting.NewFakeClock(t0))
	ctx := bounded(t)
	first, err := c.Get(ctx, PathPreempted)
	if err != nil {
		t.Fatal(err)
	}
	done := watch(ctx, c, PathPreempted, first.ETag, time.Minute)
	if err := s.AwaitHeld(ctx, 1); err != nil {
		t.Fatalf("long poll never held: %v", err)
	}
	select {
	case p := <-done:
		t.Fatalf("long poll answered before anything changed: %+v", p)
	default:
	}
	s.Preempt()
	p := <-done
	if p.err != nil || p.a.Value != PreemptedTrue || p.a.ETag == first.ETag {
		t.Errorf("after Preempt: %+v, %v; want TRUE under a new ETag", p.a, p.err)
	}
}

func TestLongPollTimesOutWithTheUnchangedValue(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	s, c := start(t, clk)
	ctx := bounded(t)
	first, _ := c.Get(ctx, PathMaintenanceEvent)
	done := watch(ctx, c, PathMaintenanceEvent, first.ETag, 5*time.Second)
	if err := s.AwaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Step(4 * time.Second) // timeout_sec=5 has not passed: the timer cannot have fired
	select {
	case p := <-done:
		t.Fatalf("answered after 4s of a 5s timeout: %+v", p)
	default:
	}
	clk.Step(time.Second)
	p := <-done
	if p.err != nil || p.a != first {
		t.Errorf("after the timeout: %+v, %v; want the unchanged %+v", p.a, p.err, first)
	}
}

func TestLongPollAnswersAtOnceForAnotherETag(t *testing.T) {
	s, c := start(t, clocktesting.NewFakeClock(t0)) // the clock never moves: only an immediate answer can come
	s.SetMaintenanceEvent(MaintenanceMigrate)
	// Google's own sample starts with last_etag=0, to read the value at once.
	a, err := c.Watch(bounded(t), PathMaintenanceEvent, "0", time.Minute)
	if err != nil || a.Value != MaintenanceMigrate {
		t.Errorf("stale last_etag: %+v, %v; want the current value at once", a, err)
	}
}

func TestLongPollWithoutETagWaitsForTheNextChange(t *testing.T) {
	s, c := start(t, clocktesting.NewFakeClock(t0))
	ctx := bounded(t)
	done := watch(ctx, c, PathMaintenanceEvent, "", time.Minute)
	if err := s.AwaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.SetMaintenanceEvent(MaintenanceTerminate)
	if p := <-done; p.err != nil || p.a.Value != MaintenanceTerminate {
		t.Errorf("got %+v, %v; want TERMINATE_ON_HOST_MAINTENANCE", p.a, p.err)
	}
}

func TestLongPollEndsWhenTheClientGoesAway(t *testing.T) {
	s, c := start(t, clocktesting.NewFakeClock(t0))
	ctx := bounded(t)
	pollCtx, cancel := context.WithCancel(ctx)
	done := watch(pollCtx, c, PathPreempted, "", time.Minute)
	if err := s.AwaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if p := <-done; !errors.Is(p.err, context.Canceled) {
		t.Errorf("canceled poll: %v", p.err)
	}
	if err := s.AwaitHeld(ctx, 0); err != nil {
		t.Errorf("server still holds the abandoned poll: %v", err)
	}
}

func TestServerRefusesBadTimeouts(t *testing.T) {
	ts := httptest.NewServer(NewServer(nil))
	defer ts.Close()
	resp := get(t, ts.URL+BasePath+PathPreempted+"?wait_for_change=true&timeout_sec=soon", map[string]string{FlavorHeader: Flavor})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("timeout_sec=soon: %d, want 400", resp.StatusCode)
	}
}

func TestClientRetriesServerErrors(t *testing.T) {
	s, c := start(t, nil)
	s.FailNext(2)
	if a, err := c.Get(bounded(t), PathPreempted); err != nil || a.Value != PreemptedFalse {
		t.Fatalf("two 503s then success: %+v, %v", a, err)
	}
	s.FailNext(10)
	if _, err := c.Get(bounded(t), PathPreempted); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("persistent 503s: want an error naming them, got %v", err)
	}
}

func TestClientRefusesAnswersNoMetadataServerSent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"captive portal", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("ETag", "abc")
			_, _ = io.WriteString(w, "<html>log in</html>")
		}, "no metadata server"},
		{"no etag", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(FlavorHeader, Flavor)
			_, _ = io.WriteString(w, "FALSE")
		}, "no ETag"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(FlavorHeader, Flavor)
			http.Redirect(w, r, "http://127.0.0.1:1/", http.StatusFound)
		}, "302"},
		{"forbidden", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(FlavorHeader, Flavor)
			http.Error(w, "nope", http.StatusForbidden)
		}, "403"},
	} {
		ts := httptest.NewServer(tc.handler)
		c, _ := NewClient(ts.URL, time.Second)
		c.backoff = time.Millisecond
		a, err := c.Get(bounded(t), PathPreempted)
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) || a != (Answer{}) {
			t.Errorf("%s: %+v, %v; want an error containing %q", tc.name, a, err, tc.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestLongPollRequestOutlivesItsWait(t *testing.T) {
	c, err := NewClient("", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var left time.Duration
	var url string
	c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		deadline, _ := r.Context().Deadline()
		left, url = time.Until(deadline), r.URL.String()
		h := http.Header{FlavorHeader: {Flavor}, "Etag": {"e"}}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader("NONE"))}, nil
	})
	if _, err := c.Watch(context.Background(), PathMaintenanceEvent, "abc", 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if left <= 90*time.Second || left > 92*time.Second {
		t.Errorf("long poll of 90s gets %s before the client gives up; want a little over 90s", left)
	}
	want := DefaultEndpoint + BasePath + PathMaintenanceEvent + "?last_etag=abc&timeout_sec=90&wait_for_change=true"
	if url != want {
		t.Errorf("requested %s, want %s", url, want)
	}
	if _, err := c.Get(context.Background(), PathPreempted); err != nil || left > 2*time.Second {
		t.Errorf("plain read: %v, %s to go; want the 2s timeout", err, left)
	}
}

func TestNewClientRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"metadata.google.internal", "ftp://x", "http://", "http://metadata.google.internal/computeMetadata/v1/"} {
		if _, err := NewClient(e, time.Second); err == nil || !strings.Contains(err.Error(), "--imds-endpoint") {
			t.Errorf("NewClient(%q): %v", e, err)
		}
	}
	if _, err := NewClient("", 0); err == nil {
		t.Error("NewClient with no timeout: want an error")
	}
}

// source serves an emulator and watches it with a Source; both read the same
// fake clock.
func source(t *testing.T) (*Server, *Source, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	s, c := start(t, clk)
	return s, NewSource(c, clk), clk
}

// next calls Next, then lets the source take in whatever else has answered
// until both keys' long polls are held again, and returns the last
// observation: what the VM announces once things are quiet.
func next(t *testing.T, s *Server, src *Source) (maintenance.Observation, error) {
	t.Helper()
	obs, err := src.Next(bounded(t))
	return settle(t, s, src, obs, err)
}

// nextAfterTimeout calls Next while nothing changes: both long polls are
// held, the clock passes their timeout_sec, and Next reports the unchanged
// state.
func nextAfterTimeout(t *testing.T, s *Server, src *Source, clk *clocktesting.FakeClock) (maintenance.Observation, error) {
	t.Helper()
	ctx := bounded(t)
	if err := s.AwaitHeld(ctx, len(watched)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		obs maintenance.Observation
		err error
	}
	done := make(chan result, 1)
	go func() {
		obs, err := src.Next(ctx)
		done <- result{obs, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Next returned while nothing changed: %+v, %v", r.obs, r.err)
	case <-time.After(10 * time.Millisecond):
	}
	clk.Step(src.wait)
	r := <-done
	return settle(t, s, src, r.obs, r.err)
}

// settle takes in what else has answered after an observation until both
// keys' long polls are held again, and returns the last observation. It takes
// a report waiting for Next for an answer, so it must not run while a poll
// whose ctx ended may still report: Next takes such a report in silently,
// sends the poll again, and waits for a change.
func settle(t *testing.T, s *Server, src *Source, obs maintenance.Observation, err error) (maintenance.Observation, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		switch {
		case len(src.updates) > 0:
			obs, err = src.Next(bounded(t))
		case s.Held() == len(watched):
			return obs, err
		case time.Now().After(deadline):
			t.Fatalf("the source's long polls are not held (%d of %d, requests %d, %d; keys %+v); last %+v, %v", s.Held(), len(watched), s.Requests(PathPreempted), s.Requests(PathMaintenanceEvent), src.keys, obs, err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// only(t)(src.Next(ctx)) is the one event Next reported.
func only(t *testing.T) func(maintenance.Observation, error) maintenance.Event {
	return func(obs maintenance.Observation, err error) maintenance.Event {
		t.Helper()
		if err != nil || len(obs.Events) != 1 || len(obs.Rejected) != 0 {
			t.Fatalf("got %+v, %v; want exactly one event", obs, err)
		}
		return obs.Events[0]
	}
}

func TestSourceMapsEachNotice(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announce  func(*Server)
		id        string
		typ       maintenance.Type
		status    maintenance.Status
		notBefore time.Time
		deadline  time.Time
	}{
		{"preempted", (*Server).Preempt, IDPreempted, maintenance.TypePreempt, maintenance.StatusStarted, time.Time{}, t0.Add(30 * time.Second)},
		{"live migration", func(s *Server) { s.SetMaintenanceEvent(MaintenanceMigrate) },
			IDMigrate, maintenance.TypeFreeze, maintenance.StatusScheduled, t0.Add(time.Minute), t0.Add(time.Minute)},
		{"terminate", func(s *Server) { s.SetMaintenanceEvent(MaintenanceTerminate) },
			IDTerminate, maintenance.TypeTerminate, maintenance.StatusScheduled, t0.Add(time.Minute), t0.Add(time.Minute)},
	} {
		s, src, _ := source(t)
		tc.announce(s)
		e := only(t)(src.Next(bounded(t)))
		if e.ID != tc.id || e.Source != maintenance.SourceGCP || e.Type != tc.typ || e.Status != tc.status ||
			!e.NotBefore.Equal(tc.notBefore) || !e.Deadline.Equal(tc.deadline) {
			t.Errorf("%s: %+v; want %s %s %s not before %s, deadline %s", tc.name, e, tc.id, tc.typ, tc.status, tc.notBefore, tc.deadline)
		}
	}
}

func TestSourceKeepsDeadlinesAndEndsEventsOnReset(t *testing.T) {
	s, src, clk := source(t)
	if obs, err := next(t, s, src); err != nil || len(obs.Events) != 0 {
		t.Fatalf("quiet VM: %+v, %v", obs, err)
	}
	s.Preempt()
	if e := only(t)(next(t, s, src)); !e.Deadline.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("preempted at t0: deadline %s", e.Deadline)
	}
	clk.Step(10 * time.Second)
	if e := only(t)(nextAfterTimeout(t, s, src, clk)); !e.Deadline.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("seen again 70s later: deadline moved to %s", e.Deadline)
	}

	t1 := clk.Now()
	s.SetMaintenanceEvent(MaintenanceTerminate)
	obs, err := next(t, s, src)
	if err != nil || len(obs.Events) != 2 || !obs.Events[0].Deadline.Equal(t0.Add(30*time.Second)) ||
		obs.Events[1].ID != IDTerminate || !obs.Events[1].Deadline.Equal(t1.Add(time.Minute)) {
		t.Fatalf("preempted, then terminated: %+v, %v", obs, err)
	}

	s.Reset()
	if obs, err = next(t, s, src); err != nil || len(obs.Events) != 0 {
		t.Errorf("after Reset: %+v, %v; want no events (they are over)", obs, err)
	}
	// The preemption's 30 s ran out long ago: a new notice counts from when
	// it is seen. The maintenance notice comes back within its 60 s: the same
	// notice, the same deadline.
	clk.Step(20 * time.Second)
	s.Preempt()
	s.SetMaintenanceEvent(MaintenanceTerminate)
	obs, err = next(t, s, src)
	if err != nil || len(obs.Events) != 2 || !obs.Events[0].Deadline.Equal(clk.Now().Add(30*time.Second)) ||
		!obs.Events[1].Deadline.Equal(t1.Add(time.Minute)) {
		t.Errorf("preempted and terminated again: %+v, %v; want deadlines %s and %s", obs, err, clk.Now().Add(30*time.Second), t1.Add(time.Minute))
	}
}

func TestSourceMaintenanceStartsAfterItsNotice(t *testing.T) {
	s, src, clk := source(t)
	s.SetMaintenanceEvent(MaintenanceMigrate)
	if e := only(t)(next(t, s, src)); e.Status != maintenance.StatusScheduled {
		t.Fatalf("fresh notice: %+v", e)
	}
	clk.Step(MaintenanceNotice - DefaultWait) // the long poll's timeout brings the clock to t0+60s
	e := only(t)(nextAfterTimeout(t, s, src, clk))
	if e.Status != maintenance.StatusStarted || !e.NotBefore.IsZero() || !e.Deadline.Equal(t0.Add(time.Minute)) {
		t.Errorf("60s after the notice: %+v; want Started, no NotBefore, the same deadline", e)
	}
}

// Issue 11, item 4: a maintenance-event value Google does not document is
// rejected and ignored; it never hides preempted=TRUE.
func TestSourceUnknownMaintenanceValueNeverHidesPreemption(t *testing.T) {
	for _, value := range []string{"SHUTDOWN_ON_HOST_MAINTENANCE", "SOME_FUTURE_VALUE", "<html><body>gateway</body></html>", ""} {
		// On the first read, both together.
		s, src, _ := source(t)
		s.Preempt()
		s.SetMaintenanceEvent(value)
		obs, err := src.Next(bounded(t))
		if err != nil || len(obs.Events) != 1 || obs.Events[0].ID != IDPreempted || len(obs.Rejected) != 1 ||
			!strings.Contains(obs.Rejected[0].Error(), PathMaintenanceEvent) {
			t.Errorf("%q with preempted=TRUE, first read: %+v, %v; want the preemption and one rejection", value, obs, err)
		}

		// Through the long polls, one after the other.
		s, src, _ = source(t)
		if obs, err := next(t, s, src); err != nil || len(obs.Events) != 0 {
			t.Fatalf("quiet VM: %+v, %v", obs, err)
		}
		s.SetMaintenanceEvent(value)
		s.Preempt()
		obs, err = next(t, s, src)
		if err != nil || len(obs.Events) != 1 || obs.Events[0].ID != IDPreempted || len(obs.Rejected) != 1 {
			t.Errorf("%q, then preempted=TRUE: %+v, %v; want the preemption and one rejection", value, obs, err)
		}
	}
}

// Issue 11, item 6: a value that cannot be read never ends an event its key
// announced before, and never hides the other key.
func TestSourceKeepsKnownEventsThroughGarbage(t *testing.T) {
	s, src, clk := source(t)
	s.Preempt()
	s.SetMaintenanceEvent(MaintenanceTerminate)
	if obs, err := next(t, s, src); err != nil || len(obs.Events) != 2 {
		t.Fatalf("preempted and terminated: %+v, %v", obs, err)
	}
	clk.Step(5 * time.Second)
	s.AnswerRaw(PathPreempted, []byte("<html>oops</html>"))
	s.SetMaintenanceEvent("SHUTDOWN_ON_HOST_MAINTENANCE")
	obs, err := next(t, s, src)
	kept := map[string]time.Time{}
	for _, e := range obs.Events {
		kept[e.ID] = e.Deadline
	}
	if err != nil || len(obs.Events) != 2 || !kept[IDPreempted].Equal(t0.Add(30*time.Second)) || !kept[IDTerminate].Equal(t0.Add(time.Minute)) || len(obs.Rejected) != 2 {
		t.Fatalf("both keys unreadable: %+v, %v; want both events as last read, and two rejections", obs, err)
	}
	s.AnswerRaw(PathPreempted, []byte(PreemptedTrue))
	e := only(t)(func() (maintenance.Observation, error) {
		s.SetMaintenanceEvent(MaintenanceNone)
		return next(t, s, src)
	}())
	if e.ID != IDPreempted || !e.Deadline.Equal(t0.Add(30*time.Second)) {
		t.Errorf("after the garbage cleared: %+v; want the preemption with its first deadline", e)
	}
}

// Issue 11, item 5: each key is long-polled on its own. An answer on one
// key leaves the other's poll held (no new request for it), and each poll
// sends its own key's ETag.
func TestSourcePollsEachKeyOnItsOwn(t *testing.T) {
	s, src, _ := source(t)
	if _, err := next(t, s, src); err != nil {
		t.Fatal(err)
	}
	if p, m := s.Requests(PathPreempted), s.Requests(PathMaintenanceEvent); p != 2 || m != 2 {
		t.Fatalf("%d and %d requests; want a read and a held long poll for each key", p, m)
	}
	for _, v := range []string{MaintenanceMigrate, MaintenanceNone, MaintenanceTerminate} {
		s.SetMaintenanceEvent(v)
		if _, err := next(t, s, src); err != nil {
			t.Fatal(err)
		}
	}
	if p, m := s.Requests(PathPreempted), s.Requests(PathMaintenanceEvent); p != 2 || m != 5 {
		t.Errorf("after three changes of maintenance-event: %d and %d requests; want preempted's poll left held (2) and one more poll per change (5)", p, m)
	}
	for i := range watched {
		if src.keys[i].answer.ETag == "" || src.keys[0].answer.ETag == src.keys[1].answer.ETag {
			t.Errorf("ETags %q and %q: want each key's own", src.keys[0].answer.ETag, src.keys[1].answer.ETag)
		}
	}
}

// Issue 11, item 5: against a server that answers long polls at once, the
// source backs off instead of sending a thousand requests a second.
func TestSourceBacksOffWhenLongPollsAnswerAtOnce(t *testing.T) {
	s, src, clk := source(t)
	s.IgnoreWaitForChange(true)
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	var mu sync.Mutex
	var latest maintenance.Observation
	go func() {
		for ctx.Err() == nil {
			obs, err := src.Next(ctx)
			if err == nil {
				mu.Lock()
				latest = obs
				mu.Unlock()
			}
		}
	}()
	requests := func() int { return s.Requests(PathPreempted) + s.Requests(PathMaintenanceEvent) }
	preempted := false
	for clk.Since(t0) < 2*time.Minute {
		if n := requests(); n > 200 {
			t.Fatalf("%d requests in %s of the clock; want a backoff", n, clk.Since(t0))
		}
		if !preempted && clk.Since(t0) >= time.Minute {
			s.Preempt()
			preempted = true
		}
		if clk.Waiters() == len(watched) { // both keys wait out a backoff: nothing else is under way
			clk.Step(100 * time.Millisecond)
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
	// Once backed off, each key waits between backoffMax/2 and backoffMax
	// (jitter) between polls: 24 to 48 polls a key in two minutes, plus the
	// ramp up to it. (Without the backoff: about 1,000 a second.)
	least, most := 2*int(2*time.Minute/backoffMax), 2*(int(2*time.Minute/(backoffMax/2))+8)
	if n := requests(); n < least || n > most {
		t.Errorf("%d requests in two minutes; want %d to %d", n, least, most)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		seen := len(latest.Events) == 1 && latest.Events[0].ID == IDPreempted
		mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the preemption was never reported")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	seenAt := latest.Events[0].Deadline.Add(-PreemptNotice) // when the source first saw it
	mu.Unlock()
	if seenAt.Sub(t0) > time.Minute+backoffMax+time.Second {
		t.Errorf("the preemption at 1m was seen at %s; want within the longest backoff", seenAt.Sub(t0))
	}
}

func TestBackoffGrowsWithJitterUpToItsCap(t *testing.T) {
	src := &Source{jitter: jitter}
	for strikes, want := range []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		for range 20 {
			got := src.backoff(strikes)
			if got > want || got < want/2 {
				t.Errorf("backoff after %d strikes: %s; want within [%s, %s]", strikes, got, want/2, want)
			}
		}
	}
}

func TestSourceRetriesAndSurvivesReadFailures(t *testing.T) {
	s, src, clk := source(t)
	s.Preempt()
	s.FailNext(2)
	only(t)(next(t, s, src)) // two 503s are retried away

	s.FailNext(100)
	clk.Step(10 * time.Second)
	only(t)(func() (maintenance.Observation, error) { // the held polls time out unchanged
		clk.Step(src.wait)
		return src.Next(bounded(t))
	}())
	obs, err := src.Next(bounded(t))
	for err == nil { // the other poll's timeout may come first
		obs, err = src.Next(bounded(t))
	}
	if !strings.Contains(err.Error(), "503") || len(obs.Events) != 0 {
		t.Fatalf("metadata server down: %+v, %v; want an error naming the 503, no events", obs, err)
	}
	s.FailNext(0)
	// The failed keys wait out their backoff on the clock, then poll again.
	deadline := time.Now().Add(5 * time.Second)
	for s.Held() < len(watched) {
		if len(src.updates) > 0 {
			_, _ = src.Next(bounded(t))
		}
		if clk.HasWaiters() {
			clk.Step(backoffMax)
		}
		if time.Now().After(deadline) {
			t.Fatal("the source never polled again")
		}
		time.Sleep(time.Millisecond)
	}
	if e := only(t)(nextAfterTimeout(t, s, src, clk)); !e.Deadline.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("after the outage: %+v; want the preemption with its first deadline", e)
	}
}

// Polls end with the ctx they were sent under; the next call sends them
// again and misses nothing.
func TestSourceResumesAfterItsPollsWereCanceled(t *testing.T) {
	s, src, _ := source(t)
	ctx, cancel := context.WithCancel(bounded(t))
	if _, err := src.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.AwaitHeld(bounded(t), len(watched)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.AwaitHeld(bounded(t), 0); err != nil {
		t.Fatalf("the polls outlived their ctx: %v", err)
	}
	// Each canceled poll reports whenever its goroutine gets to it: before
	// this Next, during it, or after it returns. So Next is called without
	// settle, which would take a late report for an answer and wait in Next
	// for a change that never comes; what has to hold whatever the order is
	// that each key is polled again and its change seen.
	s.Preempt()
	if e := only(t)(src.Next(bounded(t))); e.ID != IDPreempted {
		t.Errorf("after the polls were canceled: %+v; want the preemption", e)
	}
	// Both canceled reports are taken in by now: preempted's for the Next
	// above to see its change, maintenance-event's for this one to.
	s.SetMaintenanceEvent(MaintenanceTerminate)
	obs, err := next(t, s, src)
	if err != nil || len(obs.Rejected) != 0 || len(obs.Events) != 2 ||
		!slices.ContainsFunc(obs.Events, func(e maintenance.Event) bool { return e.ID == IDPreempted }) ||
		!slices.ContainsFunc(obs.Events, func(e maintenance.Event) bool { return e.ID == IDTerminate }) {
		t.Errorf("after the polls were canceled: %+v, %v; want the preemption and the maintenance", obs, err)
	}
}
