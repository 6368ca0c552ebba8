package importer

import (
	"fmt"
	"sort"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Status says what became of one field of the input.
type Status string

// Statuses.
const (
	// Mapped: the field became a sluice setting that means the same.
	Mapped Status = "Mapped"
	// Differs: the field became a sluice setting that behaves differently
	// in a way the reason states.
	Differs Status = "Differs"
	// NotMapped: sluice has no equivalent; the reason says why and what
	// to do instead, if anything.
	NotMapped Status = "NotMapped"
)

// Entry is what became of one field of the input.
type Entry struct {
	// Source is the input object the field belongs to, such as
	// "NodePool spot" or "values".
	Source string `json:"source"`
	// Field is the field's path in the input, as its own project names it.
	Field  string `json:"field"`
	Status Status `json:"status"`
	// Target is where it went: a path in the sluice NodePool, or
	// "values: KEY" for a chart value.
	Target string `json:"target,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Result is what an import produced.
type Result struct {
	// NodePools are the sluice NodePools, ready to apply.
	NodePools []v1alpha1.NodePool `json:"nodePools,omitempty"`
	// Values are sluice chart values (helm --values), for the NTH and kured
	// imports.
	Values map[string]any `json:"values,omitempty"`
	// Report accounts for every field read, in the input's order.
	Report []Entry `json:"report"`
}

// NotMappedCount is how many fields did not map.
func (r *Result) NotMappedCount() int {
	n := 0
	for _, e := range r.Report {
		if e.Status == NotMapped {
			n++
		}
	}
	return n
}

// recorder collects the entries of one input object.
type recorder struct {
	source  string
	entries *[]Entry
}

func (r recorder) mapped(field, target string) {
	*r.entries = append(*r.entries, Entry{Source: r.source, Field: field, Status: Mapped, Target: target})
}

func (r recorder) mappedBecause(field, target, reason string) {
	*r.entries = append(*r.entries, Entry{Source: r.source, Field: field, Status: Mapped, Target: target, Reason: reason})
}

func (r recorder) differs(field, target, reason string) {
	*r.entries = append(*r.entries, Entry{Source: r.source, Field: field, Status: Differs, Target: target, Reason: reason})
}

func (r recorder) notMapped(field, reason string) {
	*r.entries = append(*r.entries, Entry{Source: r.source, Field: field, Status: NotMapped, Reason: reason})
}

func (r recorder) notMappedf(field, format string, args ...any) {
	r.notMapped(field, fmt.Sprintf(format, args...))
}

// setValue sets a chart value at a dotted path ("controller.webhook.url").
func setValue(values map[string]any, path []string, v any) {
	m := values
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// sortedKeys returns m's keys in order, so reports are stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
