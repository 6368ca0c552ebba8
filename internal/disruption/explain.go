package disruption

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// ExplainInput is what Explain weighs about one node, read by the caller at
// one moment from the cluster or a cache.
type ExplainInput struct {
	// Pool is the node's NodePool (nodepool.For); nil when no pool selects
	// the node.
	Pool *v1alpha1.NodePool
	// Node is the node explained.
	Node *corev1.Node
	// Members are the pool's nodes as the NodePool controller counts them;
	// Explain adds Node when it is missing.
	Members []*corev1.Node
	// Pods are the pods bound to the node.
	Pods []*corev1.Pod
	// Maintenance is the maintenance event the controller acts on for the
	// node; nil when it acts on none.
	Maintenance *Maintenance
	// ProviderReady is the pool's ProviderReady condition as the NodePool
	// controller last wrote it; nil when it wrote none.
	ProviderReady *metav1.Condition
	Now           time.Time
}

// Maintenance is the maintenance event the controller acts on for a node,
// and how far it has got.
type Maintenance struct {
	Event string `json:"event"`
	Phase string `json:"phase"`
}

// Explanation says why a node is or is not being disrupted of sluice's own
// accord, what holds it, and what would let it go. Its JSON field names are
// part of `sluice explain -o json`.
type Explanation struct {
	Node string `json:"node"`
	// Pool is nil when no NodePool selects the node.
	Pool *PoolFacts `json:"pool"`
	// Deleting: the Node has a deletion timestamp.
	Deleting bool `json:"deleting"`
	Cordoned bool `json:"cordoned"`
	// CordonedBy is who in sluice cordoned the node
	// (sluice.dev/cordoned-by); empty when sluice did not.
	CordonedBy string      `json:"cordonedBy,omitempty"`
	DrainClaim *DrainClaim `json:"drainClaim,omitempty"`
	// OutOfService says why the node counts against its pool's budgets
	// (budget.Disrupting); empty when it does not.
	OutOfService string `json:"outOfService,omitempty"`
	// Record is the disruption controller's record on the node.
	Record      *Record `json:"record,omitempty"`
	RecordError string  `json:"recordError,omitempty"`
	// RecordFromNewerVersion: a newer sluice wrote the record (RecordError
	// says which version), as after a rollback.
	RecordFromNewerVersion bool         `json:"recordFromNewerVersion,omitempty"`
	Maintenance            *Maintenance `json:"maintenance,omitempty"`
	// Differences are how the node differs from its pool's template.
	Differences []Difference `json:"differences,omitempty"`
	// Expiry is nil when the node never expires.
	Expiry *Expiration `json:"expiry,omitempty"`
	// Candidate is why the node should be replaced; empty when it should
	// not.
	Candidate v1alpha1.DisruptionReason `json:"candidate,omitempty"`
	// OlderCandidates is how many of the pool's candidates, not yet being
	// replaced, go before the node: an earlier method's in the list
	// (Methods), and its own method's older ones.
	OlderCandidates int         `json:"olderCandidates"`
	Protection      *Protection `json:"protection,omitempty"`
	// Budget is the budget for the candidate's reason; nil when the node is
	// no candidate.
	Budget *BudgetFacts `json:"budget,omitempty"`
	// Health is what the pool's repair makes of the node; nil for a pool
	// without spec.repair.
	Health *HealthFacts `json:"health,omitempty"`
	// Reboot is set when the node's OS asked for a reboot.
	Reboot  *RebootFacts `json:"reboot,omitempty"`
	Verdict Verdict      `json:"verdict"`
	// Notes are what else a person should know: who will uncordon the node,
	// that maintenance drains it whatever the verdict.
	Notes []string `json:"notes,omitempty"`
}

