package aws

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Server emulates one instance's metadata service, with tokens required
// (HttpTokens=required), as documented: PUT TokenPath with a TTL of 1 to
// 21600 seconds returns a token (400 without a valid TTL, 403 with
// X-Forwarded-For or on any other path); every GET or HEAD needs a live token
// (401 otherwise); documents that are not there answer 404; every answer is
// text/plain. Token lifetimes run on the server's own clock, so a test can
// expire them. It is safe for concurrent use.
//
// The faults every emulator plays alike can be turned on (SetFault): slow
// answers, 500s, documents cut in the middle, events missing from some
// answers.
type Server struct {
	clk    clock.Clock
	faults maintenance.Faults

	mu           sync.Mutex
	tokens       map[string]time.Time // token → expiry
	issued       int
	unauthorized int
	spot         *SpotAction
	scheduled    []ScheduledEvent
	history      []ScheduledEvent
	rebalance    *RebalanceRecommendation
	lifecycle    string
	failNext     int               // answer this many requests with 500, to exercise retries
	raw          map[string][]byte // path → body sent instead of the document (hostile-input tests)
}

// NewServer returns an emulator with no events, whose tokens age on clk (the
// real clock when nil).
func NewServer(clk clock.Clock) *Server {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Server{clk: clk, tokens: map[string]time.Time{}, raw: map[string][]byte{}}
}

// Spot marks the instance for a Spot interruption: action (hibernate, stop
// or terminate) happens at at, normally two minutes from the notice.
func (s *Server) Spot(action string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spot = &SpotAction{Action: action, Time: at.UTC().Format(time.RFC3339)}
}

// ClearSpot withdraws the Spot notice, as when the instance is started again.
func (s *Server) ClearSpot() { s.mu.Lock(); s.spot = nil; s.mu.Unlock() }

// ScheduleMaintenance lists e among the active scheduled events (State active
// when empty), replacing an event with the same EventId.
func (s *Server) ScheduleMaintenance(e ScheduledEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.State == "" {
		e.State = StateActive
	}
	for i := range s.scheduled {
		if s.scheduled[i].EventID == e.EventID {
			s.scheduled[i] = e
			return
		}
	}
	s.scheduled = append(s.scheduled, e)
}

// SetMaintenanceState moves an active event to state. A canceled or completed
// event leaves the scheduled list for the history, its Description prefixed
// "[Canceled] " or "[Completed] ", as AWS does. It reports false when no
// active event has that ID or state is not active, canceled or completed.
func (s *Server) SetMaintenanceState(id, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := map[string]string{StateCanceled: "[Canceled] ", StateCompleted: "[Completed] ", StateActive: ""}
	p, known := prefix[state]
	if !known {
		return false
	}
	for i, e := range s.scheduled {
		if e.EventID != id {
			continue
		}
		if state == StateActive {
			return true
		}
		e.State, e.Description = state, p+e.Description
		s.scheduled = append(s.scheduled[:i], s.scheduled[i+1:]...)
		s.history = append(s.history, e)
		return true
	}
	return false
}

// Rebalance emits the rebalance recommendation at at.
func (s *Server) Rebalance(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebalance = &RebalanceRecommendation{NoticeTime: at.UTC().Format(time.RFC3339)}
}

// ClearRebalance withdraws the rebalance recommendation.
func (s *Server) ClearRebalance() { s.mu.Lock(); s.rebalance = nil; s.mu.Unlock() }

// SetLifecycleState sets the Auto Scaling target lifecycle state; empty means
// there is none, and the document answers 404.
func (s *Server) SetLifecycleState(state string) { s.mu.Lock(); s.lifecycle = state; s.mu.Unlock() }

// FailNext makes the next n requests, of any kind, answer 500.
func (s *Server) FailNext(n int) { s.mu.Lock(); s.failNext = n; s.mu.Unlock() }

// AnswerRaw makes GETs of path answer body with 200 instead of the document;
// a nil body restores the document.
func (s *Server) AnswerRaw(path string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body == nil {
		delete(s.raw, path)
		return
	}
	s.raw[path] = body
}

// SetFault makes the server misbehave from now on, as f says; a zero Fault
// ends the misbehaviour. Every request counts as one answer: FaultSlow and
// FaultServerError (500) apply to token PUTs and GETs alike, FaultTruncated to
// each document answered 200, and FaultFlap to each document that announces
// something (the Spot notice and its termination time, a non-empty scheduled
// list, the rebalance recommendation, a Terminated lifecycle state), which
// then answers 404 (the scheduled list: []).
func (s *Server) SetFault(f maintenance.Fault) { s.faults.Set(f) }

// Fault is the current fault, with the answers it has left to spoil.
func (s *Server) Fault() maintenance.Fault { return s.faults.Get() }

