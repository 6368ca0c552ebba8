package maintenance

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Phase is how far the controller has got with an event.
type Phase string

// Phases.
const (
	PhaseObserved Phase = "Observed" // recorded; action None, or not started yet
	PhaseCordoned Phase = "Cordoned"
	PhaseDraining Phase = "Draining"
	PhaseDrained  Phase = "Drained"
	PhaseBlocked  Phase = "Blocked"
)

// state is the controller's state for the event it acts on, kept on the node
// (contract.AnnotationMaintenanceState).
type state struct {
	Event  string             `json:"event"`
	Type   maintenance.Type   `json:"type"`
	Source maintenance.Source `json:"source"`
	Pool   string             `json:"pool,omitempty"`
	Action Action             `json:"action"`
	OptIn  bool               `json:"optIn,omitempty"` // drain only the pods opted in (Freeze)
	// ApproveAtOnce: the VM's owner asked for the event and the pool
	// approves such events at once, doing nothing else.
	ApproveAtOnce bool       `json:"approveAtOnce,omitempty"`
	Deadline      *time.Time `json:"deadline,omitempty"`
	Phase         Phase      `json:"phase"`
	Tainted       bool       `json:"tainted,omitempty"`
	Approved      bool       `json:"approved,omitempty"`
	Blocked       *time.Time `json:"blocked,omitempty"` // when the last drain ended blocked
	Seen          time.Time  `json:"seen"`
}

func stateOf(node *corev1.Node) (state, bool) {
	var r state
	raw, ok := node.Annotations[contract.AnnotationMaintenanceState]
	if !ok || json.Unmarshal([]byte(raw), &r) != nil || r.Event == "" {
		return state{}, false
	}
	return r, true
}

func (r state) encode() string {
	data, _ := json.Marshal(r) // plain data: cannot fail
	return string(data)
}

// PhaseOf reads which event the controller is acting on for the node, and how
// far it has got; ok is false when it acts on none.
func PhaseOf(node *corev1.Node) (event string, phase Phase, ok bool) {
	st, ok := stateOf(node)
	return st.Event, st.Phase, ok
}
