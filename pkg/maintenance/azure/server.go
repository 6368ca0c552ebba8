package azure

import (
	"encoding/json"
	"net/http"
	"sync"
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
// or any answer at all (AnswerRaw).
type Server struct {
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

// ServeHTTP implements the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	case s.failNext > 0:
		s.failNext--
		writeError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if s.rawAnswer != nil {
			_, _ = w.Write(s.rawAnswer)
			return
		}
		_ = json.NewEncoder(w).Encode(s.answerLocked())
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
// layout, then the raw entries.
func (s *Server) answerLocked() any {
	events := make([]json.RawMessage, 0, len(s.doc.Events)+len(s.rawEvents))
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
	return struct {
		DocumentIncarnation int               `json:"DocumentIncarnation"`
		Events              []json.RawMessage `json:"Events"`
	}{s.doc.DocumentIncarnation, events}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
