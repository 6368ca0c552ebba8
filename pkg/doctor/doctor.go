// Package doctor finds what will make a drain hang, lose data or run out of
// time before any drain starts, and says which object, why, and what to change.
// Diagnose is a pure function of the cluster's objects; the CLI lists them.
package doctor

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

// Severity says how bad a finding is.
type Severity string

// Severities: an error means a drain will hang or lose data; a warning that it
// will be slow or harsh; info is worth knowing.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Codes doctor adds to the drain engine's reason codes.
const (
	CodePDBSelectsNothing  = "PDBSelectsNothing"
	CodeHostPath           = "HostPath"
	CodeStuckTerminating   = "StuckTerminating"
	CodeGraceExceedsNotice = "GraceExceedsNotice"
	CodeNoRoom             = "NoRoom"
	CodePending            = "Pending"
	CodeCordonedUnknown    = "CordonedByUnknown"
	CodeNodeNotReady       = "NodeNotReady"
	CodeMaintenanceOver    = "MaintenanceOver"
)

// Finding is one thing doctor found.
type Finding struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Object   string   `json:"object"` // kind namespace/name, as kubectl names it
	Node     string   `json:"node,omitempty"`
	Message  string   `json:"message"`
	Fix      string   `json:"fix,omitempty"`
}

