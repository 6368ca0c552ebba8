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
//
// A pod refused again and again for changing reasons (the drain engine
// reports a refusal when its reason changes) is kept as two steps, its first
// refusal and its latest, which is all the picture draws: a long drain's
// record grows with its pods, not with its retries.
type Recorder struct {
	mu    sync.Mutex
	steps []drain.Progress
	// refused: per pod (node and name), the index of its latest refusal
	// after the first, or -1 while it has been refused once.
	refused map[string]int
}

// Observe keeps one step.
func (r *Recorder) Observe(p drain.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Kind == drain.ProgressBlocked {
		if r.refused == nil {
			r.refused = map[string]int{}
		}
		key := p.Node + "\x00" + p.Pod
		switch i, seen := r.refused[key]; {
		case !seen:
			r.refused[key] = -1
		case i < 0:
			r.refused[key] = len(r.steps)
		default:
			r.steps[i] = p
			return
		}
	}
	r.steps = append(r.steps, p)
}

// Steps returns the steps kept so far, in the order they came (a pod's
// latest refusal in the place of its second).
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
	b := &builder{start: start, lanes: map[string]*Lane{}, bars: map[string]map[string]*Bar{}}
	tl := Timeline{Title: title, Start: start.UTC().Format(time.RFC3339)}
	if !report.FinishedAt.IsZero() {
		tl.Seconds = max(report.FinishedAt.Sub(start).Seconds(), 0)
	}
	if report.Deadline != nil {
		tl.Deadline = b.at(*report.Deadline)
	}
	for _, s := range steps {
		tl.Seconds = max(tl.Seconds, *b.at(s.Time))
		b.step(s)
	}
	b.report(report)
	for _, node := range sortedKeys(b.lanes) {
		l := b.lanes[node]
		l.Started = max(l.Started, 0)
		for _, pod := range sortedKeys(b.bars[node]) {
			l.Pods = append(l.Pods, *b.bars[node][pod])
		}
		slices.SortStableFunc(l.Pods, compareFirst)
		tl.Lanes = append(tl.Lanes, *l)
	}
	return tl
}

// builder gathers lanes and bars as the steps come.
type builder struct {
	start time.Time
	lanes map[string]*Lane
	bars  map[string]map[string]*Bar
}

// at is t in seconds from the start.
func (b *builder) at(t time.Time) *float64 {
	v := max(t.Sub(b.start).Seconds(), 0)
	return &v
}

func (b *builder) lane(node string) *Lane {
	if l, ok := b.lanes[node]; ok {
		return l
	}
	l := &Lane{Node: node, Started: -1}
	b.lanes[node], b.bars[node] = l, map[string]*Bar{}
	return l
}

func (b *builder) bar(node, pod string) *Bar {
	b.lane(node)
	if bar, ok := b.bars[node][pod]; ok {
		return bar
	}
	bar := &Bar{Pod: pod}
	b.bars[node][pod] = bar
	return bar
}

// step records one progress step.
func (b *builder) step(s drain.Progress) {
	t := b.at(s.Time)
	switch s.Kind {
	case drain.ProgressNodeStarted:
		if l := b.lane(s.Node); l.Started < 0 {
			l.Started = *t
		}
	case drain.ProgressCordoned:
		b.lane(s.Node).Cordoned = t
	case drain.ProgressNodeFinished:
		b.lane(s.Node).Finished = t
	case drain.ProgressBlocked:
		bar := b.bar(s.Node, s.Pod)
		if bar.Blocked == nil {
			bar.Blocked = t
		}
		bar.Reason, bar.Message, bar.PDB = string(s.Reason), s.Message, s.PDB
	case drain.ProgressEvicting:
		bar := b.bar(s.Node, s.Pod)
		bar.Asked, bar.PDB = t, s.PDB
	case drain.ProgressForced:
		bar := b.bar(s.Node, s.Pod)
		bar.Asked, bar.Forced, bar.Reason, bar.Message = t, true, string(s.Reason), s.Message
	case drain.ProgressGone:
		b.bar(s.Node, s.Pod).Gone = t
	}
}

// report adds the outcomes, and the pods that never took a step.
func (b *builder) report(r *drain.Report) {
	for _, n := range r.Nodes {
		l := b.lane(n.Name)
		l.Outcome, l.Message = string(n.Outcome), n.Message
		for _, p := range n.Pods {
			bar := b.bar(n.Name, p.Namespace+"/"+p.Name)
			bar.Outcome = string(p.Outcome)
			if p.Reason != "" {
				bar.Reason, bar.Message = string(p.Reason), p.Message
			}
			if p.PDB != "" {
				bar.PDB = p.PDB
			}
		}
	}
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
