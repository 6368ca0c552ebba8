package top

import (
	"fmt"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"
)

// Kind says how a line is styled; the words on it carry its meaning
// without colour (NO_COLOR).
type Kind int

// Kinds of lines.
const (
	KindText Kind = iota
	KindTitle
	KindHeader
	KindAlert
	KindWarn
	KindDim
)

// Line is one line of the view; Node names the node a selectable line is
// about.
type Line struct {
	Text string
	Kind Kind
	Node string
}

// NarrowWidth is the width under which the view shows the pools' summary
// lines only.
const NarrowWidth = 60

// Lines lays the screen out at width: per pool its summary, budgets, next
// window, maintenance and nodes (those matching filter, when it is set),
// then the last Events. Every line fits width.
func Lines(sc Screen, width int, filter string) []Line {
	var out []Line
	add := func(k Kind, node, format string, args ...any) {
		out = append(out, Line{Text: fit(fmt.Sprintf(format, args...), width), Kind: k, Node: node})
	}
	for _, b := range sc.Banners {
		k := KindWarn
		if b.Alert {
			k = KindAlert
		}
		for _, l := range wrap("! "+b.Text, width) {
			add(k, "", "%s", l)
		}
	}
	stale := ""
	if sc.Stale {
		stale = "~"
	}
	if len(sc.Pools) == 0 {
		add(KindDim, "", "no NodePools")
	}
	for _, p := range sc.Pools {
		out = append(out, poolLines(p, sc.Now, width, filter, stale)...)
	}
	if width < NarrowWidth {
		return out
	}
	add(KindText, "", "")
	add(KindHeader, "", "%sLAST EVENTS", stale)
	if len(sc.Events) == 0 {
		add(KindDim, "", "  none")
	}
	for _, e := range sc.Events {
		k := KindText
		if e.Type == "Warning" {
			k = KindWarn
		}
		add(k, "", "  %s  %-16s %s: %s", e.Time.Local().Format(time.TimeOnly), e.Reason, e.Object, e.Message)
	}
	return out
}

func poolLines(p PoolView, now time.Time, width int, filter, stale string) []Line {
	var out []Line
	add := func(k Kind, node, format string, args ...any) {
		out = append(out, Line{Text: fit(fmt.Sprintf(format, args...), width), Kind: k, Node: node})
	}
	s := p.Status
	var counts []string
	for _, st := range States {
		if n := p.Counts[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", st, n))
		}
	}
	prov := string(s.Provider.Name)
	if s.Provider.Managed {
		prov += " (" + string(s.Provider.Ready) + ")"
	}
	flags := ""
	if s.Paused {
		flags += "  PAUSED"
	}
	if s.Problem != nil {
		flags += "  NOT READY (" + s.Problem.Reason + ")"
	}
	add(KindText, "", "")
	if s.Name == "" {
		add(KindTitle, "", "%sNO POOL  %d node(s) no NodePool selects, default maintenance actions only: %s", stale, s.Nodes, strings.Join(counts, ", "))
	} else {
		add(KindTitle, "", "%sPOOL %s  %s  %d nodes, %d out of service: %s%s", stale, s.Name, prov, s.Nodes, s.Disrupting, strings.Join(counts, ", "), flags)
	}
	if width < NarrowWidth {
		return out
	}
	out = append(out, budgetLines(p, now, width)...)
	for _, m := range p.Maintenance {
		add(KindWarn, "", "  maintenance    %s %s on %s: %s (%s) %s", m.Type, m.ID, m.Node, until(m.At, now), m.At.Local().Format(time.TimeOnly), m.Phase)
	}
	out = append(out, nodeLines(p, width, filter, stale)...)
	return out
}

// budgetLines are what the pool's budgets allow per reason, how many nodes
// each reason uses, and the next window; none for the nodes of no pool.
func budgetLines(p PoolView, now time.Time, width int) []Line {
	var out []Line
	add := func(k Kind, format string, args ...any) {
		out = append(out, Line{Text: fit(fmt.Sprintf(format, args...), width), Kind: k})
	}
	s := p.Status
	if s.Name == "" {
		return nil
	}
	var budgets []string
	for _, b := range s.Budgets {
		if b.Error != "" {
			budgets = append(budgets, fmt.Sprintf("%s unreadable", b.Reason))
			continue
		}
		one := fmt.Sprintf("%s %d/%d", b.Reason, b.Allowed, b.Limit)
		if n := p.InUse[string(b.Reason)]; n > 0 {
			one += fmt.Sprintf(" (%d in use)", n)
		}
		budgets = append(budgets, one)
	}
	if n := p.InUse["Maintenance"]; n > 0 {
		budgets = append(budgets, fmt.Sprintf("maintenance %d in use", n))
	}
	add(KindText, "  allowed/limit  %s", strings.Join(budgets, "  "))
	for _, b := range s.Budgets {
		if c := b.NextChange; c != nil {
			what := "budgets change"
			if c.Budget != "" {
				what = "window of " + c.Budget + " " + map[bool]string{true: "opens", false: "closes"}[c.Opens]
			}
			add(KindDim, "  next window    %s (%s): %s", c.At.Local().Format("Mon 15:04"), until(c.At, now), what)
			break
		}
	}
	return out
}

// nodeLines are the pool's nodes that match filter, one line each.
func nodeLines(p PoolView, width int, filter, stale string) []Line {
	var out []Line
	nameW := 4
	for _, n := range p.Nodes {
		nameW = max(nameW, min(runewidth.StringWidth(n.Name), 40))
	}
	for _, n := range p.Nodes {
		if filter != "" && !matches(n, filter) {
			continue
		}
		k := KindText
		switch n.State {
		case StateBlocked, StateNotReady:
			k = KindAlert
		case StateDraining, StateReplacing, StateDeleting, StateBooting, StateCordoned:
			k = KindWarn
		}
		marks := ""
		if len(n.Marks) > 0 {
			marks = "  [" + strings.Join(n.Marks, ", ") + "]"
		}
		out = append(out, Line{Text: fit(fmt.Sprintf("  %s%-*s %-10s %s%s", stale, nameW, n.Name, n.State, n.Detail, marks), width), Kind: k, Node: n.Name})
	}
	return out
}

// matches says whether the filter is a substring of the row's name, pool,
// state, detail or marks.
func matches(n NodeRow, filter string) bool {
	hay := strings.ToLower(strings.Join(append([]string{n.Name, n.Pool, string(n.State), n.Detail}, n.Marks...), " "))
	return strings.Contains(hay, strings.ToLower(filter))
}

// fit cuts s to width cells.
func fit(s string, width int) string {
	if width <= 0 || runewidth.StringWidth(s) <= width {
		return s
	}
	return runewidth.Truncate(s, width, "…")
}

// wrap breaks s into lines of width cells at spaces.
func wrap(s string, width int) []string {
	if width <= 0 || runewidth.StringWidth(s) <= width {
		return []string{s}
	}
	var out []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case runewidth.StringWidth(line)+1+runewidth.StringWidth(w) <= width:
			line += " " + w
		default:
			out = append(out, fit(line, width))
			line = "  " + w
		}
	}
	return append(out, fit(line, width))
}