// Report is doctor's answer.
type Report struct {
	Nodes    []string  `json:"nodes"` // the nodes checked for room
	Findings []Finding `json:"findings"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
}

// Input is the cluster as listed.
type Input struct {
	Nodes []corev1.Node
	Pods  []corev1.Pod
	PDBs  []policyv1.PodDisruptionBudget
	// DaemonSets are the cluster's DaemonSets: a DaemonSet pod whose DaemonSet
	// is not among them is an orphan, which a drain refuses without --force.
	DaemonSets []appsv1.DaemonSet
	// Targets are the nodes to judge (room, time, pods); empty means all.
	Targets []string
	Now     time.Time
	// StuckAfter is how long past its grace period a terminating pod held by
	// finalizers counts as stuck; zero means one minute.
	StuckAfter time.Duration
	// Extra are findings the caller made itself (sluice's checks of its
	// NodePools), reported and counted with doctor's own.
	Extra []Finding
}

// Diagnose runs every check and returns the findings, errors first.
func Diagnose(in Input) Report {
	if in.StuckAfter == 0 {
		in.StuckAfter = time.Minute
	}
	d := &diagnosis{in: in, targets: map[string]bool{}}
	for i := range in.PDBs {
		d.pdbs = append(d.pdbs, &in.PDBs[i])
	}
	for _, n := range in.Nodes {
		// A node without a name is none the API server lists; as a target
		// it would claim every unscheduled pod (nodeName "").
		if n.Name != "" && (len(in.Targets) == 0 || contains(in.Targets, n.Name)) {
			d.targets[n.Name] = true
		}
	}
	d.classes = classifyAll(in)
	d.budgets()
	d.pods()
	d.room()
	d.leftovers()
	rep := Report{Findings: append(d.findings, in.Extra...)}
	for n := range d.targets {
		rep.Nodes = append(rep.Nodes, n)
	}
	sort.Strings(rep.Nodes)
	rank := map[Severity]int{SeverityError: 0, SeverityWarning: 1, SeverityInfo: 2}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if rank[a.Severity] != rank[b.Severity] {
			return rank[a.Severity] < rank[b.Severity]
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Object < b.Object
	})
	for _, f := range rep.Findings {
		switch f.Severity {
		case SeverityError:
			rep.Errors++
		case SeverityWarning:
			rep.Warnings++
		}
	}
	return rep
}

type diagnosis struct {
	in       Input
	pdbs     []*policyv1.PodDisruptionBudget
	targets  map[string]bool
	classes  [][]drain.Classification // per pod of in.Pods, what a drain decides
	findings []Finding
}

func (d *diagnosis) add(f Finding) { d.findings = append(d.findings, f) }

func (d *diagnosis) anyOnTargets(pods []corev1.Pod) bool {
	for _, p := range pods {
		if d.targets[p.Spec.NodeName] {
			return true
		}
	}
	return false
}

// budgets: PDBs that can never allow an eviction, that select nothing, that
// overlap, and those at zero right now, with why.
func (d *diagnosis) budgets() {
	overlap := map[string][]string{}
	pods := newPodIndex(d.in.Pods)
	for _, pdb := range d.pdbs {
		obj := "poddisruptionbudget " + pdb.Namespace + "/" + pdb.Name
		var selected []corev1.Pod
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if pdb.Spec.Selector != nil && err == nil {
			selected = pods.selected(pdb.Namespace, sel)
		}
		if len(d.in.Targets) > 0 && !d.anyOnTargets(selected) {
			continue // doctor node NAME: only budgets that hold pods of those nodes
		}
		if len(selected) == 0 {
			d.add(Finding{SeverityWarning, CodePDBSelectsNothing, obj, "", "selects no pods, so it protects nothing",
				"fix its selector, or delete it"})
			continue
		}
		if msg, dead := drain.BudgetDeadlock(pdb, &selected[0]); dead {
			d.add(Finding{SeverityError, string(drain.ReasonPDBDeadlock), obj, "", msg, ""})
		} else if pdb.Status.DisruptionsAllowed == 0 && pdb.Status.ObservedGeneration == pdb.Generation {
			reason, msg := drain.DiagnoseBudget(pdb, selected, d.in.Now)
			sev := SeverityWarning
			if reason == drain.ReasonPDBDeadlock {
				sev = SeverityError
			}
			d.add(Finding{sev, string(reason), obj, "", "allows no disruption right now: " + msg, ""})
		}
		for _, p := range selected {
			key := p.Namespace + "/" + p.Name
			overlap[key] = append(overlap[key], pdb.Name)
		}
	}
	byBudgets := map[string][]string{}
	for pod, names := range overlap {
		if len(names) > 1 {
			sort.Strings(names)
			k := strings.Join(names, ", ")
			byBudgets[k] = append(byBudgets[k], pod)
		}
	}
	for names, pods := range byBudgets {
		sort.Strings(pods)
		ns := strings.SplitN(pods[0], "/", 2)[0]
		d.add(Finding{SeverityError, string(drain.ReasonMultiplePDBs), "poddisruptionbudgets " + ns + "/{" + names + "}", "",
			fmt.Sprintf("%d pod(s) (%s) are selected by more than one budget; the Eviction API refuses to evict them", len(pods), strings.Join(firstN(pods, 3), ", ")),
			"make the budgets' selectors disjoint, or delete one"})
	}
}

// pods: on the target nodes, what a drain refuses, holds or loses, pods stuck
// terminating, and pods whose shutdown cannot fit the notice their node gets.
func (d *diagnosis) pods() {
	nodes := map[string]*corev1.Node{}
	for i := range d.in.Nodes {
		nodes[d.in.Nodes[i].Name] = &d.in.Nodes[i]
	}
	for i := range d.in.Pods {
		p := &d.in.Pods[i]
		if !d.targets[p.Spec.NodeName] {
			continue
		}
		obj := "pod " + p.Namespace + "/" + p.Name
		node := p.Spec.NodeName
		steps := d.classes[i]
		for _, c := range steps {
			if f, ok := classFinding(p, c); ok {
				f.Object, f.Node = obj, node
				d.add(f)
			}
		}
		switch last := steps[len(steps)-1]; {
		case last.Verdict == drain.VerdictWait:
			d.stuck(p, obj, node)
			continue
		case last.Reason == drain.ReasonMirrorPod:
			continue
		}
		// A finished pod has no shutdown to time and writes nothing more.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.HostPath != nil {
				d.add(Finding{SeverityWarning, CodeHostPath, obj, node,
					fmt.Sprintf("mounts the node's %s (volume %s): what it wrote stays on the old node", v.HostPath.Path, v.Name), ""})
			}
		}
		if n := nodes[node]; n != nil {
			d.notice(p, n, obj)
		}
	}
}

// stuck: a terminating pod that finalizers keep long past its grace period;
// a drain waits for it to go.
func (d *diagnosis) stuck(p *corev1.Pod, obj, node string) {
	grace := int64(0)
	if p.DeletionGracePeriodSeconds != nil {
		grace = *p.DeletionGracePeriodSeconds
	}
	if d.in.Now.Sub(p.DeletionTimestamp.Time) > d.in.StuckAfter && len(p.Finalizers) > 0 {
		d.add(Finding{SeverityError, CodeStuckTerminating, obj, node, fmt.Sprintf(
			"has been terminating for %s past its %ds grace period, held by finalizers %s",
			d.in.Now.Sub(p.DeletionTimestamp.Time).Round(time.Second), grace, strings.Join(p.Finalizers, ", ")),
			"find the controller that owns the finalizers and fix it, or remove them if that controller is gone"})
	}
}

// notice: the time a spot node gets before it is taken, by cloud.
func (d *diagnosis) notice(p *corev1.Pod, n *corev1.Node, obj string) {
	notice, cloud := spotNotice(n)
	if notice == 0 {
		return
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	hook := false
	for _, c := range p.Spec.Containers {
		hook = hook || (c.Lifecycle != nil && c.Lifecycle.PreStop != nil)
	}
	if time.Duration(grace)*time.Second <= notice {
		return
	}
	msg := fmt.Sprintf("asks for %ds to shut down but %s spot nodes get %s of notice: it will be killed mid-shutdown", grace, cloud, notice)
	if hook {
		msg += " (it has a preStop hook, which runs inside that time)"
	}
	d.add(Finding{SeverityWarning, CodeGraceExceedsNotice, obj, n.Name, msg,
		fmt.Sprintf("shut down within %s (lower terminationGracePeriodSeconds), or keep it off spot capacity", notice)})
}

// room: if each target node were drained now, could its pods go elsewhere?
// One simulated cluster serves every target; each check is undone after it,
// so the cost grows with the pods that move, not with nodes times pods.
func (d *diagnosis) room() {
	nodes := make([]*corev1.Node, len(d.in.Nodes))
	for i := range d.in.Nodes {
		nodes[i] = &d.in.Nodes[i]
	}
	var bound []*corev1.Pod
	leaving := map[string][]*corev1.Pod{}
	for i := range d.in.Pods {
		p := &d.in.Pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		bound = append(bound, p)
		if d.targets[p.Spec.NodeName] && movable(p, d.classes[i]) {
			leaving[p.Spec.NodeName] = append(leaving[p.Spec.NodeName], p)
		}
	}
	cluster := simulate.NewCluster(nodes, bound)
	names := make([]string, 0, len(d.targets))
	for n := range d.targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, target := range names {
		d.roomFor(cluster, target, leaving[target])
	}
	d.pending()
}

// roomFor replays the target's movable pods onto the rest of the cluster with
// the target cordoned, as its drain would, and puts the cluster back.
func (d *diagnosis) roomFor(cluster *simulate.Cluster, target string, leave []*corev1.Pod) {
	if len(leave) == 0 {
		return
	}
	restore := cluster.Snapshot()
	defer restore()
	cluster.Cordon(target)
	for _, p := range leave {
		cluster.Remove(p.Namespace, p.Name)
	}
	for _, p := range leave {
		// A shallow copy is enough: Place only reads the pod (and copies
		// what it keeps).
		replacement := *p
		replacement.Spec.NodeName = ""
		// Fit, which tries only the nodes the pod selects, answers most
		// pods; Place, which checks every node, says why when none fits.
		if cluster.Fit(&replacement) != "" {
			continue
		}
		if where, why := cluster.Place(&replacement); where == "" {
			d.add(Finding{SeverityError, CodeNoRoom, "pod " + p.Namespace + "/" + p.Name, target,
				"if " + target + " were drained now, this pod could not be placed elsewhere: " + why,
				"add capacity (or a node the pod tolerates and selects) before draining, or relax its constraints"})
		}
	}
}

// pending: pods the scheduler cannot place already, with its reason
// (cluster-wide runs only).
func (d *diagnosis) pending() {
	if len(d.in.Targets) > 0 {
		return
	}
	for _, p := range d.in.Pods {
		if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
			continue
		}
		msg := "is Pending and not scheduled"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				msg += ": " + c.Message
			}
		}
		d.add(Finding{SeverityWarning, CodePending, "pod " + p.Namespace + "/" + p.Name, "", msg, ""})
	}
}

// leftovers: nodes cordoned by nobody sluice knows of, and nodes NotReady.
func (d *diagnosis) leftovers() {
	for _, n := range d.in.Nodes {
		if !d.targets[n.Name] {
			continue
		}
		obj := "node " + n.Name
		if n.Spec.Unschedulable && n.Annotations[contract.AnnotationCordonedBy] == "" {
			since := ""
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeUnschedulable && t.TimeAdded != nil {
					since = " for " + d.in.Now.Sub(t.TimeAdded.Time).Round(time.Minute).String()
				}
			}
			d.add(Finding{SeverityWarning, CodeCordonedUnknown, obj, n.Name, "has been cordoned" + since + " with no record of who did it or why",
				"uncordon it (kubectl uncordon) if whatever cordoned it is done, or drain it"})
		}
		if f, ok := maintenanceOver(&n, obj); ok {
			d.add(f)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				d.add(Finding{SeverityError, CodeNodeNotReady, obj, n.Name, fmt.Sprintf("is NotReady (%s) since %s: its pods count as unhealthy in every budget",
					c.Reason, c.LastTransitionTime.Format(time.RFC3339)), "repair or replace the node"})
			}
		}
	}
}

// spotNotice is the notice a spot node's cloud gives before reclaiming it.
func spotNotice(n *corev1.Node) (time.Duration, string) {
	l := n.Labels
	switch {
	case l["kubernetes.azure.com/scalesetpriority"] == "spot":
		return 30 * time.Second, "Azure"
	case l["eks.amazonaws.com/capacityType"] == "SPOT", l["karpenter.sh/capacity-type"] == "spot":
		return 2 * time.Minute, "AWS"
	case l["cloud.google.com/gke-spot"] == "true", l["cloud.google.com/gke-preemptible"] == "true":
		return 30 * time.Second, "GCP"
	}
	return 0, ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}

// maintenanceOver finds a node sluice's controller still holds for a
// maintenance event its agent no longer reports: the controller puts such a
// node back into service once it is Ready, so one that stays is a sign the
// controller is not running, or the node never came back.
func maintenanceOver(n *corev1.Node, obj string) (Finding, bool) {
	raw, ok := n.Annotations[contract.AnnotationMaintenanceState]
	if !ok {
		return Finding{}, false
	}
	var st struct {
		Event string           `json:"event"`
		Type  maintenance.Type `json:"type"`
	}
	if json.Unmarshal([]byte(raw), &st) != nil || st.Event == "" {
		return Finding{}, false
	}
	report, has, err := maintenance.ReportOf(n)
	if err != nil || !has {
		return Finding{}, false
	}
	if e, found := report.Find(st.Event); found && e.Active() {
		return Finding{}, false
	}
	held := "is held"
	if n.Spec.Unschedulable && n.Annotations[contract.AnnotationCordonedBy] != "" {
		held = "is still cordoned"
	}
	return Finding{SeverityWarning, CodeMaintenanceOver, obj, n.Name,
		fmt.Sprintf("%s by sluice for %s event %s, which has ended", held, st.Type, st.Event),
		"the sluice controller uncordons it once the node is Ready: check that the node is Ready and the controller is running (kubectl -n sluice-system logs deploy/sluice-controller)"}, true
}
