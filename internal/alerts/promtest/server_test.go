package promtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/alerts/promtest"
)

// get asks the server and returns the status, Content-Type and body.
func get(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}

// TestDocumentedExample serves the alert of the example under "Alerts" in
// https://prometheus.io/docs/prometheus/latest/querying/api/ and expects
// that example's body, field for field.
func TestDocumentedExample(t *testing.T) {
	s := promtest.New(t)
	s.SetAlerts(promtest.Alert{
		Labels:   map[string]string{"alertname": "my-alert"},
		State:    promtest.StateFiring,
		ActiveAt: time.Date(2018, time.July, 4, 20, 27, 12, 606021440, time.FixedZone("", 2*60*60)),
		Value:    1,
	})
	status, ctype, body := get(t, http.MethodGet, s.URL+"/api/v1/alerts")
	if status != http.StatusOK || ctype != "application/json" {
		t.Errorf("HTTP %d %q, want 200 application/json", status, ctype)
	}
	jsonEqual(t, body, `{
		"data": {
			"alerts": [
				{
					"activeAt": "2018-07-04T20:27:12.60602144+02:00",
					"annotations": {},
					"labels": {"alertname": "my-alert"},
					"state": "firing",
					"value": "1e+00"
				}
			]
		},
		"status": "success"
	}`)
}

func TestAnswers(t *testing.T) {
	activeAt := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		set        func(*promtest.Server)
		method     string
		path       string
		wantStatus int
		wantJSON   string // compared as JSON when set
		wantBody   string // compared as text when wantJSON is empty
	}{
		{
			name:       "no alerts is an empty list, not null",
			set:        func(*promtest.Server) {},
			wantStatus: http.StatusOK,
			wantJSON:   `{"status":"success","data":{"alerts":[]}}`,
		},
		{
			name: "keepFiringSince only when set, annotations and labels as given",
			set: func(s *promtest.Server) {
				s.SetAlerts(
					promtest.Alert{Labels: map[string]string{"alertname": "A", "severity": "page"},
						Annotations: map[string]string{"summary": "s"}, State: promtest.StatePending, ActiveAt: activeAt, Value: 0.5},
					promtest.Alert{Labels: map[string]string{"alertname": "B"}, State: promtest.StateFiring,
						ActiveAt: activeAt, KeepFiringSince: activeAt.Add(time.Minute), Value: 2},
				)
			},
			wantStatus: http.StatusOK,
			wantJSON: `{"status":"success","data":{"alerts":[
				{"labels":{"alertname":"A","severity":"page"},"annotations":{"summary":"s"},"state":"pending",
				 "activeAt":"2026-03-01T12:00:00Z","value":"5e-01"},
				{"labels":{"alertname":"B"},"annotations":{},"state":"firing","activeAt":"2026-03-01T12:00:00Z",
				 "keepFiringSince":"2026-03-01T12:01:00Z","value":"2e+00"}]}}`,
		},
		{
			name:       "error envelope under the errorType's status",
			set:        func(s *promtest.Server) { s.FailWith("execution", "boom") },
			wantStatus: http.StatusUnprocessableEntity,
			wantJSON:   `{"status":"error","errorType":"execution","error":"boom"}`,
		},
		{
			name:       "not ready",
			set:        (*promtest.Server).Unavailable,
			wantStatus: http.StatusServiceUnavailable,
			wantBody:   "Service Unavailable",
		},
		{
			name:       "malformed body as given",
			set:        func(s *promtest.Server) { s.Malformed(`{"status":`) },
			wantStatus: http.StatusOK,
			wantBody:   `{"status":`,
		},
		{
			name: "SetAlerts ends a fault",
			set: func(s *promtest.Server) {
				s.Unavailable()
				s.SetAlerts()
			},
			wantStatus: http.StatusOK,
			wantJSON:   `{"status":"success","data":{"alerts":[]}}`,
		},
		{
			name: "Heal ends a fault and keeps the alerts",
			set: func(s *promtest.Server) {
				s.SetAlerts(promtest.Alert{Labels: map[string]string{"alertname": "A"}, State: promtest.StateFiring, ActiveAt: activeAt, Value: 1})
				s.FailWith("internal", "x")
				s.Heal()
			},
			wantStatus: http.StatusOK,
			wantJSON: `{"status":"success","data":{"alerts":[{"labels":{"alertname":"A"},"annotations":{},"state":"firing",
				"activeAt":"2026-03-01T12:00:00Z","value":"1e+00"}]}}`,
		},
		{
			name:       "only GET",
			set:        func(*promtest.Server) {},
			method:     http.MethodPost,
			wantStatus: http.StatusMethodNotAllowed,
			wantBody:   "Method Not Allowed",
		},
		{
			name:       "only /api/v1/alerts",
			set:        func(*promtest.Server) {},
			path:       "/api/v1/rules",
			wantStatus: http.StatusNotFound,
			wantBody:   "404 page not found",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := promtest.New(t)
			tc.set(s)
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodGet
			}
			if path == "" {
				path = promtest.Path
			}
			status, _, body := get(t, method, s.URL+path)
			if status != tc.wantStatus {
				t.Errorf("HTTP %d, want %d", status, tc.wantStatus)
			}
			if tc.wantJSON != "" {
				jsonEqual(t, body, tc.wantJSON)
			} else if strings.TrimSpace(body) != tc.wantBody {
				t.Errorf("body %q, want %q", body, tc.wantBody)
			}
		})
	}
}

// TestErrorStatus checks the mapping against Prometheus's respondError in
// web/api/v1/api.go.
func TestErrorStatus(t *testing.T) {
	for errorType, want := range map[string]int{
		"bad_data": 400, "execution": 422, "canceled": 499, "timeout": 503, "internal": 500,
		"not_found": 404, "not_acceptable": 406, "unavailable": 500,
	} {
		if got := promtest.ErrorStatus(errorType); got != want {
			t.Errorf("ErrorStatus(%q) = %d, want %d", errorType, got, want)
		}
	}
}

func TestRequestsCountsEveryRequest(t *testing.T) {
	s := promtest.New(t)
	get(t, http.MethodGet, s.URL+promtest.Path)
	s.Unavailable()
	get(t, http.MethodGet, s.URL+promtest.Path)
	get(t, http.MethodGet, s.URL+"/elsewhere")
	if got := s.Requests(); got != 3 {
		t.Errorf("Requests() = %d, want 3", got)
	}
}

func TestHangWaitsForTheClient(t *testing.T) {
	s := promtest.New(t)
	s.Hang()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+promtest.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("answered HTTP %d, want no answer", resp.StatusCode)
	}
}
