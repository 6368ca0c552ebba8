package alerts_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/alerts"
	"github.com/sluice-dev/sluice/internal/alerts/promtest"
)

var activeAt = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

func alert(name, state string) promtest.Alert {
	return promtest.Alert{Labels: map[string]string{"alertname": name, "severity": "warning"}, State: state, ActiveAt: activeAt, Value: 1}
}

func firing(name string) promtest.Alert  { return alert(name, promtest.StateFiring) }
func pending(name string) promtest.Alert { return alert(name, promtest.StatePending) }

// kured's own test alerts (pkg/blockers/prometheus_test.go): four firing,
// one pending.
var kuredAlerts = []promtest.Alert{
	firing("GatekeeperViolations"), firing("PodCrashing-dev"), firing("PodRestart-dev"),
	firing("PrometheusTargetDown"), pending("ScheduledRebootFailing"),
}

func TestBlocking(t *testing.T) {
	noName := promtest.Alert{Labels: map[string]string{"severity": "page"}, State: promtest.StateFiring, ActiveAt: activeAt, Value: 1}
	emptyName := promtest.Alert{Labels: map[string]string{"alertname": ""}, State: promtest.StateFiring, ActiveAt: activeAt, Value: 1}
	for _, tc := range []struct {
		name       string
		alerts     []promtest.Alert
		filter     *regexp.Regexp
		matchOnly  bool
		firingOnly bool
		want       []string
	}{
		{name: "no alerts, nothing blocks", want: nil},
		{name: "a firing alert blocks", alerts: []promtest.Alert{firing("A")}, want: []string{"A"}},
		{name: "a pending alert blocks by default", alerts: []promtest.Alert{pending("A")}, want: []string{"A"}},
		{name: "firing only: pending passes, firing blocks", alerts: []promtest.Alert{pending("A"), firing("B")},
			firingOnly: true, want: []string{"B"}},
		{name: "an inactive alert does not block", alerts: []promtest.Alert{alert("A", "inactive")}, want: nil},
		{name: "every active alert without a filter (kured: 5)", alerts: kuredAlerts,
			want: []string{"GatekeeperViolations", "PodCrashing-dev", "PodRestart-dev", "PrometheusTargetDown", "ScheduledRebootFailing"}},
		{name: "firing only (kured: 4)", alerts: kuredAlerts, firingOnly: true,
			want: []string{"GatekeeperViolations", "PodCrashing-dev", "PodRestart-dev", "PrometheusTargetDown"}},
		{name: "filter ignores what it matches, unanchored (kured: Pod leaves 3)", alerts: kuredAlerts, filter: regexp.MustCompile("Pod"),
			want: []string{"GatekeeperViolations", "PrometheusTargetDown", "ScheduledRebootFailing"}},
		{name: "match only counts only what it matches (kured: Gatekeeper leaves 1)", alerts: kuredAlerts, filter: regexp.MustCompile("Gatekeeper"),
			matchOnly: true, want: []string{"GatekeeperViolations"}},
		{name: "match only without a filter counts everything, as kured", alerts: []promtest.Alert{firing("A"), pending("B")},
			matchOnly: true, want: []string{"A", "B"}},
		{name: "an empty filter matches every name, so nothing blocks (kured)", alerts: kuredAlerts, filter: regexp.MustCompile(""), want: nil},
		{name: "anchored filter for kured's RebootRequired deadlock advice",
			alerts: []promtest.Alert{firing("RebootRequired"), firing("RebootRequiredSoon")}, filter: regexp.MustCompile("^RebootRequired$"),
			want: []string{"RebootRequiredSoon"}},
		{name: "match only and firing only together", alerts: []promtest.Alert{pending("NodeDown"), firing("NodeDownZone"), firing("Other")},
			filter: regexp.MustCompile("^NodeDown"), matchOnly: true, firingOnly: true, want: []string{"NodeDownZone"}},
		{name: "sorted, each name once", alerts: []promtest.Alert{firing("B"), pending("A"), firing("B"), firing("A")},
			want: []string{"A", "B"}},
		{name: "no alertname label blocks under a placeholder", alerts: []promtest.Alert{noName},
			want: []string{alerts.MissingAlertName}},
		{name: "an empty alertname too", alerts: []promtest.Alert{emptyName, firing("A")},
			want: []string{alerts.MissingAlertName, "A"}},
		{name: "the filter cannot drop a nameless alert", alerts: []promtest.Alert{noName, firing("A")}, filter: regexp.MustCompile(".*"),
			want: []string{alerts.MissingAlertName}},
		{name: "nor can match only", alerts: []promtest.Alert{noName, firing("A")}, filter: regexp.MustCompile("^B$"), matchOnly: true,
			want: []string{alerts.MissingAlertName}},
		{name: "a nameless pending alert passes under firing only",
			alerts: []promtest.Alert{{Labels: map[string]string{}, State: promtest.StatePending, ActiveAt: activeAt}}, firingOnly: true,
			want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := promtest.New(t)
			s.SetAlerts(tc.alerts...)
			c := &alerts.Checker{URL: s.URL, Filter: tc.filter, MatchOnly: tc.matchOnly, FiringOnly: tc.firingOnly}
			got, err := c.Blocking(context.Background())
			if err != nil {
				t.Fatalf("Blocking: %v", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Blocking = %q, want %q", got, tc.want)
			}
			if n := s.Requests(); n != 1 {
				t.Errorf("asked Prometheus %d times, want once", n)
			}
		})
	}
}

