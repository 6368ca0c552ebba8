package top

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Link is the connection to the API server as the watches' own requests
// find it. A reflector retries a refused watch by itself and tells no one
// (client-go's reflector backs off and tries again on "connection
// refused"), so a screen that waited for the watches' errors would show a
// dead server's data as live; Link sees every request the informers make,
// and makes none of its own.
type Link struct {
	clk clock.PassiveClock

	mu        sync.Mutex
	lostSince *time.Time
	lostErr   string
	onChange  func()
}

// NewLink returns a live link.
func NewLink(clk clock.PassiveClock) *Link { return &Link{clk: clk} }

// Wrap observes the requests of a transport (rest.Config.Wrap).
func (l *Link) Wrap(rt http.RoundTripper) http.RoundTripper { return observed{rt: rt, link: l} }

// State is when the link was lost and why; nil while it is live.
func (l *Link) State() (lostSince *time.Time, err string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostSince == nil {
		return nil, ""
	}
	at := *l.lostSince
	return &at, l.lostErr
}

// failed notes a request that did not reach the server.
func (l *Link) failed(err error) {
	l.mu.Lock()
	changed := l.lostSince == nil
	if changed {
		at := l.clk.Now()
		l.lostSince = &at
	}
	l.lostErr = err.Error()
	f := l.onChange
	l.mu.Unlock()
	if changed && f != nil {
		f()
	}
}

// answered notes that the server answered.
func (l *Link) answered() {
	l.mu.Lock()
	changed := l.lostSince != nil
	l.lostSince, l.lostErr = nil, ""
	f := l.onChange
	l.mu.Unlock()
	if changed && f != nil {
		f()
	}
}

func (l *Link) notify(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onChange = f
}

type observed struct {
	rt   http.RoundTripper
	link *Link
}

func (o observed) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.rt.RoundTrip(req)
	switch {
	case err != nil && req.Context().Err() == nil:
		// A request its caller canceled (a watch stopped on quit) says
		// nothing of the server.
		o.link.failed(err)
	case err == nil && resp.StatusCode < http.StatusInternalServerError:
		o.link.answered()
	case err == nil:
		o.link.failed(&statusError{resp.Status})
	}
	return resp, err
}

type statusError struct{ status string }

func (e *statusError) Error() string { return "the API server answered " + e.status }