// TokensIssued counts the tokens handed out so far.
func (s *Server) TokensIssued() int { s.mu.Lock(); defer s.mu.Unlock(); return s.issued }

// Unauthorized counts the GETs refused with 401 so far.
func (s *Server) Unauthorized() int { s.mu.Lock(); defer s.mu.Unlock(); return s.unauthorized }

// ServeHTTP implements the service.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.faults.Play(maintenance.FaultSlow); ok {
		f.Hold(r.Context())
	}
	if _, ok := s.faults.Play(maintenance.FaultServerError); ok {
		writeError(w, http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext > 0 {
		s.failNext--
		writeError(w, http.StatusInternalServerError)
		return
	}
	switch r.Method {
	case http.MethodPut:
		s.issueToken(w, r)
	case http.MethodGet, http.MethodHead:
		s.serveDocument(w, r)
	default:
		writeError(w, http.StatusMethodNotAllowed)
	}
}

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != TokenPath || r.Header.Get("X-Forwarded-For") != "" {
		writeError(w, http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(TokenTTLHeader))
	if err != nil || ttl < 1 || time.Duration(ttl)*time.Second > MaxTokenTTL {
		writeError(w, http.StatusBadRequest)
		return
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		writeError(w, http.StatusInternalServerError)
		return
	}
	now := s.clk.Now()
	for t, expiry := range s.tokens {
		if !now.Before(expiry) {
			delete(s.tokens, t)
		}
	}
	token := base64.RawURLEncoding.EncodeToString(key)
	s.tokens[token] = now.Add(time.Duration(ttl) * time.Second)
	s.issued++
	w.Header().Set(TokenTTLHeader, strconv.Itoa(ttl))
	writeText(w, []byte(token))
}

func (s *Server) serveDocument(w http.ResponseWriter, r *http.Request) {
	token := r.Header.Get(TokenHeader)
	if expiry, ok := s.tokens[token]; !ok || !s.clk.Now().Before(expiry) {
		delete(s.tokens, token)
		s.unauthorized++
		writeError(w, http.StatusUnauthorized)
		return
	}
	if body, ok := s.raw[r.URL.Path]; ok {
		s.writeDocument(w, body)
		return
	}
	spot, scheduled, rebalance, lifecycle := s.spot, s.scheduled, s.rebalance, s.lifecycle
	if s.announces(r.URL.Path) {
		if _, hide := s.faults.Play(maintenance.FaultFlap); hide {
			spot, scheduled, rebalance, lifecycle = nil, nil, nil, ""
		}
	}
	var doc any
	switch r.URL.Path {
	case SpotActionPath:
		if spot != nil {
			doc = spot
		}
	case SpotTerminationTimePath:
		// Kept by AWS for backward compatibility: present only for terminate.
		if spot != nil && spot.Action == SpotTerminate {
			s.writeDocument(w, []byte(spot.Time))
			return
		}
	case ScheduledPath:
		doc = nonNil(scheduled)
	case HistoryPath:
		doc = nonNil(s.history)
	case RebalancePath:
		if rebalance != nil {
			doc = rebalance
		}
	case LifecyclePath:
		if lifecycle != "" {
			s.writeDocument(w, []byte(lifecycle))
			return
		}
	}
	if doc == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		writeError(w, http.StatusInternalServerError)
		return
	}
	s.writeDocument(w, body)
}

// announces reports whether the document at path announces something now.
func (s *Server) announces(path string) bool {
	switch path {
	case SpotActionPath:
		return s.spot != nil
	case SpotTerminationTimePath:
		return s.spot != nil && s.spot.Action == SpotTerminate
	case ScheduledPath:
		return len(s.scheduled) > 0
	case RebalancePath:
		return s.rebalance != nil
	case LifecyclePath:
		_, leaving, _ := LifecycleEvent(s.lifecycle)
		return leaving
	}
	return false
}

// writeDocument answers a document with 200, cut in the middle while a
// FaultTruncated lasts.
func (s *Server) writeDocument(w http.ResponseWriter, body []byte) {
	if _, ok := s.faults.Play(maintenance.FaultTruncated); ok {
		body = maintenance.Truncate(body)
	}
	writeText(w, body)
}

// nonNil makes an empty list encode as [], which is what the service answers.
func nonNil(events []ScheduledEvent) []ScheduledEvent {
	if events == nil {
		return []ScheduledEvent{}
	}
	return events
}

func writeText(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeError answers code with the documented phrase ("401 - Unauthorized")
// in the small HTML page the service sends.
func writeError(w http.ResponseWriter, code int) {
	phrase := http.StatusText(code)
	if code == http.StatusBadRequest {
		phrase = "Missing or Invalid Parameters"
	}
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(code)
	title := fmt.Sprintf("%d - %s", code, phrase)
	_, _ = fmt.Fprintf(w, "<html><head><title>%s</title></head><body><h1>%s</h1></body></html>\n", title, title)
}