// PoolFacts are what Explain read of the node's pool.
type PoolFacts struct {
	Name     string                `json:"name"`
	Provider v1alpha1.ProviderName `json:"provider"`
	// Managed says whether sluice creates and deletes the pool's machines.
	Managed       bool              `json:"managed"`
	ProviderReady *metav1.Condition `json:"providerReady,omitempty"`
	// Paused: spec.disruption.paused, or the pool annotated
	// sluice.dev/do-not-disrupt.
	Paused bool `json:"paused"`
	// Problem is why the pool cannot be applied (nodepool.Validate).
	Problem    *nodepool.Problem `json:"problem,omitempty"`
	Nodes      int               `json:"nodes"`
	Disrupting int               `json:"disrupting"`
}

// DrainClaim is the live claim of a drain holding the node.
type DrainClaim struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// Expiration is when a node expires.
type Expiration struct {
	At      time.Time `json:"at"`
	Expired bool      `json:"expired"`
}

// VerdictCode sums up an explanation in a word a script can branch on.
type VerdictCode string

// Verdicts.
const (
	// VerdictNoPool: no NodePool selects the node; it gets the default
	// maintenance actions and is never replaced.
	VerdictNoPool VerdictCode = "NoPool"
	// VerdictNotCandidate: the node matches its template and has not expired.
	VerdictNotCandidate VerdictCode = "NotCandidate"
	// VerdictReportedOnly: the node would be replaced, but its pool has no
	// provider, so sluice only reports it.
	VerdictReportedOnly VerdictCode = "ReportedOnly"
	// VerdictWillReplace: the budget allows it now; the controller replaces
	// the node at its next pass.
	VerdictWillReplace VerdictCode = "WillReplace"
	// VerdictWaitingForBudget: the node is replaced when the budget allows.
	VerdictWaitingForBudget VerdictCode = "WaitingForBudget"
	// VerdictLimitReached: the pool's spec.limits leave no room for the
	// replacement, which is made before the node goes.
	VerdictLimitReached VerdictCode = "LimitReached"
	// VerdictProtected: a do-not-disrupt annotation on the node or a pod
	// holds it.
	VerdictProtected VerdictCode = "Protected"
	// VerdictPaused: the pool's voluntary disruption is paused.
	VerdictPaused VerdictCode = "Paused"
	// VerdictPoolInvalid: the pool cannot be applied and is left alone.
	VerdictPoolInvalid VerdictCode = "PoolInvalid"
	// VerdictBeingReplaced: the node's replacement is under way.
	VerdictBeingReplaced VerdictCode = "BeingReplaced"
	// VerdictBeingDeleted: the Node is being deleted.
	VerdictBeingDeleted VerdictCode = "BeingDeleted"
	// VerdictRecordUnreadable: the node's disruption record cannot be read,
	// so the controller leaves it alone.
	VerdictRecordUnreadable VerdictCode = "RecordUnreadable"
	// VerdictRecordFromNewerVersion: a newer sluice wrote the node's
	// disruption record (this one was rolled back), so this one leaves the
	// node alone rather than act on half of it.
	VerdictRecordFromNewerVersion VerdictCode = "RecordFromNewerVersion"
)

// Verdict is the one line that answers "will sluice disrupt this node, and
// if not, why not".
type Verdict struct {
	Code    VerdictCode `json:"code"`
	Message string      `json:"message"`
}

