package maintenance

import (
	"context"
	"sync"
	"time"
)

// FaultKind names a way a metadata service can misbehave.
type FaultKind string

// Fault kinds. Each emulator (the Server of azure/, aws/ and gcp/) plays
// them the same way, so one test can table-drive the three clouds.
const (
	FaultNone FaultKind = ""
	// FaultSlow holds each answer back for Fault.Delay, then answers as
	// usual (if the client still waits).
	FaultSlow FaultKind = "Slow"
	// FaultServerError answers each request with a 5xx: 500 (Azure, AWS),
	// 503 (GCP, as its server answers during maintenance).
	FaultServerError FaultKind = "ServerError"
	// FaultTruncated cuts each answer that would succeed in the middle of its
	// body, and still answers 200 (headers as usual).
	FaultTruncated FaultKind = "Truncated"
	// FaultFlap leaves every event out of each answer that would announce
	// one: the event disappears for Fault.Answers answers, then comes back as
	// it was.
	FaultFlap FaultKind = "Flap"
)

// Fault is a misbehaviour an emulator plays from when it is set (the
// emulators' SetFault).
type Fault struct {
	Kind FaultKind
	// Answers is how many answers the fault spoils before the emulator
	// behaves again; 0 spoils every one until another Fault is set. For
	// FaultFlap only answers that would announce an event count; for
	// FaultTruncated only answers that would succeed.
	Answers int
	// Delay is how long FaultSlow holds each answer. It runs on the real
	// clock, because it races the client's own timeout: make it longer than
	// that timeout to make the client give up.
	Delay time.Duration
}

// Hold waits out f's delay, or until ctx ends (the client went away).
func (f Fault) Hold(ctx context.Context) {
	t := time.NewTimer(f.Delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Truncate is body cut in the middle, as a connection lost mid-answer leaves
// it.
func Truncate(body []byte) []byte { return body[:len(body)/2] }

// Faults holds an emulator's current fault and counts the answers it
// spoils. The zero Faults plays none; it is safe for concurrent use.
type Faults struct {
	mu sync.Mutex
	f  Fault
}

// Set replaces the current fault with f (a zero Fault: none).
func (p *Faults) Set(f Fault) { p.mu.Lock(); p.f = f; p.mu.Unlock() }

// Get is the current fault, with the answers it has left to spoil.
func (p *Faults) Get() Fault { p.mu.Lock(); defer p.mu.Unlock(); return p.f }

// Play reports whether the current fault is of kind and, if so, counts one
// answer spoilt; the fault ends with its last answer.
func (p *Faults) Play(kind FaultKind) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.f
	if kind == FaultNone || f.Kind != kind {
		return Fault{}, false
	}
	if p.f.Answers > 0 {
		if p.f.Answers--; p.f.Answers == 0 {
			p.f = Fault{}
		}
	}
	return f, true
}
