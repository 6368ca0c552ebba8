package top

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/sluice-dev/sluice/internal/budget"
	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/poolstatus"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// State is what is happening to a node, as the screen groups nodes.
type State string

// States, in the order the screen counts them.
const (
	StateBlocked   State = "blocked"
	StateDraining  State = "draining"
	StateDeleting  State = "deleting"
	StateReplacing State = "replacing"
	StateBooting   State = "booting"
	StateNotReady  State = "not-ready"
	StateCordoned  State = "cordoned"
	StateServing   State = "serving"
)

// States lists every State in the order the screen counts them.
var States = []State{StateBlocked, StateDraining, StateDeleting, StateReplacing, StateBooting, StateNotReady, StateCordoned, StateServing}

// Screen is what `sluice top` shows, computed from one Snapshot.
type Screen struct {
	Now time.Time
	// Banners are what the reader must know before trusting the rows: a
	// lost connection, what cannot be seen.
	Banners []Banner
	// Stale: the rows are as of a lost connection, not live.
	Stale bool
	Pools []PoolView
	// Unpooled is how many nodes no NodePool selects (default maintenance
	// only); they are the last of Pools, with no name, when there are any.
	Unpooled int
	// Events are sluice's last Events, newest first.
	Events []EventRow
}

// Banner is one line above the rows.
type Banner struct {
	Alert bool
	Text  string
}

// PoolView is one pool: its status as `sluice status` gives it, its nodes by
// state, and its maintenance.
type PoolView struct {
	Status poolstatus.Pool
	// Counts are how many of its nodes are in each State.
	Counts map[State]int
	// InUse is, per reason, how many of its nodes are being disrupted for
	// that reason (their disruption record's reason; maintenance for
	// involuntary events).
	InUse       map[string]int
	Nodes       []NodeRow
	Maintenance []MaintenanceRow
}

// NodeRow is one node.
type NodeRow struct {
	Name  string
	Pool  string
	State State
	// Detail says what the state is about: by whom, how far, by what.
	Detail string
	// Marks are facts beside the state: drifted, expired, expiring soon, a
	// maintenance event.
	Marks []string
	// Left and Total count the drain's pods still on the node and at its
	// start; Total is 0 when the start is unknown.
	Left, Total int
	// Blocked are the pods a drain of the node cannot move now, and why.
	Blocked []PodBlock
}

// PodBlock is a pod a drain cannot move now and the drain engine's reason
// (its EvictionBlocked Event, which names the PDB).
type PodBlock struct {
	Pod     string
	Message string
}

// MaintenanceRow is one maintenance event on one node.
type MaintenanceRow struct {
	Node string
	ID   string
	Type maintenance.Type
	// At is when the event may start (NotBefore), else its Deadline.
	At    time.Time
	Phase string
}

// EventRow is one Event.
type EventRow struct {
	Time    time.Time
	Type    string
	Reason  string
	Object  string
	Message string
}

// maxEvents is how many Events the screen keeps.
const maxEvents = 12

// Build computes the screen from a snapshot: each pool's summary and
// members with poolstatus (the controller's functions), each node's state
// with the rules of nodeStates, first match wins.
func Build(s Snapshot) Screen {
	sc := Screen{Now: s.Now, Stale: !s.Live()}
	if s.LostSince != nil {
		sc.Banners = append(sc.Banners, Banner{Alert: true, Text: fmt.Sprintf("connection lost %s ago (%s); reconnecting. Everything below is as of %s, not live",
			duration.HumanDuration(s.Now.Sub(*s.LostSince)), s.LostError, s.LostSince.UTC().Format(time.TimeOnly))})
	}
	for _, h := range s.Hidden {
		sc.Banners = append(sc.Banners, Banner{Alert: true, Text: h})
	}
	if !s.PoolsInstalled {
		sc.Banners = append(sc.Banners, Banner{Text: "the NodePool CRD is not installed: nodes get the default maintenance actions only"})
	}
	chosen := make([]*v1alpha1.NodePool, len(s.Pools))
	for i := range s.Pools {
		chosen[i] = &s.Pools[i]
	}
	members := poolctrl.MembersOfEach(chosen, s.Nodes, s.Pools)
	pooled := map[string]bool{}
	in := indexOf(s)
	for _, p := range chosen {
		sc.Pools = append(sc.Pools, buildPool(p, members[p.Name], in, s.Now))
		for _, n := range members[p.Name] {
			pooled[n.Name] = true
		}
	}
	var unpooled []*corev1.Node
	for i := range s.Nodes {
		if !pooled[s.Nodes[i].Name] {
			unpooled = append(unpooled, &s.Nodes[i])
		}
	}
	sc.Unpooled = len(unpooled)
	if len(unpooled) > 0 {
		sc.Pools = append(sc.Pools, buildPool(nil, unpooled, in, s.Now))
	}
	sc.Events = eventRows(s.Events)
	return sc
}

