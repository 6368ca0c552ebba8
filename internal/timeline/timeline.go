// Package timeline draws a drain as one self-contained HTML file: a lane per
// node, a bar per pod from the moment it was asked to leave to the moment it
// was gone, the time it spent blocked before that (and why), pods deleted at
// the deadline, and the deadline itself. It is built from the progress the
// drain engine reports as it goes (drain.Observer) and its final report.
package timeline

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// Recorder keeps a drain's progress, for a timeline once it is over. It is
// a drain.Observer and safe for the drain's goroutines.
type Recorder struct {
	mu    sync.Mutex
	steps []drain.Progress
}

// Observe keeps one step.
func (r *Recorder) Observe(p drain.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, p)
}

// Steps returns the steps kept so far, in the order they came.
func (r *Recorder) Steps() []drain.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// Timeline is what the picture shows. Times are seconds from Start, so the
// file carries no clock but its caption.
type Timeline struct {
	Title    string   `json:"title"`
	Start    string   `json:"start"`              // RFC 3339, for the caption
	Seconds  float64  `json:"seconds"`            // the drain's length
	Deadline *float64 `json:"deadline,omitempty"` // seconds from Start
	Lanes    []Lane   `json:"lanes"`
}

// Lane is one node.
type Lane struct {
	Node     string   `json:"node"`
	Outcome  string   `json:"outcome"`
	Message  string   `json:"message,omitempty"`
	Started  float64  `json:"started"`
	Cordoned *float64 `json:"cordoned,omitempty"`
	Finished *float64 `json:"finished,omitempty"`
	Pods     []Bar    `json:"pods"`
}

// Bar is one pod. Asked is when it was asked to leave (evicted, or deleted
// at the deadline), Gone when it was gone; Blocked is when it was first
// refused, with the last reason given.
type Bar struct {
	Pod     string   `json:"pod"`
	Outcome string   `json:"outcome"`
	Reason  string   `json:"reason,omitempty"`
	Message string   `json:"message,omitempty"`
	PDB     string   `json:"pdb,omitempty"`
	Blocked *float64 `json:"blocked,omitempty"`
	Asked   *float64 `json:"asked,omitempty"`
	Gone    *float64 `json:"gone,omitempty"`
	Forced  bool     `json:"forced,omitempty"`
}

// FromDrain builds the timeline of one drain from its steps and its report.
// Pods the report names that never took a step (skipped, left in place) get
// a bar with no times, so the lane still says they were there.
func FromDrain(title string, steps []drain.Progress, report *drain.Report) Timeline {
	start := report.StartedAt
	for _, s := range steps {
		if start.IsZero() || s.Time.Before(start) {
			start = s.Time
		}
	}
	end := report.FinishedAt
	at := func(t time.Time) *float64 {
		v := max(t.Sub(start).Seconds(), 0)
		return &v
	}
	tl := Timeline{Title: title, Start: start.UTC().Format(time.RFC3339)}
	if !end.IsZero() {
		tl.Seconds = max(end.Sub(start).Seconds(), 0)
	}
	if report.Deadline != nil {
		tl.Deadline = at(*report.Deadline)
	}
	lanes := map[string]*Lane{}
	bars := map[string]map[string]*Bar{}
	lane := func(node string) *Lane {
		if l, ok := lanes[node]; ok {
			return l
		}
		l := &Lane{Node: node, Started: -1}
		lanes[node], bars[node] = l, map[string]*Bar{}
		return l
	}
	bar := func(node, pod string) *Bar {
		lane(node)
		if b, ok := bars[node][pod]; ok {
			return b
		}
		b := &Bar{Pod: pod}
		bars[node][pod] = b
		return b
	}
	for _, s := range steps {
		t := at(s.Time)
		tl.Seconds = max(tl.Seconds, *t)
		switch s.Kind {
		case drain.ProgressNodeStarted:
			if l := lane(s.Node); l.Started < 0 {
				l.Started = *t
			}
		case drain.ProgressCordoned:
			lane(s.Node).Cordoned = t
		case drain.ProgressNodeFinished:
			lane(s.Node).Finished = t
		case drain.ProgressBlocked:
			b := bar(s.Node, s.Pod)
			if b.Blocked == nil {
				b.Blocked = t
			}
			b.Reason, b.Message, b.PDB = string(s.Reason), s.Message, s.PDB
		case drain.ProgressEvicting:
			b := bar(s.Node, s.Pod)
			b.Asked, b.PDB = t, s.PDB
		case drain.ProgressForced:
			b := bar(s.Node, s.Pod)
			b.Asked, b.Forced, b.Reason, b.Message = t, true, string(s.Reason), s.Message
		case drain.ProgressGone:
			bar(s.Node, s.Pod).Gone = t
		}
	}
	for _, n := range report.Nodes {
		l := lane(n.Name)
		l.Outcome, l.Message = string(n.Outcome), n.Message
		for _, p := range n.Pods {
			b := bar(n.Name, p.Namespace+"/"+p.Name)
			b.Outcome = string(p.Outcome)
			if p.Reason != "" {
				b.Reason, b.Message = string(p.Reason), p.Message
			}
			if p.PDB != "" {
				b.PDB = p.PDB
			}
		}
	}
	for _, node := range sortedKeys(lanes) {
		l := lanes[node]
		l.Started = max(l.Started, 0)
		for _, pod := range sortedKeys(bars[node]) {
			l.Pods = append(l.Pods, *bars[node][pod])
		}
		slices.SortStableFunc(l.Pods, func(a, b Bar) int { return compareFirst(a, b) })
		tl.Lanes = append(tl.Lanes, *l)
	}
	return tl
}

// compareFirst orders bars by when their pod was first refused or asked to
// leave; pods that never were come last.
func compareFirst(a, b Bar) int {
	fa, fb := first(a), first(b)
	switch {
	case fa == nil && fb == nil:
		return strings.Compare(a.Pod, b.Pod)
	case fa == nil:
		return 1
	case fb == nil:
		return -1
	case *fa < *fb:
		return -1
	case *fa > *fb:
		return 1
	}
	return strings.Compare(a.Pod, b.Pod)
}

func first(b Bar) *float64 {
	if b.Blocked != nil {
		return b.Blocked
	}
	if b.Asked != nil {
		return b.Asked
	}
	return b.Gone
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
