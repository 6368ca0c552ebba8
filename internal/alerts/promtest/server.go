package promtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// States an alert on /api/v1/alerts is in. Prometheus's third state,
// inactive, is never listed there.
const (
	StatePending = "pending"
	StateFiring  = "firing"
)

// Path is where Prometheus serves its active alerts.
const Path = "/api/v1/alerts"

// Alert is one active alert as Prometheus lists it.
type Alert struct {
	// Labels identify the alert; Prometheus always sets alertname. Leave it
	// out only to show what a server that is not Prometheus might send.
	Labels      map[string]string
	Annotations map[string]string
	// State is StatePending or StateFiring; other values are sent as given.
	State    string
	ActiveAt time.Time
	// KeepFiringSince is sent only when set: Prometheus sets it for a rule
	// with keep_firing_for whose condition has cleared.
	KeepFiringSince time.Time
	Value           float64
}

// Server is a Prometheus that answers GET /api/v1/alerts. Its setters are
// safe to call while a client asks.
type Server struct {
	// URL is the base URL to give a client, as kured's --prometheus-url.
	URL string

	srv  *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	alerts   []Alert
	fault    fault
	requests int
}

// fault is how the server answers instead of listing its alerts.
type fault struct {
	kind      faultKind
	errorType string
	message   string
	body      string
}

type faultKind int

const (
	none faultKind = iota
	errorEnvelope
	unavailable
	malformed
	hang
)

// New starts a server with no alerts; it stops when the test ends.
func New(t testing.TB) *Server {
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a server with no alerts; Close stops it.
func Start() *Server {
	s := &Server{done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server, releasing any request Hang holds.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// SetAlerts replaces the active alerts and ends any fault.
func (s *Server) SetAlerts(alerts ...Alert) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alerts = append([]Alert(nil), alerts...)
	s.fault = fault{}
}

// FailWith makes every answer Prometheus's error envelope with this
// errorType (bad_data, execution, timeout, canceled, internal, not_found,
// not_acceptable, unavailable) and message, under the HTTP status
// Prometheus's API gives that errorType.
func (s *Server) FailWith(errorType, message string) {
	s.setFault(fault{kind: errorEnvelope, errorType: errorType, message: message})
}

// Unavailable makes every answer the plain-text HTTP 503 Prometheus sends
// while it starts or stops.
func (s *Server) Unavailable() {
	s.setFault(fault{kind: unavailable})
}

// Malformed makes every answer HTTP 200, Content-Type application/json,
// with this body as given: broken JSON, a wrong shape, or an oversized one.
func (s *Server) Malformed(body string) {
	s.setFault(fault{kind: malformed, body: body})
}

// Hang makes every request wait, unanswered, until its client gives up or
// the server closes.
func (s *Server) Hang() {
	s.setFault(fault{kind: hang})
}

// Heal ends any fault: the server lists its alerts again.
func (s *Server) Heal() {
	s.setFault(fault{})
}

// Requests is how many requests the server has received, on any path.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) setFault(f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	f, alerts := s.fault, s.alerts
	s.mu.Unlock()

	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, OPTIONS")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	switch f.kind {
	case errorEnvelope:
		writeJSON(w, ErrorStatus(f.errorType), response{Status: "error", ErrorType: f.errorType, Error: f.message})
	case unavailable:
		w.Header().Set("X-Prometheus-Stopping", "false")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("Service Unavailable"))
	case malformed:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(f.body))
	case hang:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	default:
		writeJSON(w, http.StatusOK, response{Status: "success", Data: &alertDiscovery{Alerts: encode(alerts)}})
	}
}

// ErrorStatus is the HTTP status Prometheus's API answers with for an
// errorType (web/api/v1/api.go, respondError); 499 is nginx's "client
// closed request", which Prometheus borrows for a cancelled query.
func ErrorStatus(errorType string) int {
	switch errorType {
	case "bad_data":
		return http.StatusBadRequest
	case "execution":
		return http.StatusUnprocessableEntity
	case "canceled":
		return 499
	case "timeout":
		return http.StatusServiceUnavailable
	case "not_found":
		return http.StatusNotFound
	case "not_acceptable":
		return http.StatusNotAcceptable
	default: // internal, unavailable and anything else
		return http.StatusInternalServerError
	}
}

// response is Prometheus's envelope, field for field.
type response struct {
	Status    string          `json:"status"`
	Data      *alertDiscovery `json:"data,omitempty"`
	ErrorType string          `json:"errorType,omitempty"`
	Error     string          `json:"error,omitempty"`
}

type alertDiscovery struct {
	Alerts []apiAlert `json:"alerts"`
}

// apiAlert is Prometheus's Alert, in its field order.
type apiAlert struct {
	Labels          map[string]string `json:"labels"`
	Annotations     map[string]string `json:"annotations"`
	State           string            `json:"state"`
	ActiveAt        *time.Time        `json:"activeAt,omitempty"`
	KeepFiringSince *time.Time        `json:"keepFiringSince,omitempty"`
	Value           string            `json:"value"`
}

func encode(alerts []Alert) []apiAlert {
	out := make([]apiAlert, 0, len(alerts)) // never null: Prometheus sends []
	for _, a := range alerts {
		activeAt := a.ActiveAt
		e := apiAlert{
			Labels:      orEmpty(a.Labels),
			Annotations: orEmpty(a.Annotations),
			State:       a.State,
			ActiveAt:    &activeAt,
			Value:       strconv.FormatFloat(a.Value, 'e', -1, 64),
		}
		if !a.KeepFiringSince.IsZero() {
			since := a.KeepFiringSince
			e.KeepFiringSince = &since
		}
		out = append(out, e)
	}
	return out
}

// orEmpty sends a missing label set as {}, as Prometheus's labels do.
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