// index is the snapshot's pods and Events by node.
type index struct {
	// pods are each node's pods that a drain moves (not DaemonSet or
	// mirror pods, not finished); nil when pods cannot be seen.
	pods map[string][]*corev1.Pod
	// started is each node's last DrainStarted Event.
	started map[string]*corev1.Event
	// blocked are each node's drain's EvictionBlocked Events, by pod.
	blocked map[string]map[string]*corev1.Event
	// drainBlocked is each node's last DrainBlocked Event.
	drainBlocked map[string]*corev1.Event
}

// evictionBlocked reads the drain engine's EvictionBlocked message: "sluice
// drain of NODE: REASON: MESSAGE".
var evictionBlocked = regexp.MustCompile(`^sluice drain of ([^:]+): (.*)$`)

// drainStarted reads the DrainStarted message: "sluice: draining N pods".
var drainStarted = regexp.MustCompile(`draining (\d+) pods`)

func indexOf(s Snapshot) index {
	in := index{started: map[string]*corev1.Event{}, blocked: map[string]map[string]*corev1.Event{}, drainBlocked: map[string]*corev1.Event{}}
	if s.Pods != nil {
		in.pods = map[string][]*corev1.Pod{}
		for _, p := range s.Pods {
			if p.Spec.NodeName != "" && movable(p) {
				in.pods[p.Spec.NodeName] = append(in.pods[p.Spec.NodeName], p)
			}
		}
	}
	for _, e := range s.Events {
		switch e.Reason {
		case "DrainStarted":
			if later(e, in.started[e.InvolvedObject.Name]) {
				in.started[e.InvolvedObject.Name] = e
			}
		case "DrainBlocked":
			if later(e, in.drainBlocked[e.InvolvedObject.Name]) {
				in.drainBlocked[e.InvolvedObject.Name] = e
			}
		case "EvictionBlocked":
			m := evictionBlocked.FindStringSubmatch(e.Message)
			if m == nil {
				continue
			}
			pod := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
			if in.blocked[m[1]] == nil {
				in.blocked[m[1]] = map[string]*corev1.Event{}
			}
			if later(e, in.blocked[m[1]][pod]) {
				in.blocked[m[1]][pod] = e
			}
		}
	}
	return in
}

// movable says whether a drain moves the pod: not a DaemonSet's or a mirror
// pod, and not finished.
func movable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