// TestBlockingFailsClosed: every way of not knowing is an error, and never
// a list.
func TestBlockingFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*promtest.Server)
		want []string // each in the error text
	}{
		{name: "not ready: HTTP 503", set: (*promtest.Server).Unavailable,
			want: []string{"HTTP 503 Service Unavailable", `"Service Unavailable"`}},
		{name: "error envelope", set: func(s *promtest.Server) { s.FailWith("execution", "expanding series: too many") },
			want: []string{"HTTP 422", "execution: expanding series: too many"}},
		{name: "error envelope under 200", set: func(s *promtest.Server) {
			s.Malformed(`{"status":"error","errorType":"internal","error":"rule manager stopped"}`)
		}, want: []string{"status error: internal: rule manager stopped"}},
		{name: "malformed JSON", set: func(s *promtest.Server) { s.Malformed(`{"status":"success","data":{"alerts":[`) },
			want: []string{"not the JSON Prometheus documents", "unexpected end of JSON input"}},
		{name: "an HTML page", set: func(s *promtest.Server) { s.Malformed("<html>login</html>") },
			want: []string{"not the JSON Prometheus documents", `"<html>login</html>"`}},
		{name: "empty body", set: func(s *promtest.Server) { s.Malformed("") },
			want: []string{"not the JSON Prometheus documents", "empty body"}},
		{name: "JSON null", set: func(s *promtest.Server) { s.Malformed("null") },
			want: []string{`status "", want "success"`}},
		{name: "unknown status", set: func(s *promtest.Server) { s.Malformed(`{"status":"ok","data":{"alerts":[]}}`) },
			want: []string{`status "ok", want "success"`}},
		{name: "no data", set: func(s *promtest.Server) { s.Malformed(`{"status":"success"}`) },
			want: []string{"no data.alerts list"}},
		{name: "data null", set: func(s *promtest.Server) { s.Malformed(`{"status":"success","data":null}`) },
			want: []string{"no data.alerts list"}},
		{name: "data without alerts", set: func(s *promtest.Server) { s.Malformed(`{"status":"success","data":{"groups":[]}}`) },
			want: []string{"no data.alerts list"}},
		{name: "alerts null", set: func(s *promtest.Server) { s.Malformed(`{"status":"success","data":{"alerts":null}}`) },
			want: []string{"no data.alerts list"}},
		{name: "alerts not a list", set: func(s *promtest.Server) { s.Malformed(`{"status":"success","data":{"alerts":{}}}`) },
			want: []string{"not the JSON Prometheus documents"}},
		{name: "a state Prometheus does not have", set: func(s *promtest.Server) { s.SetAlerts(firing("A"), alert("B", "resolved")) },
			want: []string{`alert 1 (B): state "resolved" is none of firing, pending, inactive`}},
		{name: "no state", set: func(s *promtest.Server) {
			s.Malformed(`{"status":"success","data":{"alerts":[{"labels":{"alertname":"A"}}]}}`)
		}, want: []string{`alert 0 (A): state ""`}},
		{name: "larger than 4 MiB", set: func(s *promtest.Server) { s.Malformed(validBody(alerts.MaxResponseBytes + 1)) },
			want: []string{"HTTP 200 answer is larger than 4194304 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := promtest.New(t)
			tc.set(s)
			c := &alerts.Checker{URL: s.URL}
			got, err := c.Blocking(context.Background())
			if err == nil {
				t.Fatalf("Blocking = %q and no error, want an error", got)
			}
			if got != nil {
				t.Errorf("Blocking returned %q beside its error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), s.URL+"/api/v1/alerts") {
				t.Errorf("error %q does not name the URL asked", err)
			}
		})
	}
}