// Explain says why the node is or is not being disrupted of sluice's own
// accord, from the same functions the NodePool controller decides with:
// Candidates, Protected, budget.Allowed, nodepool.Validate. It cannot know
// what a controller that is not running would do, nor what the provider will
// answer; the pool's ProviderReady condition tells what it last answered.
func Explain(in ExplainInput) Explanation {
	node, pool, now := in.Node, in.Pool, in.Now
	e := Explanation{
		Node:        node.Name,
		Deleting:    node.DeletionTimestamp != nil,
		Cordoned:    node.Spec.Unschedulable,
		CordonedBy:  ownership.CordonedBy(node),
		Maintenance: in.Maintenance,
	}
	if holder, until, ok := ownership.LiveClaim(node, now); ok {
		e.DrainClaim = &DrainClaim{Holder: holder, Until: until}
	}
	e.OutOfService, _ = budget.Disrupting(node, now)
	rec, recErr := RecordOf(node)
	e.Record = rec
	if recErr != nil {
		e.RecordError, e.RecordFromNewerVersion = recErr.Error(), IsNewerRecord(recErr)
	}
	e.Notes = notes(e)
	if pool == nil {
		e.Verdict = e.decide(nil, nil, now)
		return e
	}
	members := in.Members
	if !slices.ContainsFunc(members, func(n *corev1.Node) bool { return n != nil && n.Name == node.Name }) {
		members = append(slices.Clip(members), node)
	}
	hash := provider.TemplateHash(pool.Spec.Template)
	v := Observe(pool, members, now)
	e.Pool = &PoolFacts{
		Name: pool.Name, Provider: pool.Spec.Provider.NameOrNone(), Managed: pool.Spec.Provider.Manages(),
		ProviderReady: in.ProviderReady,
		Paused:        PoolPaused(pool),
		Problem:       nodepool.Validate(pool, v.Size),
		Nodes:         len(members),
		Disrupting:    v.Disrupting,
	}
	e.Differences = PoolDrift(node, pool, hash)
	if at, expired, ok := Expiry(node, pool.DisruptionSpec(), now); ok {
		e.Expiry = &Expiration{At: at, Expired: expired}
	}
	e.Candidate, e.OlderCandidates = ahead(v.Candidates, node.Name)
	e.Protection = Protected(pool, node, in.Pods, now)
	e.explainHealth(pool, node, members, now)
	switch {
	case e.Candidate != "":
		b := v.Budget(e.Candidate, now)
		e.Budget = &b
	case e.Reboot != nil && pool.Spec.Reboot != nil:
		b := v.Budget(v1alpha1.ReasonRebootRequired, now)
		e.Budget = &b
	}
	e.Verdict = e.decide(pool, members, now)
	return e
}

// ahead returns the reason of the named node's candidacy ("" when it is no
// candidate) and how many candidates not yet being replaced go before it:
// every one of an earlier method in the list, and its own method's older
// ones (candidates are oldest first).
func ahead(candidates []Candidate, node string) (v1alpha1.DisruptionReason, int) {
	rank := func(r v1alpha1.DisruptionReason) int {
		return slices.IndexFunc(Methods, func(m Method) bool { return m.Reason == r })
	}
	i := slices.IndexFunc(candidates, func(c Candidate) bool { return c.Node.Name == node })
	if i < 0 {
		return "", 0
	}
	mine, n := rank(candidates[i].Reason), 0
	for j, c := range candidates {
		if r, err := RecordOf(c.Node); j == i || r != nil || err != nil {
			continue
		}
		if theirs := rank(c.Reason); theirs < mine || theirs == mine && j < i {
			n++
		}
	}
	return candidates[i].Reason, n
}

// PoolPaused says whether the pool's voluntary disruption is stopped as a
// whole (PoolProtection).
func PoolPaused(pool *v1alpha1.NodePool) bool { return PoolProtection(pool) != nil }

// BudgetFacts are a pool's budgets for one reason, now.
type BudgetFacts struct {
	Reason v1alpha1.DisruptionReason `json:"reason"`
	// Allowed is how many more of the pool's nodes may be disrupted now.
	Allowed int `json:"allowed"`
	// Limit is the binding budget's nodes resolved against the pool's size,
	// or the pool's size when no budget binds.
	Limit int `json:"limit"`
	// Disrupting is how many of the pool's nodes count against it.
	Disrupting int `json:"disrupting"`
	// Binding is the budget that bound Allowed, as the user wrote it; empty
	// when none did.
	Binding string `json:"binding,omitempty"`
	// NextChange is when the budgets in force next change; nil when no
	// scheduled window will.
	NextChange *BudgetChange `json:"nextChange,omitempty"`
	// Error says why the budgets cannot be read; they allow nothing then.
	Error string `json:"error,omitempty"`
}

