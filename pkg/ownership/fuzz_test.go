package ownership

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// FuzzClaim reads arbitrary values of the two annotations through which
// drains share a node, sluice.dev/drain (the claim) and
// sluice.dev/cordoned-by, as every reader does: LiveClaim (budgets, Explain,
// the claims controller), CordonedBy and Uncordon. Nothing may panic; a
// claim that reads re-encodes to one that reads back the same; a live claim
// lapses no sooner than now and no later than its renewal plus ClaimTTL; and
// Uncordon puts a node back only for the owner of its cordon, never under a
// live claim, and otherwise leaves the node as it was.
func FuzzClaim(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	claimAt := func(id, holder string, renewed time.Time) string {
		data, _ := json.Marshal(Claim{ID: id, Holder: holder, Started: renewed.Add(-time.Minute), Renewed: renewed})
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
		c, readable := ClaimOf(node)
		if readable {
			data, err := json.Marshal(c)
			if err != nil {
				t.Fatalf("claim %q reads as %+v, which does not encode: %v", raw, c, err)
			}
			back, ok := ClaimOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AnnotationDrain: string(data)}}})
			if again, _ := json.Marshal(back); !ok || string(again) != string(data) {
				t.Fatalf("claim %q encodes as %s, which reads back as %s", raw, data, again)
			}
		}
		holder, until, live := LiveClaim(node, at)
		switch {
		case live && (!readable || holder != c.Holder || !until.Equal(c.Renewed.Add(ClaimTTL)) || until.Before(at)):
			t.Fatalf("claim %q at %s: LiveClaim = %q, %s", raw, at, holder, until)
		case !live && readable && !c.Renewed.Add(ClaimTTL).Before(at):
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
