package drain

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// replicaOf is a pod of deployment name, as its ReplicaSet creates it.
func replicaOf(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "shop", Name: name + "-5d9c7b-x2x4k",
		Labels:          map[string]string{"app": name, "pod-template-hash": "5d9c7b"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-5d9c7b", Controller: ptr.To(true)}},
	}}
}

// judged is a budget over app=name as the disruption controller left it.
func judged(name string, minAvailable, maxUnavailable string, desired, expected int32) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 2},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, DesiredHealthy: desired, ExpectedPods: expected,
			CurrentHealthy: expected},
	}
	if minAvailable != "" {
		pdb.Spec.MinAvailable = ptr.To(intstr.Parse(minAvailable))
	}
	if maxUnavailable != "" {
		pdb.Spec.MaxUnavailable = ptr.To(intstr.Parse(maxUnavailable))
	}
	return pdb
}

// The fix a deadlocked budget's message gives must free a pod when applied:
// the numbers are the disruption controller's, percentages rounded up.
func TestDeadlockRemedies(t *testing.T) {
	const head = "PodDisruptionBudget web "
	for _, tc := range []struct {
		name                     string
		minAvailable, maxUnavail string
		desired, expected        int32
		want                     string
	}{
		{"minAvailable equals replicas", "3", "", 3, 3,
			head + "(minAvailable 3) needs 3 healthy of 3 pods, so it never allows an eviction: " +
				"scale deployment web to 4, or lower minAvailable on PodDisruptionBudget web to 2"},
		{"minAvailable above replicas", "5", "", 5, 3,
			head + "(minAvailable 5) needs 5 healthy of 3 pods, so it never allows an eviction: " +
				"scale deployment web to 6, or lower minAvailable on PodDisruptionBudget web to 2"},
		{"minAvailable 1 of 1", "1", "", 1, 1,
			head + "(minAvailable 1) needs 1 healthy of 1 pods, so it never allows an eviction: " +
				"scale deployment web to 2, or lower minAvailable on PodDisruptionBudget web to 0"},
		{"90% of 3 takes 10 replicas", "90%", "", 3, 3,
			head + "(minAvailable 90%) needs 3 healthy of 3 pods, so it never allows an eviction: " +
				"scale deployment web to 10, or lower minAvailable on PodDisruptionBudget web to 66%"},
		{"50% of 1", "50%", "", 1, 1,
			head + "(minAvailable 50%) needs 1 healthy of 1 pods, so it never allows an eviction: " +
				"scale deployment web to 2 (with 1 pod no minAvailable percentage above 0% allows an eviction)"},
		{"50% of 2 rounds up to both", "51%", "", 2, 2,
			head + "(minAvailable 51%) needs 2 healthy of 2 pods, so it never allows an eviction: " +
				"scale deployment web to 3, or lower minAvailable on PodDisruptionBudget web to 50%"},
		{"100% of 3", "100%", "", 3, 3,
			head + "(minAvailable 100%) needs 3 healthy of 3 pods, so it never allows an eviction: " +
				"lower minAvailable on PodDisruptionBudget web to 66% (at 100% no number of replicas allows an eviction)"},
		{"100% of 1", "100%", "", 1, 1,
			head + "(minAvailable 100%) needs 1 healthy of 1 pods, so it never allows an eviction: " +
				"at 100% no number of replicas allows an eviction, and with 1 pod no percentage above 0% does: " +
				"scale deployment web to 2 and lower minAvailable on PodDisruptionBudget web to 50%, or use maxUnavailable 1 instead"},
		{"maxUnavailable 0", "", "0", 3, 3,
			head + "(maxUnavailable 0) needs 3 healthy of 3 pods, so it never allows an eviction: " +
				"raise maxUnavailable on PodDisruptionBudget web to at least 1"},
		{"maxUnavailable 0%", "", "0%", 3, 3,
			head + "(maxUnavailable 0%) needs 3 healthy of 3 pods, so it never allows an eviction: " +
				"raise maxUnavailable on PodDisruptionBudget web to at least 1, or to any percentage above 0% (it rounds up to a whole pod)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dead := staticDeadlock(judged("web", tc.minAvailable, tc.maxUnavail, tc.desired, tc.expected), replicaOf("web"))
			if !dead {
				t.Fatalf("not a deadlock")
			}
			if c.verdict != hold || c.reason != ReasonPDBDeadlock || c.message != tc.want {
				t.Errorf("got %v %s\n  %q\nwant hold PDBDeadlock\n  %q", c.verdict, c.reason, c.message, tc.want)
			}
		})
	}
}

// The replica count and the percentage a remedy names are the extremes the
// controller's arithmetic allows: the fewest replicas, the largest percentage.
func TestPercentageRemediesAreTight(t *testing.T) {
	allows := func(pct, replicas int) bool {
		v := intstr.FromString(strconv.Itoa(pct) + "%")
		desired, err := intstr.GetScaledValueFromIntOrPercent(&v, replicas, true)
		return err == nil && replicas-desired >= 1
	}
	for pct := 1; pct <= 100; pct++ {
		r, ok := replicasAllowingOne(intstr.FromString(strconv.Itoa(pct) + "%"))
		if ok != (pct < 100) || (ok && (!allows(pct, int(r)) || (r > 1 && allows(pct, int(r)-1)))) {
			t.Errorf("minAvailable %d%%: scale to %d (%v), which is not the fewest replicas that allow an eviction", pct, r, ok)
		}
	}
	for e := int32(1); e <= 200; e++ {
		p, ok := percentAllowingOne(e)
		if ok != (e > 1) || (ok && (!allows(int(p), int(e)) || allows(int(p)+1, int(e)))) {
			t.Errorf("%d pods: lower to %d%% (%v), which is not the largest percentage that allows an eviction", e, p, ok)
		}
	}
}
