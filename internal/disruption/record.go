package disruption

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Phase is where a node's replacement stands.
type Phase string

// Phases of a disrupted node (docs/design/pools.md).
const (
	// PhaseLaunching: the node counts against its pool's budget; its
	// replacement is being made (Replacement names it once the provider
	// accepted it).
	PhaseLaunching Phase = "Launching"
	// PhaseTerminating: the node is being deleted: drained under its pods'
	// budgets, then its machine deleted.
	PhaseTerminating Phase = "Terminating"
	// PhaseRemoving: consolidation takes the node away without a
	// replacement (its pods fit on the nodes that stay); it counts against
	// the budget, and is deleted next.
	PhaseRemoving Phase = "Removing"
	// PhaseDraining: an upgrade drains the node (cordoned) before it is
	// deleted, within the pool's drainTimeout from DrainStarted.
	PhaseDraining Phase = "Draining"
	// PhaseSoaking: an upgrade drained the node; it waits, cordoned and
	// empty, for the pool's nodeSoakDuration from Drained, then is deleted.
	PhaseSoaking Phase = "Soaking"
	// PhaseRebooting: the node was rebooted in place (a repair's first
	// step, or a reboot its OS asked for); it waits to be healthy again
	// from RebootedAt.
	PhaseRebooting Phase = "Rebooting"
)

// ReasonDeleted is the record's reason for a node someone deleted: budgets
// that name no reasons limit it.
const ReasonDeleted v1alpha1.DisruptionReason = "Deleted"

// RecordVersion is the version of the Record this sluice writes and the
// newest it reads. A change an older controller would misread (a field whose
// absence it would take to mean something else, a phase it does not know)
// raises it; adding a field an older controller may ignore does not. A record
// without a version is version 1 (the first releases wrote none).
const RecordVersion = 2

// needs is the oldest RecordVersion that reads the record right: 2 for the
// reboot's phases (an older sluice would leave such a node counted forever),
// 1 for every other record, so that a rollback still finishes those.
func (r Record) needs() int {
	if r.Phase == PhaseRebooting || r.Phase == PhaseDraining && r.Reason != v1alpha1.ReasonUpgrade {
		return 2
	}
	return 1
}

// Record is the disruption controller's note on a node it is taking away,
// kept in the node's contract.AnnotationDisruption so that a restarted or
// new leader resumes where the last one stopped.
type Record struct {
	// Version is the RecordVersion of the sluice that wrote it.
	Version     int                       `json:"v,omitempty"`
	Reason      v1alpha1.DisruptionReason `json:"reason"`
	Phase       Phase                     `json:"phase"`
	Since       time.Time                 `json:"since"`
	Replacement string                    `json:"replacement,omitempty"`
	// ReplacementProviderID is the replacement machine's providerID, noted
	// once the provider accepted it when its Node is not named after it (a
	// cloud's kubelet names it): the Node is known by it from registration.
	ReplacementProviderID string `json:"replacementProviderID,omitempty"`
	// InstanceType is the replacement's type when the record chose one
	// (consolidation, for a cheaper node); empty means the template's.
	InstanceType string `json:"instanceType,omitempty"`
	// LaunchedAt is when the provider accepted the replacement.
	LaunchedAt *time.Time `json:"launchedAt,omitempty"`
	Message    string     `json:"message,omitempty"`
	// DrainFirst: an upgrade's maxUnavailable slot; the node is drained
	// without waiting for its replacement to be Ready.
	DrainFirst bool `json:"drainFirst,omitempty"`
	// DrainStarted and Drained time an upgrade's drain of the node.
	DrainStarted *time.Time `json:"drainStarted,omitempty"`
	Drained      *time.Time `json:"drained,omitempty"`
	// RebootedAt is when the provider was asked to reboot the node
	// (PhaseRebooting).
	RebootedAt *time.Time `json:"rebootedAt,omitempty"`
	// BootID is the node's boot before that reboot: a new one says the
	// reboot happened.
	BootID string `json:"bootID,omitempty"`
}

// RecordOf reads the node's record; nil when it has none. An unreadable
// record is an error, and so is one a newer sluice wrote (a
// *NewerRecordError: this one would read half of it): the caller leaves such
// a node alone and says so.
func RecordOf(node *corev1.Node) (*Record, error) {
	raw, ok := node.Annotations[contract.AnnotationDisruption]
	if !ok {
		return nil, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("reading %s on node %s: %w", contract.AnnotationDisruption, node.Name, err)
	}
	if r.Version > RecordVersion {
		return nil, &NewerRecordError{Node: node.Name, Version: r.Version}
	}
	return &r, nil
}

// NewerRecordError is a record written by a newer sluice than this one, as
// after a rollback: its meaning may have changed in ways this one cannot see.
type NewerRecordError struct {
	Node    string
	Version int
}

func (e *NewerRecordError) Error() string {
	return fmt.Sprintf("%s on node %s was written by a newer sluice (record version %d; this one reads up to %d): roll sluice forward to finish it",
		contract.AnnotationDisruption, e.Node, e.Version, RecordVersion)
}

// EventRecordFromNewerVersion is the Event reason on a node left alone
// because a newer sluice wrote its record.
const EventRecordFromNewerVersion = "RecordFromNewerVersion"

// IsNewerRecord reports whether err is (or wraps) a *NewerRecordError.
func IsNewerRecord(err error) bool {
	var newer *NewerRecordError
	return errors.As(err, &newer)
}

// String is the record as the annotation holds it, stamped with the oldest
// RecordVersion that reads it right.
func (r Record) String() string {
	r.Version = r.needs()
	b, err := json.Marshal(r)
	if err != nil { // a struct of strings and times always marshals
		panic(err)
	}
	return string(b)
}

// Replacements names the nodes made to replace others of nodes that are
// still there, from the records of the nodes they replace. Until the node
// it replaces is gone, a replacement does not add to the pool's size, and
// does not count as disrupted while it boots.
func Replacements(nodes []*corev1.Node) map[string]bool {
	machines, ids := map[string]bool{}, map[string]bool{}
	for _, n := range nodes {
		if r, err := RecordOf(n); err == nil && r != nil && r.Replacement != "" {
			machines[r.Replacement] = true
			if r.ReplacementProviderID != "" {
				ids[provider.IDKey(r.ReplacementProviderID)] = true
			}
		}
	}
	out := map[string]bool{}
	for _, n := range nodes {
		if machines[provider.MachineName(n)] || n.Spec.ProviderID != "" && ids[provider.IDKey(n.Spec.ProviderID)] {
			out[n.Name] = true
		}
	}
	return out
}
