package maintenance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
)

// Report is what the agent writes onto its node: the events its metadata
// service announces for the machine now.
type Report struct {
	Source Source `json:"source"`
	// Approvable says the source can be told to start an event early.
	Approvable bool    `json:"approvable,omitempty"`
	Events     []Event `json:"events"`
	// Rejected says, one line each, which parts of the metadata answer could
	// not be read (see RejectedError); the controller reports each on the
	// node once.
	Rejected []string `json:"rejected,omitempty"`
}

// NewReport sorts the events so equal observations encode equally.
func NewReport(source Source, approvable bool, events []Event) Report {
	events = slices.Clone(events)
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.ID, b.ID) })
	if events == nil {
		events = []Event{}
	}
	return Report{Source: source, Approvable: approvable, Events: events}
}

// WithRejected records the parts of the answer that could not be read,
// sorted and without repeats, so equal observations encode equally.
func (r Report) WithRejected(rejected []error) Report {
	r.Rejected = nil
	for _, err := range rejected {
		r.Rejected = append(r.Rejected, err.Error())
	}
	slices.Sort(r.Rejected)
	r.Rejected = slices.Compact(r.Rejected)
	return r
}

// Encode is the annotation value.
func (r Report) Encode() string {
	data, _ := json.Marshal(r) // plain data: cannot fail
	return string(data)
}

// ReportOf reads the agent's report from a node; ok is false when the node
// has none. A report that does not parse is an error, never "no events".
func ReportOf(node *corev1.Node) (r Report, ok bool, err error) {
	raw, ok := node.Annotations[contract.AnnotationMaintenanceEvents]
	if !ok {
		return Report{}, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Report{}, true, fmt.Errorf("annotation %s on node %s: %w", contract.AnnotationMaintenanceEvents, node.Name, err)
	}
	return r, true, nil
}

// Find returns the event with the given ID.
func (r Report) Find(id string) (Event, bool) {
	for _, e := range r.Events {
		if e.ID == id {
			return e, true
		}
	}
	return Event{}, false
}

// Approved reports whether the agent has approved the event on this node.
func Approved(node *corev1.Node, id string) bool {
	return slices.Contains(strings.Split(node.Annotations[contract.AnnotationMaintenanceApproved], ","), id)
}

// Active reports whether the event still lies ahead or is under way.
func (e Event) Active() bool {
	return e.Status == StatusScheduled || e.Status == StatusStarted
}