// buildPool is the pool's view; pool nil gathers the nodes no pool selects,
// which have no budgets, drift or expiry (default maintenance only).
func buildPool(pool *v1alpha1.NodePool, members []*corev1.Node, in index, now time.Time) PoolView {
	pv := PoolView{Status: poolstatus.Pool{Nodes: len(members)}, Counts: map[State]int{}, InUse: map[string]int{}}
	v := &disruption.View{Nodes: members}
	if pool != nil {
		v = disruption.Observe(pool, members, now)
		pv.Status = poolstatus.FromView(v, now)
	}
	candidates := map[string]disruption.Candidate{}
	for _, c := range v.Candidates {
		candidates[c.Node.Name] = c
	}
	for _, n := range members {
		row := nodeRow(n, pool, v, candidates, in, now)
		pv.Counts[row.State]++
		pv.Nodes = append(pv.Nodes, row)
		if r, err := disruption.RecordOf(n); err == nil && r != nil {
			pv.InUse[string(r.Reason)]++
		} else if _, phase, ok := maintenancePhase(n); ok && phase != "" {
			pv.InUse["Maintenance"]++
		}
		pv.Maintenance = append(pv.Maintenance, maintenanceRows(n)...)
	}
	slices.SortFunc(pv.Nodes, func(a, b NodeRow) int {
		return cmp.Or(cmp.Compare(slices.Index(States, a.State), slices.Index(States, b.State)), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(pv.Maintenance, func(a, b MaintenanceRow) int { return a.At.Compare(b.At) })
	return pv
}

// nodeRow is the node's state, the first rule of nodeStates that holds, and
// its marks.
func nodeRow(n *corev1.Node, pool *v1alpha1.NodePool, v *disruption.View, candidates map[string]disruption.Candidate, in index, now time.Time) NodeRow {
	row := NodeRow{Name: n.Name, State: StateServing}
	if pool != nil {
		row.Pool = pool.Name
	}
	for _, rule := range nodeStates {
		if state, detail, ok := rule(n, v, in, now); ok {
			row.State, row.Detail = state, detail
			break
		}
	}
	if row.State == StateDraining || row.State == StateBlocked {
		row.Left, row.Total = progress(n, in)
		row.Blocked = blocks(n, in)
		if row.Detail == "" {
			row.Detail = progressText(row.Left, row.Total, in.pods != nil)
		}
		if c, ok := ownership.ClaimOf(n); ok {
			if c.Holder != "" {
				row.Detail += " (drain by " + c.Holder + ")"
			}
			if c.Deadline != nil {
				row.Marks = append(row.Marks, "deadline "+until(*c.Deadline, now))
			}
		}
	}
	if c, ok := candidates[n.Name]; ok {
		switch {
		case c.Drifted():
			row.Marks = append(row.Marks, "drifted")
		case c.Reason == v1alpha1.ReasonExpired:
			row.Marks = append(row.Marks, "expired")
		default:
			row.Marks = append(row.Marks, strings.ToLower(string(c.Reason)))
		}
	}
	if pool != nil && poolstatus.ExpiringSoon(n, pool, now) {
		at, _, _ := disruption.Expiry(n, pool.DisruptionSpec(), now)
		row.Marks = append(row.Marks, "expires in "+countdown(at.Sub(now)))
	}
	for _, m := range maintenanceRows(n) {
		row.Marks = append(row.Marks, fmt.Sprintf("%s %s", m.Type, until(m.At, now)))
	}
	return row
}

// stateRule says whether the node is in a state, and what about it.
type stateRule func(n *corev1.Node, v *disruption.View, in index, now time.Time) (State, string, bool)

// nodeStates are the rules that name a node's state, in precedence order:
// the first that holds wins. What a drain is doing to the node comes before
// why it is being taken (the record), and that before what anyone can see
// on the node alone (NotReady, a cordon).
var nodeStates = []stateRule{
	func(n *corev1.Node, _ *disruption.View, in index, now time.Time) (State, string, bool) {
		_, _, draining := ownership.LiveClaim(n, now)
		_, phase, _ := maintenancePhase(n)
		if b := blocks(n, in); len(b) > 0 && (draining || phase == "Blocked") {
			return StateBlocked, fmt.Sprintf("%d pod(s) cannot leave: %s: %s", len(b), b[0].Pod, b[0].Message), true
		}
		if e := in.drainBlocked[n.Name]; phase == "Blocked" && e != nil {
			return StateBlocked, strings.TrimPrefix(e.Message, "sluice: "), true
		}
		return "", "", false
	},
	func(n *corev1.Node, _ *disruption.View, _ index, now time.Time) (State, string, bool) {
		_, _, ok := ownership.LiveClaim(n, now)
		return StateDraining, "", ok
	},
	func(n *corev1.Node, _ *disruption.View, _ index, _ time.Time) (State, string, bool) {
		return StateDeleting, "", n.DeletionTimestamp != nil
	},
	func(n *corev1.Node, _ *disruption.View, _ index, _ time.Time) (State, string, bool) {
		r, err := disruption.RecordOf(n)
		if err != nil {
			return StateReplacing, "record unreadable: " + err.Error(), true
		}
		if r == nil {
			return "", "", false
		}
		detail := fmt.Sprintf("%s, %s", r.Reason, r.Phase)
		if r.Replacement != "" {
			detail += ", replacement " + r.Replacement
		}
		return StateReplacing, detail, true
	},
	func(n *corev1.Node, v *disruption.View, _ index, _ time.Time) (State, string, bool) {
		if budget.NodeReady(n) {
			return "", "", false
		}
		if v.Replacements[n.Name] {
			return StateBooting, "replacement, not Ready yet", true
		}
		why, _ := budget.Disrupting(n, time.Time{})
		return StateNotReady, why, true
	},
	func(n *corev1.Node, _ *disruption.View, _ index, _ time.Time) (State, string, bool) {
		if !n.Spec.Unschedulable {
			return "", "", false
		}
		if by := ownership.CordonedBy(n); by != "" {
			return StateCordoned, "by " + by, true
		}
		return StateCordoned, "outside sluice", true
	},
}

// progress counts the drain's pods still on the node, and how many it
// started with (its DrainStarted Event); total is 0 when unknown.
func progress(n *corev1.Node, in index) (left, total int) {
	left = len(in.pods[n.Name])
	if e := in.started[n.Name]; e != nil {
		if m := drainStarted.FindStringSubmatch(e.Message); m != nil {
			total, _ = strconv.Atoi(m[1])
		}
	}
	return left, max(total, left)
}

func progressText(left, total int, podsSeen bool) string {
	switch {
	case !podsSeen:
		return "pods cannot be seen"
	case total == 0:
		return fmt.Sprintf("%d pods left", left)
	}
	return fmt.Sprintf("%d of %d pods left %s", left, total, bar(total-left, total, 10))
}

// bar draws done of total in width cells.
func bar(done, total, width int) string {
	if total <= 0 {
		return ""
	}
	full := done * width / total
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", width-full) + "]"
}

// blocks are the node's pods that its drain reported blocked and that are
// still on it, oldest name first.
func blocks(n *corev1.Node, in index) []PodBlock {
	var out []PodBlock
	for pod, e := range in.blocked[n.Name] {
		if in.pods != nil && !slices.ContainsFunc(in.pods[n.Name], func(p *corev1.Pod) bool { return p.Namespace+"/"+p.Name == pod }) {
			continue
		}
		m := evictionBlocked.FindStringSubmatch(e.Message)
		out = append(out, PodBlock{Pod: pod, Message: m[2]})
	}
	slices.SortFunc(out, func(a, b PodBlock) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// maintenancePhase is the maintenance controller's event and phase for the
// node, as `sluice explain` reads them.
func maintenancePhase(n *corev1.Node) (event, phase string, ok bool) {
	e, p, ok := mcontroller.PhaseOf(n)
	return e, string(p), ok
}

// maintenanceRows are the node's active maintenance events, as its agent
// reported them.
func maintenanceRows(n *corev1.Node) []MaintenanceRow {
	r, ok, err := maintenance.ReportOf(n)
	if !ok || err != nil {
		return nil
	}
	_, phase, _ := maintenancePhase(n)
	var out []MaintenanceRow
	for _, e := range r.Events {
		if !e.Active() {
			continue
		}
		at := e.NotBefore
		if at.IsZero() {
			at = e.Deadline
		}
		out = append(out, MaintenanceRow{Node: n.Name, ID: e.ID, Type: e.Type, At: at, Phase: phase})
	}
	return out
}

func eventRows(events []*corev1.Event) []EventRow {
	out := make([]EventRow, 0, len(events))
	for _, e := range events {
		out = append(out, EventRow{Time: eventTime(e), Type: e.Type, Reason: e.Reason,
			Object: strings.ToLower(e.InvolvedObject.Kind) + "/" + objectName(e), Message: strings.TrimPrefix(e.Message, "sluice: ")})
	}
	slices.SortStableFunc(out, func(a, b EventRow) int { return b.Time.Compare(a.Time) })
	if len(out) > maxEvents {
		out = out[:maxEvents]
	}
	return out
}

func objectName(e *corev1.Event) string {
	if e.InvolvedObject.Namespace != "" {
		return e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
	}
	return e.InvolvedObject.Name
}

// eventTime is when the Event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func later(e, than *corev1.Event) bool { return than == nil || eventTime(e).After(eventTime(than)) }

// until is how far ahead t is: "in 25s", or "25s ago".
func until(t, now time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + countdown(d)
	}
	return countdown(now.Sub(t)) + " ago"
}

// countdown is d to the second under an hour (it ticks), else as kubectl
// prints ages.
func countdown(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Hour {
		return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
	}
	return duration.HumanDuration(d)
}
