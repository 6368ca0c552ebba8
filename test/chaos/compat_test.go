package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/test/audit"
)

// A rollout started by the previous release's controller is finished by this
// one. The previous release (the commit hack/previous-release names) drifts
// a pool under a budget of two until records, marks and replacements are on
// the nodes; it is killed, as a `helm upgrade` replaces the pod (or harder),
// and this commit's controller takes over: it reads what the previous one
// wrote, finishes the rollout, and the auditor finds no breach.
func TestARolloutSurvivesAnUpgradeOfSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and builds the previous release")
	}
	previous := sandboxtest.PreviousRelease(t).Bin
	env := sandboxtest.New(t)
	const size = 6
	s := newPoolScene(t, env, "compat", size, 3*time.Second, &v1alpha1.DisruptionSpec{
		Budgets:          []v1alpha1.Budget{{Nodes: "2"}},
		ConsolidateAfter: v1alpha1.Never,
	})
	ns := env.Namespace
	env.Create(t,
		fixture.Deployment(ns, "web", 12, fixture.NodeSelector(s.poolLabels), fixture.Requests("100m", "128Mi"), fixture.GracePeriod(5), fixture.ExitsAfter(2)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("25%")))
	env.WaitForPods(t, "app=web", 12)
	env.WaitForPDB(t, "web", 12)
	a, err := audit.Start(t.Context(), env.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := controllerKubeconfig(t, env, env.Config.Host, nil)

	old := newFleet(t, previous, kubeconfig, env.Client, 1, []string{"previous"})
	s.setImage("img-2")
	deadline := time.Now().Add(5 * time.Minute)
	s.waitUntil(old, deadline, "the previous release mid-rollout: a node replaced, others marked", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx, s.poolLabels)
		if err != nil {
			return false, err
		}
		replaced, marked := 0, 0
		for _, n := range nodes {
			if n.Annotations[contract.AnnotationImage] == "img-2" {
				replaced++
			}
			if _, ok := n.Annotations[contract.AnnotationDisruption]; ok && n.DeletionTimestamp.IsZero() {
				marked++
			}
		}
		return replaced >= 1 && marked >= 1, nil
	})
	old.stop()
	t.Logf("the previous release stopped mid-rollout:\n%s", old.tail(5))

	current := newFleet(t, sandboxtest.Sluice(t), kubeconfig, env.Client, 2, []string{"current"})
	s.waitUntil(current, time.Now().Add(5*time.Minute), "this release finishing the rollout", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx, s.poolLabels)
		if err != nil || len(nodes) != size {
			return false, err
		}
		for _, n := range nodes {
			_, marked := n.Annotations[contract.AnnotationDisruption]
			if marked || n.Annotations[contract.AnnotationImage] != "img-2" || !sandboxtest.NodeReady(&n) || n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	sum := a.Finish()
	t.Logf("auditor:\n%s", sum)
	if v := sum.Violations(); v > 0 {
		t.Errorf("the auditor found %d violations", v)
	}
	for _, inv := range []audit.Invariant{audit.Budget, audit.PDBFloor, audit.OneReplacement} {
		if sum.Row(inv).Checked == 0 {
			t.Errorf("the auditor never had occasion to check %s", inv)
		}
	}
	if lines := current.lines("unreadable"); len(lines) > 0 {
		t.Errorf("this release could not read what the previous one wrote:\n%s", strings.Join(lines[:min(5, len(lines))], "\n"))
	}
}
