package lifecycle

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/test/audit"
)

// sluice is upgraded from its last release to this version, then rolled
// back, each time in the middle of its work: a drift of a pool under a
// budget of one and a Redeploy's drain whose pods leave one at a time. The
// release is installed from the last release's chart
// (testdata/sluice-<version>.tgz, with that release's binary), upgraded the
// way docs/operations.md says (the CRDs applied, then helm upgrade), and
// rolled back with helm rollback. Each controller takes over what the one
// before left (records, marks, a half-drained node), the older one reads
// what this one wrote, and the work finishes with the auditor clean.
func TestUpgradeAndRollBackMidWork(t *testing.T) {
	prev := sandboxtest.PreviousRelease(t)
	sc := newScene(t, prev)
	previousChart := filepath.Join(sc.chartDir, "testdata", "sluice-"+prev.Version+".tgz")
	began := time.Now()
	sc.helm(t, append([]string{"install", "sluice", previousChart}, sc.values...)...)
	first := sc.pods.leading(t, sc.env, prev.Version)
	t.Logf("helm install --wait to a leading controller: %s", time.Since(began).Round(100*time.Millisecond))
	p, redeployed := sc.work(t)
	a := sc.startWork(t, p, redeployed)

	// Upgrade, as docs/operations.md says: this version's CRDs first (helm
	// never upgrades crds/), then the release.
	began = time.Now()
	run(t, sc.kubectl, "--kubeconfig", sc.kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(sc.chartDir, "crds"))
	// Without --wait, as the rest of the rollout would not wait for it.
	sc.helm(t, append([]string{"upgrade", "sluice", sc.chartDir}, noWait(sc.values)...)...)
	second := sc.pods.leading(t, sc.env, sc.this)
	t.Logf("CRDs applied and helm upgrade to the new controller leading: %s", time.Since(began).Round(100*time.Millisecond))
	atUpgrade := p.progress(t, sc.env, redeployed, "this version leads")
	sc.env.WaitFor(t, 3*time.Minute, "this version mid-way: a node replaced since, the next booting", func(ctx context.Context) (bool, error) {
		n, err := p.replaced(ctx)
		if err != nil || n <= atUpgrade {
			return false, err
		}
		booting, err := p.booting(ctx)
		return booting != "", err
	})

	// Roll back to the last release while the rollout goes on.
	began = time.Now()
	sc.helm(t, "rollback", "sluice", "1", "-n", sc.env.Namespace, "--kubeconfig", sc.kubeconfig)
	third := sc.pods.leading(t, sc.env, prev.Version)
	t.Logf("helm rollback to the old controller leading: %s", time.Since(began).Round(100*time.Millisecond))
	if done := p.progress(t, sc.env, redeployed, "the last release leads again"); done == poolSize {
		t.Errorf("the rollout was over before the rollback took effect; the test proves less than it says")
	}
	env := sc.env
	env.WaitFor(t, 5*time.Minute, "the redeployed node drained", func(ctx context.Context) (bool, error) {
		return emptied(ctx, env, redeployed)
	})
	report(t, env, redeployed) // the cloud is done: the event leaves the report
	env.WaitFor(t, 3*time.Minute, "the redeployed node back in service", func(ctx context.Context) (bool, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, redeployed, metav1.GetOptions{})
		return err == nil && !n.Spec.Unschedulable, err
	})
	env.WaitFor(t, 6*time.Minute, "the rollout finished", p.rolledOut)

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
	for _, name := range []string{first, second, third} {
		for _, line := range strings.Split(sc.pods.logOf(name), "\n") {
			if strings.Contains(line, "unreadable") || strings.Contains(line, "RecordFromNewerVersion") {
				t.Errorf("%s could not read what another version wrote: %s", name, line)
			}
		}
	}
}