// BudgetChange is a scheduled budget window opening or closing.
type BudgetChange struct {
	At time.Time `json:"at"`
	// Budget is the budget whose window opens or closes.
	Budget string `json:"budget,omitempty"`
	Opens  bool   `json:"opens"`
	// Allowed is how many would be allowed then, if the pool's nodes
	// stayed as they are.
	Allowed int `json:"allowed"`
}

// allowedNow says how many more nodes the budget allows now, of how many.
func (b *BudgetFacts) allowedNow() string {
	if b.Limit == 0 {
		return "none allowed now"
	}
	return fmt.Sprintf("%d of %d allowed now", b.Allowed, b.Limit)
}

// recordVerdict is the verdict on a node whose record this sluice cannot
// act on: unreadable, or a newer sluice's.
func (e *Explanation) recordVerdict() Verdict {
	if e.RecordFromNewerVersion {
		return Verdict{VerdictRecordFromNewerVersion, fmt.Sprintf("left alone: %s; or remove the annotation (kubectl annotate node %s %s-) to let this one decide again",
			e.RecordError, e.Node, contract.AnnotationDisruption)}
	}
	return Verdict{VerdictRecordUnreadable, fmt.Sprintf("left alone: %s; remove the annotation (kubectl annotate node %s %s-) to let sluice decide again",
		e.RecordError, e.Node, contract.AnnotationDisruption)}
}

// decide is the verdict, in the order the controller meets the questions.
func (e *Explanation) decide(pool *v1alpha1.NodePool, members []*corev1.Node, now time.Time) Verdict {
	rec := e.Record
	switch {
	case e.Deleting:
		return Verdict{VerdictBeingDeleted, e.deleting()}
	case pool == nil:
		return Verdict{VerdictNoPool, "no pool: defaults only: no NodePool selects the node, so sluice answers its maintenance events with the default actions and never replaces it"}
	case e.RecordError != "":
		return e.recordVerdict()
	case e.Pool.Problem != nil:
		msg := fmt.Sprintf("left alone: pool %s cannot be applied (%s): %s", pool.Name, e.Pool.Problem.Reason, e.Pool.Problem.Message)
		if rec != nil {
			msg += fmt.Sprintf("; the node's replacement (%s, %s) waits too", rec.Reason, rec.Phase)
		}
		return Verdict{VerdictPoolInvalid, msg}
	case rec != nil && (rec.Phase == PhaseDraining && rec.Reason != v1alpha1.ReasonUpgrade || rec.Phase == PhaseRebooting):
		return Verdict{VerdictBeingRepaired, e.rebooting(pool, now)}
	case rec != nil:
		return Verdict{VerdictBeingReplaced, e.replacing(members, now)}
	}
	if v, ok := e.healthVerdict(pool, now); ok {
		return v
	}
	return e.candidateVerdict(pool, members, now)
}

