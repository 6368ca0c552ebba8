package drain

import (
	"fmt"
	"strings"
	"time"
)

// Reason is a stable, machine-readable code for why a pod did what it did.
type Reason string

// Reasons. The set only grows; tools may match on these strings.
const (
	// ReasonDaemonSetPod: managed by a DaemonSet, which would recreate it on the
	// node (with --evict-daemonsets, it is evicted last and carries this reason).
	ReasonDaemonSetPod Reason = "DaemonSetPod"
	// ReasonMirrorPod: the API mirror of a static pod; only the kubelet can remove it.
	ReasonMirrorPod Reason = "MirrorPod"
	// ReasonUnreplicated: no controller would recreate the pod elsewhere.
	ReasonUnreplicated Reason = "Unreplicated"
	// ReasonLocalStorage: the pod's emptyDir data would be lost.
	ReasonLocalStorage Reason = "LocalStorage"
	// ReasonPDBBlocked: a PodDisruptionBudget allows no disruption right now.
	ReasonPDBBlocked Reason = "PDBBlocked"
	// ReasonPDBWaitingForPods: a PodDisruptionBudget allows no disruption
	// while some of its pods are still starting (Pending, or Running and not
	// yet Ready within what their probes allow); the drain waits for them, as
	// a rollout needs.
	ReasonPDBWaitingForPods Reason = "PDBWaitingForPods"
	// ReasonPDBDeadlock: a PodDisruptionBudget will not allow a disruption without a change.
	ReasonPDBDeadlock Reason = "PDBDeadlock"
	// ReasonMultiplePDBs: more than one budget selects the pod; the API server refuses to evict it.
	ReasonMultiplePDBs Reason = "MultiplePDBs"
	// ReasonDoNotDisrupt: the pod asks not to be disrupted (sluice.dev/do-not-disrupt and the
	// Karpenter and cluster-autoscaler equivalents).
	ReasonDoNotDisrupt Reason = "DoNotDisrupt"
	// ReasonAdmissionDenied: an admission webhook or policy refused the eviction.
	ReasonAdmissionDenied Reason = "AdmissionDenied"
	// ReasonDeadlineForced: deleted despite a budget because the deadline left no other way.
	ReasonDeadlineForced Reason = "DeadlineForced"
	// ReasonTerminating: the pod was already terminating; the drain waited for it.
	ReasonTerminating Reason = "AlreadyTerminating"
	// ReasonTimeout: the drain's --timeout or --deadline passed with the pod still there.
	ReasonTimeout Reason = "Timeout"
	// ReasonError: an unexpected API error; the message has it.
	ReasonError Reason = "Error"
)

// PodOutcome is what happened to a pod.
type PodOutcome string

// Pod outcomes. Dry runs report the Would* forms.
const (
	PodEvicted PodOutcome = "Evicted"
	PodDeleted PodOutcome = "Deleted"
	PodSkipped PodOutcome = "Skipped"
	PodBlocked PodOutcome = "Blocked"
	PodFailed  PodOutcome = "Failed"
	// PodNotEvicted: the drain stopped before this pod's turn (another pod
	// can never leave, so nothing was disturbed).
	PodNotEvicted PodOutcome = "NotEvicted"
	PodWouldEvict PodOutcome = "WouldEvict"
	// PodWouldWait: a budget would hold the pod until replacements are Ready.
	PodWouldWait  PodOutcome = "WouldWait"
	PodWouldSkip  PodOutcome = "WouldSkip"
	PodWouldBlock PodOutcome = "WouldBlock"
)

// NodeOutcome is how a node's drain ended.
type NodeOutcome string

// Node outcomes.
const (
	// NodeDrained: every pod that had to leave has left.
	NodeDrained NodeOutcome = "Drained"
	// NodeBlocked: at least one pod could not leave; the pods say why.
	NodeBlocked NodeOutcome = "Blocked"
	// NodeFailed: the drain could not run (node missing, held by another drain, API errors).
	NodeFailed NodeOutcome = "Failed"
	// NodeWouldDrain / NodeWouldBlock: dry-run verdicts.
	NodeWouldDrain NodeOutcome = "WouldDrain"
	NodeWouldBlock NodeOutcome = "WouldBlock"
)

// Report is the result of one Drain call.
type Report struct {
	DryRun     bool         `json:"dryRun"`
	StartedAt  time.Time    `json:"startedAt"`
	FinishedAt time.Time    `json:"finishedAt"`
	Deadline   *time.Time   `json:"deadline,omitempty"`
	Nodes      []NodeReport `json:"nodes"`
}

// NodeReport is one node's drain.
type NodeReport struct {
	Name     string      `json:"name"`
	Outcome  NodeOutcome `json:"outcome"`
	Message  string      `json:"message,omitempty"`
	Cordoned bool        `json:"cordoned"`
	Seconds  float64     `json:"seconds"`
	Pods     []PodReport `json:"pods"`
}

// PodReport is one pod's outcome. Reason and Message are set whenever the pod
// did not simply leave, and for warnings (emptyDir data deleted, no controller).
type PodReport struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Outcome   PodOutcome `json:"outcome"`
	Reason    Reason     `json:"reason,omitempty"`
	Message   string     `json:"message,omitempty"`
	PDB       string     `json:"pdb,omitempty"`
	// BlockedSince is when the pod was first refused, for pods still blocked.
	BlockedSince *time.Time `json:"blockedSince,omitempty"`
	// GracePeriodSeconds is the grace the pod was given when it was asked to leave.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	// Seconds from the start of the node's drain until the pod was gone.
	GoneAfterSeconds *float64 `json:"goneAfterSeconds,omitempty"`
}

// Drained reports whether every node drained (or would, in a dry run).
func (r *Report) Drained() bool {
	for _, n := range r.Nodes {
		if n.Outcome != NodeDrained && n.Outcome != NodeWouldDrain {
			return false
		}
	}
	return true
}

// Failed reports whether any node's drain could not run at all.
func (r *Report) Failed() bool {
	for _, n := range r.Nodes {
		if n.Outcome == NodeFailed {
			return true
		}
	}
	return false
}

// Left returns the pods that had to leave and had not when the drain ended,
// each with the reason and message that say why (a budget, a deadline that
// came while the pod was still terminating, an API error).
func (n *NodeReport) Left() []PodReport {
	var out []PodReport
	for _, p := range n.Pods {
		switch p.Outcome {
		case PodSkipped, PodWouldEvict, PodWouldSkip, PodWouldWait, PodWouldBlock:
			continue
		}
		if p.GoneAfterSeconds != nil || (p.Outcome == PodDeleted || p.Outcome == PodEvicted) && p.Reason != ReasonTimeout {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Summary says in one line which pods did not leave and why, at most limit of
// them (then "and N more").
func Summary(left []PodReport, limit int) string {
	parts := make([]string, 0, min(len(left), limit)+1)
	for i, p := range left {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(left)-limit))
			break
		}
		reason := string(p.Reason)
		if reason == "" {
			reason = string(p.Outcome)
		}
		parts = append(parts, fmt.Sprintf("%s/%s %s (%s)", p.Namespace, p.Name, reason, p.Message))
	}
	return strings.Join(parts, "; ")
}
