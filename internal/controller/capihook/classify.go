package capihook

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// deletion is why Cluster API deletes a Machine, as sluice counts it.
type deletion struct {
	// reason is the record's and the drain's reason.
	reason v1alpha1.DisruptionReason
	// budget is the reason whose budgets hold it ("" for those that name
	// no reason).
	budget v1alpha1.DisruptionReason
	// involuntary: a repair, started at once past the budgets.
	involuntary bool
	what        string
}

// The reason a MachineHealthCheck remediation is recorded with: the
// Machine is broken, so the budgets do not hold it.
const reasonRemediation v1alpha1.DisruptionReason = "Remediation"

// classify reads Cluster API's own conditions: a MachineHealthCheck marks a
// Machine it remediates (HealthCheckSucceeded or OwnerRemediated False); a
// rollout leaves the old Machines not UpToDate; anything else (a scale-down,
// kubectl delete machine) is counted as a person's deletion.
func classify(m *unstructured.Unstructured) deletion {
	switch {
	case conditionIs(m, "OwnerRemediated", "False") || conditionIs(m, "HealthCheckSucceeded", "False"):
		return deletion{reason: reasonRemediation, involuntary: true, what: "a MachineHealthCheck remediation, involuntary"}
	case conditionIs(m, "UpToDate", "False"):
		return deletion{reason: v1alpha1.ReasonUpgrade, budget: v1alpha1.ReasonUpgrade, what: "a rollout of its MachineDeployment, voluntary, Upgrade budgets"}
	}
	return deletion{reason: disruption.ReasonDeleted, what: "a scale-down or a person's deletion, voluntary, budgets that name no reason"}
}

// conditionIs says whether the Machine's v1beta2 condition typ has status.
func conditionIs(m *unstructured.Unstructured, typ, status string) bool {
	conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if ok && cm["type"] == typ {
			return cm["status"] == status
		}
	}
	return false
}