// candidateVerdict is the verdict on a node no record or health concerns:
// a candidate or not, protected, waiting for the budget or the limits.
func (e *Explanation) candidateVerdict(pool *v1alpha1.NodePool, members []*corev1.Node, now time.Time) Verdict {
	switch {
	case e.Candidate == "":
		return Verdict{VerdictNotCandidate, e.notCandidate(pool, now)}
	case !e.Pool.Managed:
		return Verdict{VerdictReportedOnly, fmt.Sprintf("would be replaced (%s: %s), but reported only: pool %s has no provider (provider none), so sluice creates and deletes no machine in it; replace the node yourself, or give the pool a provider",
			e.Candidate, e.why(), pool.Name)}
	case e.Protection != nil && (e.Protection.Reason == ReasonPaused || e.Protection.Reason == ReasonPoolDoNotDisrupt):
		return Verdict{VerdictPaused, "paused: " + e.Protection.Message}
	case e.Protection != nil:
		return Verdict{VerdictProtected, fmt.Sprintf("protected: %s; then it is replaced (%s) when the budget allows", e.Protection.Message, e.Candidate)}
	}
	b := e.Budget
	if b.Error != "" {
		return Verdict{VerdictWaitingForBudget, fmt.Sprintf("will be replaced (%s) once the pool's budgets can be read: %s", e.Candidate, b.Error)}
	}
	if b.Allowed < 1 {
		return Verdict{VerdictWaitingForBudget, fmt.Sprintf("will be replaced (%s) when the budget allows: %s (%s)%s%s",
			e.Candidate, b.allowedNow(), e.budgetClause(), e.nextWindow(now), e.providerClause())}
	}
	if l := pool.Spec.Limits; l != nil && l.Nodes != nil {
		if launching := launchingIn(members); len(members)+launching >= int(*l.Nodes) {
			return Verdict{VerdictLimitReached, fmt.Sprintf("will be replaced (%s) when the pool has room: its replacement is made before it goes, and the pool has %d nodes and %d replacements on their way against spec.limits.nodes %d; raise the limit",
				e.Candidate, len(members), launching, *l.Nodes)}
		}
	}
	if e.OlderCandidates >= b.Allowed {
		older := "up to 1 candidate ahead of it goes first (an earlier method's, or older)"
		if e.OlderCandidates > 1 {
			older = fmt.Sprintf("up to %d candidates ahead of it go first (an earlier method's, or older)", e.OlderCandidates)
		}
		return Verdict{VerdictWaitingForBudget, fmt.Sprintf("will be replaced (%s) when the budget allows: %s (%s), and %s%s%s",
			e.Candidate, b.allowedNow(), e.budgetClause(), older, e.nextWindow(now), e.providerClause())}
	}
	return Verdict{VerdictWillReplace, fmt.Sprintf("will be replaced (%s) at the controller's next pass: %s (%s); its replacement is made first, then it is drained and deleted%s",
		e.Candidate, b.allowedNow(), e.budgetClause(), e.providerClause())}
}

func (e *Explanation) deleting() string {
	msg := "being deleted"
	if r := e.Record; r != nil {
		msg += fmt.Sprintf(" (%s)", r.Reason)
	}
	if e.Pool != nil && e.Pool.Managed {
		return msg + ": sluice drains it under its pods' budgets, then deletes its machine and lets the Node go"
	}
	return msg + ": it goes once Kubernetes and whatever holds its finalizers let it"
}

func (e *Explanation) replacing(members []*corev1.Node, now time.Time) string {
	r := e.Record
	switch {
	case r.Phase == PhaseLaunching && r.Replacement == "":
		return fmt.Sprintf("being replaced (%s) since %s: the provider is being asked for its replacement; the node counts against the pool's budgets meanwhile",
			r.Reason, when(r.Since, now))
	case r.Phase == PhaseLaunching:
		if i := slices.IndexFunc(members, func(n *corev1.Node) bool { return n != nil && provider.MachineName(n) == r.Replacement }); i >= 0 && budget.NodeReady(members[i]) {
			return fmt.Sprintf("being replaced (%s): replacement %s is Ready; the controller deletes this node next (drained first, under its pods' budgets)", r.Reason, r.Replacement)
		}
		msg := fmt.Sprintf("being replaced (%s): replacement %s is on its way", r.Reason, r.Replacement)
		if r.LaunchedAt != nil {
			msg += " (launched " + when(*r.LaunchedAt, now) + ")"
		}
		return msg + "; this node is drained and deleted once the replacement is a Ready node"
	case r.Phase == PhaseTerminating:
		return fmt.Sprintf("being replaced (%s): the node is being drained and its machine deleted", r.Reason)
	}
	return fmt.Sprintf("being replaced (%s, phase %s)", r.Reason, r.Phase)
}

