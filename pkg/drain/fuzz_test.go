package drain

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// FuzzClaim reads arbitrary values of the two annotations through which
// drains share a node, sluice.dev/drain (the claim) and
// sluice.dev/cordoned-by, as every reader does: LiveClaim (budgets, Explain,
// the claims controller), CordonedBy and Uncordon. Nothing may panic; a
// claim that reads re-encodes to one that reads back the same; a live claim
// lapses no sooner than now and no later than its renewal plus claimTTL; and
// Uncordon puts a node back only for the owner of its cordon, never under a
// live claim, and otherwise leaves the node as it was.
func FuzzClaim(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	claimAt := func(id, holder string, renewed time.Time) string {
		data, _ := json.Marshal(claim{ID: id, Holder: holder, Started: renewed.Add(-time.Minute), Renewed: renewed})
		return string(data)
	}
	for _, seed := range []struct {
		claim, cordonedBy string
		unschedulable     bool
		age               int64
	}{
		{claimAt("d-1", "sluice drain@laptop", now.Add(-10*time.Second)), OwnerCLI, true, 0},
		{claimAt("d-2", "sluice-controller", now.Add(-time.Minute)), MaintenanceOwner("C7061BAC-AFDC-4513-B24B-AA5F13A16123"), true, 0},
		{claimAt("", "", now), MaintenanceOwner("x"), true, 0},
		{claimAt("d-3", "alice", now.Add(time.Hour)), OwnerCLI, false, int64(time.Hour)},
		{`{"id": "d-4", "renewed": "9999-12-31T23:59:59Z", "deadline": "0000-01-01T00:00:00Z"}`, "", true, 0},
		{`{"id": "d-5", "renewed": "0001-01-01T00:00:00Z"}`, "maintenance/", true, 0},
		{`{"renewed": "yesterday"}`, "kubectl", true, 0}, {`null`, "", false, 0}, {``, OwnerCLI, true, 0},
	} {
		f.Add(seed.claim, seed.cordonedBy, seed.unschedulable, seed.age)
	}
	f.Fuzz(func(t *testing.T, raw, cordonedBy string, unschedulable bool, age int64) {
		at := now.Add(time.Duration(age))
		fresh := func() *corev1.Node {
			return &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{contract.AnnotationDrain: raw, contract.AnnotationCordonedBy: cordonedBy}},
				Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
			}
		}
		node := fresh()
		c, readable := claimOf(node)
		if readable {
			data, err := json.Marshal(c)
			if err != nil {
				t.Fatalf("claim %q reads as %+v, which does not encode: %v", raw, c, err)
			}
			back, ok := claimOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AnnotationDrain: string(data)}}})
			if again, _ := json.Marshal(back); !ok || string(again) != string(data) {
				t.Fatalf("claim %q encodes as %s, which reads back as %s", raw, data, again)
			}
		}
		holder, until, live := LiveClaim(node, at)
		switch {
		case live && (!readable || holder != c.Holder || !until.Equal(c.Renewed.Add(claimTTL)) || until.Before(at)):
			t.Fatalf("claim %q at %s: LiveClaim = %q, %s", raw, at, holder, until)
		case !live && readable && !c.Renewed.Add(claimTTL).Before(at):
			t.Fatalf("claim %q at %s: renewed %s, yet not live", raw, at, c.Renewed)
		}
		if got := CordonedBy(node); unschedulable && got != cordonedBy || !unschedulable && got != "" {
			t.Fatalf("cordoned-by %q, unschedulable %t: CordonedBy = %q", cordonedBy, unschedulable, got)
		}
		if id, ok := strings.CutPrefix(cordonedBy, ownerMaintenancePrefix); IsMaintenanceOwner(cordonedBy) != ok || ok && MaintenanceOwner(id) != cordonedBy {
			t.Fatalf("cordoned-by %q: IsMaintenanceOwner = %t", cordonedBy, IsMaintenanceOwner(cordonedBy))
		}

		for _, owner := range []string{cordonedBy, OwnerCLI, ""} {
			node := fresh()
			was, err := Uncordon(node, owner, at)
			switch {
			case owner == "" || owner != cordonedBy || live:
				if was || node.Spec.Unschedulable != unschedulable || node.Annotations[contract.AnnotationCordonedBy] != cordonedBy || live && owner == cordonedBy && owner != "" && err == nil {
					t.Fatalf("cordoned by %q, claim %q (live %t): Uncordon(%q) = %t, %v; node %+v", cordonedBy, raw, live, owner, was, err, node)
				}
			case err != nil || was != unschedulable || node.Spec.Unschedulable:
				t.Fatalf("cordoned by %q, claim %q: Uncordon(%q) = %t, %v; unschedulable %t", cordonedBy, raw, owner, was, err, node.Spec.Unschedulable)
			}
		}
	})
}

// FuzzRemedy asks for the fix of a PodDisruptionBudget that allows no
// eviction, whatever its minAvailable or maxUnavailable and however many
// pods it expects (the disruption controller's status, which a budget's
// author does not bound). Nothing may panic, and the numbers a fix names
// free a pod by the controller's own arithmetic: the percentage is the
// largest that allows an eviction with the pods expected, the replica
// count the fewest for the budget's percentage.
func FuzzRemedy(f *testing.F) {
	for _, seed := range []struct {
		minAvailable, maxUnavailable string
		expected                     int32
	}{
		{"3", "", 3}, {"90%", "", 3}, {"100%", "", 1}, {"50%", "", 2}, {"", "0", 4}, {"", "0%", 4}, {"", "", 2},
		{"0%", "", 0}, {"150%", "", 7}, {"-5%", "", 7}, {"%", "", 7}, {"2147483647", "", 2147483647}, {"99%", "", 1 << 30},
	} {
		f.Add(seed.minAvailable, seed.maxUnavailable, seed.expected)
	}
	allows := func(pct int, replicas int32) bool {
		v := intstr.FromString(strconv.Itoa(pct) + "%")
		desired, err := intstr.GetScaledValueFromIntOrPercent(&v, int(replicas), true)
		return err == nil && int(replicas)-desired >= 1
	}
	f.Fuzz(func(t *testing.T, minAvailable, maxUnavailable string, expected int32) {
		var spec policyv1.PodDisruptionBudgetSpec
		if minAvailable != "" {
			spec.MinAvailable = ptr.To(intstr.Parse(minAvailable))
		}
		if maxUnavailable != "" {
			spec.MaxUnavailable = ptr.To(intstr.Parse(maxUnavailable))
		}
		expected = max(expected, 0)
		if rule, fix := remedy(spec, expected, "web", "deployment web"); rule == "" || fix == "" {
			t.Fatalf("minAvailable %q, maxUnavailable %q, %d pods: rule %q, fix %q", minAvailable, maxUnavailable, expected, rule, fix)
		}
		if p, ok := percentAllowingOne(expected); ok != (expected > 1) || ok && (p < 0 || p >= 100 || !allows(int(p), expected) || allows(int(p)+1, expected)) {
			t.Fatalf("%d pods: lower to %d%% (%t), which is not the largest percentage that allows an eviction", expected, p, ok)
		}
		pct, isPct := percent(intstr.Parse(minAvailable))
		if !isPct || pct < 0 || pct > 100 {
			return // the API server refuses it
		}
		if r, ok := replicasAllowingOne(intstr.Parse(minAvailable)); ok != (pct < 100) || ok && (!allows(pct, r) || r > 1 && allows(pct, r-1)) {
			t.Fatalf("minAvailable %q: scale to %d (%t), which is not the fewest replicas that allow an eviction", minAvailable, r, ok)
		}
	})
}
