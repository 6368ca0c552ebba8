package gcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Server emulates the two keys of one VM's metadata server as documented:
//
//   - It answers GET only, under BasePath, and only for PathPreempted and
//     PathMaintenanceEvent (404 for any other key).
//   - A request without "Metadata-Flavor: Google", or with X-Forwarded-For,
//     is refused with 403, whatever its path.
//   - Every answer carries "Metadata-Flavor: Google"; a value's answer also
//     carries its ETag, which depends only on the value (setting a value back
//     brings its old ETag back, as on Compute Engine).
//   - ?wait_for_change=true answers at once if last_etag is given and is not
//     the current ETag; otherwise it holds the request until the value
//     changes (and answers the new value), timeout_sec passes (and answers
//     the unchanged value), or the client goes away.
//
// It is safe for concurrent use. Timeouts are read from the clock it was
// given, so a test can step a fake one.
//
// What servers in the field do beyond the documentation can be turned on: a
// server that ignores wait_for_change and answers at once
// (IgnoreWaitForChange, as old metadata servers and emulators without long
// polls do), values Google does not document (SetMaintenanceEvent with any
// value) and garbage (AnswerRaw). So can the faults every emulator plays
// alike (SetFault). Requests counts what reached it.
type Server struct {
	clock  clock.Clock
	faults maintenance.Faults

	mu       sync.Mutex
	values   map[string][]byte
	waiters  map[string]map[chan []byte]struct{}
	failNext int            // answer this many requests with 503, to exercise retries
	held     int            // long polls being held now
	heldSig  chan struct{}  // closed and replaced whenever held changes
	noWait   bool           // answer long polls at once
	requests map[string]int // requests per key
}

// NewServer returns an emulator of a VM with nothing announced
// (preempted FALSE, maintenance-event NONE) that reads time from clk
// (the real clock when nil).
func NewServer(clk clock.Clock) *Server {
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := &Server{clock: clk, waiters: map[string]map[chan []byte]struct{}{}, heldSig: make(chan struct{}), requests: map[string]int{}}
	s.values = initialValues()
	return s
}

func initialValues() map[string][]byte {
	return map[string][]byte{
		PathPreempted:        []byte(PreemptedFalse),
		PathMaintenanceEvent: []byte(MaintenanceNone),
	}
}

// Preempt sets instance/preempted to TRUE, as Compute Engine does when it
// preempts the VM.
func (s *Server) Preempt() { s.set(PathPreempted, []byte(PreemptedTrue)) }

// SetMaintenanceEvent sets instance/maintenance-event, normally to one of
// MaintenanceNone, MaintenanceMigrate or MaintenanceTerminate.
func (s *Server) SetMaintenanceEvent(v string) { s.set(PathMaintenanceEvent, []byte(v)) }

// Reset puts both keys back to FALSE and NONE (the notices are over), drops
// keys added with AnswerRaw and forgets pending failures. Held long polls see
// the change.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = 0
	initial := initialValues()
	for path := range s.values {
		if _, ok := initial[path]; !ok {
			delete(s.values, path)
		}
	}
	for path, v := range initial {
		s.setLocked(path, v)
	}
}

// FailNext makes the next n requests answer 503, as the server may during
// maintenance.
func (s *Server) FailNext(n int) { s.mu.Lock(); s.failNext = n; s.mu.Unlock() }

// AnswerRaw makes path (relative to BasePath or not; a key that does not
// exist yet is added) answer body from now on, whatever it holds
// (malformed-input tests). It counts as a change: held long polls answer it.
func (s *Server) AnswerRaw(path string, body []byte) {
	s.set(strings.TrimPrefix(path, BasePath), append([]byte(nil), body...))
}

// SetFault makes the server misbehave from now on, as f says; a zero Fault
// ends the misbehaviour. Every request that passes the header checks counts
// as one answer: FaultSlow and FaultServerError (503) apply to each,
// FaultTruncated to each value answered, FaultFlap to each answer of a key
// that announces something (preempted TRUE, maintenance-event other than
// NONE), which then answers FALSE or NONE with that value's ETag. While a
// fault is set no long poll is held, and setting one answers the polls being
// held, so the fault is seen at once rather than after timeout_sec.
func (s *Server) SetFault(f maintenance.Fault) {
	s.faults.Set(f)
	if f.Kind == maintenance.FaultNone {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for path, waiters := range s.waiters {
		for ch := range waiters {
			ch <- s.values[path] // buffered, and each waiter is sent to once
			delete(waiters, ch)
		}
	}
}

// Fault is the current fault, with the answers it has left to spoil.
func (s *Server) Fault() maintenance.Fault { return s.faults.Get() }

// IgnoreWaitForChange makes the server answer every long poll at once with
// the current value, as a server without wait_for_change does.
func (s *Server) IgnoreWaitForChange(ignore bool) { s.mu.Lock(); s.noWait = ignore; s.mu.Unlock() }

// Requests counts the requests for path (relative to BasePath) that got
// past the header checks so far, 503s included.
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[strings.TrimPrefix(path, BasePath)]
}