func (e *Explanation) notCandidate(pool *v1alpha1.NodePool, now time.Time) string {
	template := "matches its template"
	if pool.Spec.Template == nil {
		template = "its pool sets no template"
	}
	expiry := "never expires (spec.disruption.expireAfter is Never)"
	if e.Expiry != nil {
		expiry = "expires at " + when(e.Expiry.At, now)
	}
	return "not a candidate: " + template + " and " + expiry
}

// why says in a few words what makes the node a candidate.
func (e *Explanation) why() string {
	if e.Candidate == v1alpha1.ReasonDrifted || e.Candidate == v1alpha1.ReasonUpgrade {
		parts := make([]string, len(e.Differences))
		for i, d := range e.Differences {
			parts[i] = d.String()
		}
		return strings.Join(parts, "; ")
	}
	if e.Expiry != nil {
		return "expired at " + e.Expiry.At.UTC().Format(time.RFC3339)
	}
	return string(e.Candidate)
}

// budgetClause says which budget binds and how full the pool is.
func (e *Explanation) budgetClause() string {
	b := e.Budget
	binding := "no budget applies to " + string(b.Reason)
	if b.Binding != "" {
		binding = "budget " + b.Binding + " binds"
	}
	return fmt.Sprintf("%s; %d of the pool's %d nodes are out of service", binding, b.Disrupting, e.Pool.Nodes)
}

// nextWindow says when the budgets change, for a node that waits for them.
func (e *Explanation) nextWindow(now time.Time) string {
	c := e.Budget.NextChange
	if c == nil {
		return "; no budget window is scheduled to change, so it goes once a node out of service is back or gone"
	}
	verb := "the budgets change"
	switch {
	case c.Budget != "" && c.Opens:
		verb = "the next window (" + c.Budget + ") opens"
	case c.Budget != "":
		verb = "the window of " + c.Budget + " closes"
	}
	return fmt.Sprintf(", %s at %s (then %d allowed)", verb, when(c.At, now), c.Allowed)
}

// providerClause warns that the provider last failed.
func (e *Explanation) providerClause() string {
	c := e.Pool.ProviderReady
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	return fmt.Sprintf("; but the pool's provider is not ready (%s: %s)", c.Reason, c.Message)
}

// notes say what the facts mean for a person about to act on the node.
func notes(e Explanation) []string {
	var out []string
	if m := e.Maintenance; m != nil {
		out = append(out, fmt.Sprintf("maintenance event %s is being handled (phase %s): maintenance drains the node whatever voluntary disruption decides", m.Event, m.Phase))
	}
	switch by := e.CordonedBy; {
	case !e.Cordoned:
	case by == "":
		out = append(out, "cordoned outside sluice (no "+contract.AnnotationCordonedBy+"): sluice never uncordons it; uncordon it yourself (kubectl uncordon "+e.Node+") when it should take pods again")
	case by == ownership.OwnerCLI:
		out = append(out, "cordoned by a person's `sluice drain`: sluice never uncordons it; uncordon it yourself when it should take pods again")
	case ownership.IsMaintenanceOwner(by):
		out = append(out, "cordoned for maintenance ("+by+"): uncordoned when the event is over")
	}
	if e.OutOfService != "" {
		out = append(out, "counts against its pool's budgets now: "+e.OutOfService)
	}
	return out
}

// launchingIn counts the nodes whose replacement is on its way.
func launchingIn(members []*corev1.Node) int {
	n := 0
	for _, m := range members {
		if r, err := RecordOf(m); err == nil && r != nil && r.Phase == PhaseLaunching && m.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// ready says whether the node's Ready condition is True.
// when is a time as RFC 3339, and how far from now.
func when(t, now time.Time) string {
	s := t.UTC().Format(time.RFC3339)
	if d := t.Sub(now); d >= 0 {
		return s + " (in " + duration.HumanDuration(d) + ")"
	}
	return s + " (" + duration.HumanDuration(now.Sub(t)) + " ago)"
}
