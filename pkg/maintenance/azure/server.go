package azure

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Server emulates the Scheduled Events endpoint of one VM's metadata service
// as documented: it answers only at Path, only with the header
// "Metadata: true" and an api-version (400 otherwise), returns the document
// on GET, and on POST marks the events named in StartRequests as Started
// (NotBefore cleared). Every change increments DocumentIncarnation; a
// finished event disappears from the document.
//
// What real VMs send beyond the documentation can be turned on: NotBefore in
// RFC 3339 (SetNotBeforeLayout), entries that do not decode (AddRawEntry),
// or any answer at all (AnswerRaw). So can the faults every emulator plays
// alike (SetFault): slow answers, 500s, a document cut in the middle, events
// missing from some answers.
type Server struct {
	faults maintenance.Faults

	mu        sync.Mutex
	doc       Document
	approved  []string
	failNext  int               // answer this many requests with 500, to exercise retries
	rawAnswer []byte            // when set, sent instead of the document (malformed-input tests)
	rawEvents []json.RawMessage // sent after the events, as entries of the list
	layout    string            // when set, NotBefore is sent in this layout
}

// NewServer returns an emulator with no events.
func NewServer() *Server { return &Server{} }

// Schedule adds an event.
func (s *Server) Schedule(e RawEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc.Events = append(s.doc.Events, e)
	s.doc.DocumentIncarnation++
}

// Finish removes an event, as the platform does when it is over.
func (s *Server) Finish(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.doc.Events {
		if e.EventID == id {
			s.doc.Events = append(s.doc.Events[:i], s.doc.Events[i+1:]...)
			s.doc.DocumentIncarnation++
			return
		}
	}
}

// Move changes a scheduled event's NotBefore, as the platform does when it
// reschedules maintenance (the document's incarnation changes with it).
func (s *Server) Move(id, notBefore string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.doc.Events {
		if s.doc.Events[i].EventID == id {
			s.doc.Events[i].NotBefore = notBefore
			s.doc.DocumentIncarnation++
		}
	}
}

// Start moves an event to Started, as the platform does at NotBefore.
func (s *Server) Start(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.doc.Events {
		if s.doc.Events[i].EventID == id && s.doc.Events[i].EventStatus != "Started" {
			s.doc.Events[i].EventStatus = "Started"
			s.doc.Events[i].NotBefore = ""
			s.doc.DocumentIncarnation++
		}
	}
}

// SetNotBeforeLayout makes the server send every NotBefore in layout (such
// as time.RFC3339, as Microsoft's own mock server and some platform versions
// do) instead of as stored; "" restores the stored text.
func (s *Server) SetNotBeforeLayout(layout string) { s.mu.Lock(); s.layout = layout; s.mu.Unlock() }

// AddRawEntry appends entry, verbatim, to the document's list of events (an
// entry of a shape no documented version sends).
func (s *Server) AddRawEntry(entry []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rawEvents = append(s.rawEvents, append(json.RawMessage(nil), entry...))
	s.doc.DocumentIncarnation++
}

// ClearRawEntries removes the entries AddRawEntry added.
func (s *Server) ClearRawEntries() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rawEvents = nil
	s.doc.DocumentIncarnation++
}

// Approved lists the event IDs approved so far.
func (s *Server) Approved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.approved...)
}

// FailNext makes the next n requests answer 500.
func (s *Server) FailNext(n int) { s.mu.Lock(); s.failNext = n; s.mu.Unlock() }

// AnswerRaw makes every GET answer body instead of the document.
func (s *Server) AnswerRaw(body []byte) { s.mu.Lock(); s.rawAnswer = body; s.mu.Unlock() }

// SetFault makes the server misbehave from now on, as f says; a zero Fault
// ends the misbehaviour. A request that passes the header checks counts as
// one answer: FaultSlow and FaultServerError (500) apply to GET and POST,
// FaultTruncated and FaultFlap (an empty Events list) to the document.
func (s *Server) SetFault(f maintenance.Fault) { s.faults.Set(f) }

// Fault is the current fault, with the answers it has left to spoil.
func (s *Server) Fault() maintenance.Fault { return s.faults.Get() }

// ServeHTTP implements the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path != Path:
		writeError(w, http.StatusNotFound, "Not found")
		return
	case r.Header.Get("Metadata") != "true":
		writeError(w, http.StatusBadRequest, "Bad request. Required metadata header not specified")
		return
	case r.URL.Query().Get("api-version") == "":
		writeError(w, http.StatusBadRequest, "Bad request. api-version was not specified in the request")
		return
	}
	if f, ok := s.faults.Play(maintenance.FaultSlow); ok {
		f.Hold(r.Context())
	}
	if _, ok := s.faults.Play(maintenance.FaultServerError); ok {
		writeError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext > 0 {
		s.failNext--
		writeError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		body := s.rawAnswer
		if body == nil {
			data, _ := json.Marshal(s.answerLocked()) // plain data: cannot fail
			body = append(data, '\n')
		}
		if _, ok := s.faults.Play(maintenance.FaultTruncated); ok {
			body = maintenance.Truncate(body)
		}
		_, _ = w.Write(body)
	case http.MethodPost:
		var req struct {
			StartRequests []struct {
				EventID string `json:"EventId"`
			} `json:"StartRequests"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || len(req.StartRequests) == 0 {
			writeError(w, http.StatusBadRequest, "Bad request. StartRequests is missing or malformed")
			return
		}
		for _, start := range req.StartRequests {
			for i := range s.doc.Events {
				if s.doc.Events[i].EventID == start.EventID && s.doc.Events[i].EventStatus == "Scheduled" {
					s.doc.Events[i].EventStatus = "Started"
					s.doc.Events[i].NotBefore = ""
					s.approved = append(s.approved, start.EventID)
					s.doc.DocumentIncarnation++
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	default:
		writeError(w, http.StatusMethodNotAllowed, "Method not allowed")
	}
}

// answerLocked is the document as sent: its events in the chosen NotBefore
// layout, then the raw entries; none while a FaultFlap hides them.
func (s *Server) answerLocked() any {
	type document struct {
		DocumentIncarnation int               `json:"DocumentIncarnation"`
		Events              []json.RawMessage `json:"Events"`
	}
	events := make([]json.RawMessage, 0, len(s.doc.Events)+len(s.rawEvents))
	if len(s.doc.Events)+len(s.rawEvents) > 0 {
		if _, hide := s.faults.Play(maintenance.FaultFlap); hide {
			return document{s.doc.DocumentIncarnation, events}
		}
	}
	for _, e := range s.doc.Events {
		if s.layout != "" && e.NotBefore != "" {
			if t, err := ParseNotBefore(e.NotBefore); err == nil {
				e.NotBefore = t.Format(s.layout)
			}
		}
		data, _ := json.Marshal(e) // plain data: cannot fail
		events = append(events, data)
	}
	events = append(events, s.rawEvents...)
	return document{s.doc.DocumentIncarnation, events}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