// validBody is a valid answer with no alerts, padded with spaces to n bytes.
func validBody(n int) string {
	const empty = `{"status":"success","data":{"alerts":[]}}`
	return empty + strings.Repeat(" ", n-len(empty))
}

func TestBlockingReadsUpToTheLimit(t *testing.T) {
	s := promtest.New(t)
	s.Malformed(validBody(alerts.MaxResponseBytes))
	got, err := (&alerts.Checker{URL: s.URL}).Blocking(context.Background())
	if err != nil || got != nil {
		t.Errorf("Blocking = %q, %v; want nothing blocking from a body of exactly the limit", got, err)
	}
}

// A proxy in front of Prometheus answers with its own page: the error
// quotes the start of it, not all of it.
func TestBlockingQuotesAProxyPage(t *testing.T) {
	page := "<html><body>" + strings.Repeat("Bad Gateway ", 100) + "</body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, page, http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	_, err := (&alerts.Checker{URL: srv.URL}).Blocking(context.Background())
	if err == nil {
		t.Fatal("no error from HTTP 502")
	}
	if msg := err.Error(); !strings.Contains(msg, "HTTP 502 Bad Gateway") || !strings.Contains(msg, `"<html><body>Bad Gateway`) ||
		!strings.Contains(msg, "…") || len(msg) > 500 {
		t.Errorf("error %q: want the status and a short quote of the page", msg)
	}
}

func TestBlockingGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		client  *http.Client
		wantErr error
	}{
		{name: "at the context's deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, wantErr: context.DeadlineExceeded},
		{name: "when the context is cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, wantErr: context.Canceled},
		{name: "at the given client's timeout", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, client: &http.Client{Timeout: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := promtest.New(t)
			s.Hang()
			ctx, cancel := tc.ctx()
			defer cancel()
			done := make(chan error, 1)
			go func() {
				got, err := (&alerts.Checker{URL: s.URL, Client: tc.client}).Blocking(ctx)
				if got != nil {
					err = errors.Join(err, errors.New("returned a list"))
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("no error from a server that never answered")
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v is not %v", err, tc.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Blocking still waiting after 5s")
			}
		})
	}
}

func TestBlockingUnreachable(t *testing.T) {
	s := promtest.Start()
	s.Close()
	if got, err := (&alerts.Checker{URL: s.URL}).Blocking(context.Background()); err == nil {
		t.Errorf("Blocking = %q from a closed server, want an error", got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // in the error; empty for valid
	}{
		{url: "http://prometheus.monitoring:9090"},
		{url: "https://prometheus.example.com/prom/"},
		{url: "HTTP://prometheus:9090"},
		{url: "", want: "prometheus URL is empty"},
		{url: "prometheus.monitoring:9090", want: `scheme must be http or https (as in http://prometheus.monitoring:9090), not "prometheus.monitoring"`},
		{url: "/api/v1", want: `scheme must be http or https`},
		{url: "ftp://prometheus", want: `not "ftp"`},
		{url: "unix:///run/prometheus.sock", want: `not "unix"`},
		{url: "http://", want: "has no host"},
		{url: "http:///api", want: "has no host"},
		{url: "http://admin:hunter2@prometheus:9090", want: "carries credentials"},
		{url: "http://prometheus:9090/?x=1", want: "no query or fragment"},
		{url: "http://prometheus:9090/#top", want: "no query or fragment"},
		{url: "http://prom etheus:9090", want: "does not parse"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c := &alerts.Checker{URL: tc.url}
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
			if _, berr := c.Blocking(context.Background()); berr == nil || berr.Error() != err.Error() {
				t.Errorf("Blocking error %v, want Validate's %v", berr, err)
			}
		})
	}
}
