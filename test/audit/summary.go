package audit

import (
	"fmt"
	"slices"
	"strings"
)

// Row is one invariant's tally.
type Row struct {
	Invariant Invariant
	Checked   int
	Violated  int
	// Examples are the first breaches, as messages.
	Examples []string
}

// Summary is what the auditor saw and judged.
type Summary struct {
	Rows []Row
	// Seen counts the acts it watched: pods deleted or evicted, nodes
	// created and deleted, cordons, disruption records, ...
	Seen map[string]int
}

// Violations is the number of breaches across every invariant.
func (s Summary) Violations() int {
	n := 0
	for _, r := range s.Rows {
		n += r.Violated
	}
	return n
}

// Row returns the tally of one invariant.
func (s Summary) Row(inv Invariant) Row {
	for _, r := range s.Rows {
		if r.Invariant == inv {
			return r
		}
	}
	return Row{Invariant: inv}
}

// String is a table, one line per invariant, then the acts seen and the
// first breaches.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %8s %8s\n", "invariant", "checked", "violated")
	for _, r := range s.Rows {
		fmt.Fprintf(&b, "%-20s %8d %8d\n", r.Invariant, r.Checked, r.Violated)
	}
	keys := make([]string, 0, len(s.Seen))
	for k := range s.Seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var seen []string
	for _, k := range keys {
		seen = append(seen, fmt.Sprintf("%s %d", k, s.Seen[k]))
	}
	fmt.Fprintf(&b, "seen: %s\n", strings.Join(seen, ", "))
	for _, r := range s.Rows {
		for _, e := range r.Examples {
			fmt.Fprintf(&b, "  %s: %s\n", r.Invariant, e)
		}
	}
	return b.String()
}