// Held is the number of long polls being held now.
func (s *Server) Held() int { s.mu.Lock(); defer s.mu.Unlock(); return s.held }

// AwaitHeld returns once exactly n long polls are being held, so a test can
// tell a held request from one not yet arrived without sleeping.
func (s *Server) AwaitHeld(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		held, sig := s.held, s.heldSig
		s.mu.Unlock()
		if held == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sig:
		}
	}
}

// ServeHTTP implements the metadata server.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(FlavorHeader, Flavor)
	w.Header().Set("Server", "Metadata Server for VM")
	path, known := strings.CutPrefix(r.URL.Path, BasePath)
	switch {
	case r.Header.Get(FlavorHeader) != Flavor:
		writeError(w, http.StatusForbidden, "Missing required header: Metadata-Flavor: Google")
		return
	case len(r.Header.Values("X-Forwarded-For")) > 0:
		writeError(w, http.StatusForbidden, "Requests with X-Forwarded-For are refused")
		return
	}
	s.mu.Lock()
	s.requests[path]++
	if s.failNext > 0 {
		s.failNext--
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	}
	value, ok := s.values[path]
	noWait := s.noWait
	s.mu.Unlock()
	switch {
	case !known || !ok:
		writeError(w, http.StatusNotFound, "Not Found")
		return
	case r.Method != http.MethodGet:
		writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	q := r.URL.Query()
	if q.Get("wait_for_change") != "true" || noWait {
		s.answer(w, r, path, value)
		return
	}
	var timeout time.Duration
	if raw := q.Get("timeout_sec"); raw != "" {
		secs, err := strconv.Atoi(raw)
		if err != nil || secs < 1 {
			writeError(w, http.StatusBadRequest, "timeout_sec must be a positive number of seconds")
			return
		}
		timeout = time.Duration(secs) * time.Second
	}
	if v, ok := s.wait(r.Context(), path, q.Get("last_etag"), timeout); ok {
		s.answer(w, r, path, v)
	}
}

// answer sends path's value as the current fault says.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, path string, value []byte) {
	if f, ok := s.faults.Play(maintenance.FaultSlow); ok {
		f.Hold(r.Context())
	}
	if _, ok := s.faults.Play(maintenance.FaultServerError); ok {
		writeError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	}
	if quiet, ok := initialValues()[path]; ok && string(value) != string(quiet) {
		if _, hide := s.faults.Play(maintenance.FaultFlap); hide {
			value = quiet
		}
	}
	tag := etag(value)
	if _, ok := s.faults.Play(maintenance.FaultTruncated); ok {
		value = maintenance.Truncate(value)
	}
	writeValue(w, value, tag)
}

// wait holds a long poll; ok is false when the client went away.
func (s *Server) wait(ctx context.Context, path, lastETag string, timeout time.Duration) (value []byte, ok bool) {
	// The timer starts before the poll counts as held, so a test that saw it
	// held and then steps a fake clock always moves this timer.
	var expired <-chan time.Time
	if timeout > 0 {
		t := s.clock.NewTimer(timeout)
		defer t.Stop()
		expired = t.C()
	}
	s.mu.Lock()
	current := s.values[path]
	if (lastETag != "" && lastETag != etag(current)) || s.faults.Get().Kind != maintenance.FaultNone {
		s.mu.Unlock()
		return current, true
	}
	changed := make(chan []byte, 1)
	if s.waiters[path] == nil {
		s.waiters[path] = map[chan []byte]struct{}{}
	}
	s.waiters[path][changed] = struct{}{}
	s.setHeldLocked(s.held + 1)
	s.mu.Unlock()

	select {
	case value = <-changed:
		ok = true
	case <-expired:
		ok = true
	case <-ctx.Done():
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters[path], changed)
	select {
	case value = <-changed: // a change that raced the timeout wins
	default:
		if value == nil {
			value = s.values[path]
		}
	}
	s.setHeldLocked(s.held - 1)
	return value, ok
}

func (s *Server) set(path string, v []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(path, v)
}

// setLocked stores v and hands it to every long poll held on path.
func (s *Server) setLocked(path string, v []byte) {
	if string(s.values[path]) == string(v) {
		return // no change, no new ETag: held polls stay held
	}
	s.values[path] = v
	for ch := range s.waiters[path] {
		ch <- v // buffered, and each waiter is sent to once
		delete(s.waiters[path], ch)
	}
}

func (s *Server) setHeldLocked(n int) {
	s.held = n
	close(s.heldSig)
	s.heldSig = make(chan struct{})
}

// etag names a value the way the server's 16 hex digits do: by content.
func etag(v []byte) string {
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:8])
}

// writeValue answers v with its ETag (a truncated v keeps the whole value's).
func writeValue(w http.ResponseWriter, v []byte, tag string) {
	w.Header().Set("Content-Type", "application/text")
	w.Header().Set("ETag", tag)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><body><p>" + strconv.Itoa(code) + " " + msg + "</p></body></html>\n"))
}
