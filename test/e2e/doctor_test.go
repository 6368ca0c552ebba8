package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/doctor"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// TestDoctorTellsTheReferenceStory builds the night of
// shared/reference/why-node-upgrade-drain-gets-stuck.md: a node about to be
// upgraded runs a single-replica deployment whose budget is minAvailable 1,
// and the one remaining node is too small for the rest of its pods. Doctor,
// asked about that node, must name the budget, the pods with no room, and
// the fix, and exit non-zero. The same run covers the other causes.
func TestDoctorTellsTheReferenceStory(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	ns := env.Namespace
	group := map[string]string{"sluice.dev/doctor": ns}
	upgrading := env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("up"), 1, fixture.InstanceType("Standard_D4s_v5", "4", "16Gi"), fixture.WithLabels(group)))[0].Name
	on := fixture.NodeSelector(group)
	env.Create(t,
		fixture.Deployment(ns, "checkout", 1, on),
		fixture.PDB(ns, "checkout", "checkout", fixture.MinAvailable("1")),
		fixture.Deployment(ns, "api", 2, on, fixture.Requests("1500m", "1Gi")),
		fixture.Pod(ns, "debug", fixture.OnNode(upgrading)),
		fixture.Deployment(ns, "cache", 1, on, fixture.EmptyDir()),
		fixture.Deployment(ns, "pinned", 1, on, fixture.Annotate(contract.AnnotationDoNotDisrupt, "true")),
	)
	env.WaitForPods(t, "app in (checkout,api,debug,cache,pinned)", 6)
	spotPool := fixture.AKSPool(sandboxtest.UniqueName("spot"), 1, fixture.Spot(), fixture.WithLabels(group))
	spot := env.CreateNodes(t, spotPool)[0].Name
	env.Create(t, fixture.Deployment(ns, "batch", 1, fixture.TolerateSpot(), fixture.GracePeriod(120), fixture.NodeSelector(spotPool.Selector())))
	env.WaitForPods(t, "app=batch", 1)
	waitForBudget(t, env, "checkout")
	// The remaining node: too small for api's pods.
	small := env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("small"), 1, fixture.InstanceType("Standard_B2s", "1", "4Gi"), fixture.WithLabels(group)))[0].Name
	// Someone cordoned the spot node and left no word.
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), spot, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := run(t, sluice, "doctor", "node", upgrading, spot, "--kubeconfig", kubeconfig, "-o", "json")
	if code != 3 {
		t.Errorf("doctor with errors: exit %d, want 3 (%s)", code, errOut)
	}
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	expect := func(sev doctor.Severity, code, object, message, fix string) {
		t.Helper()
		for _, f := range report.Findings {
			if f.Severity == sev && f.Code == code && strings.HasPrefix(f.Object, object) && strings.Contains(f.Message, message) && strings.Contains(f.Fix+f.Message, fix) {
				return
			}
		}
		t.Errorf("no %s %s finding for %s containing %q / fix %q", sev, code, object, message, fix)
	}
	expect(doctor.SeverityError, string(drain.ReasonPDBDeadlock), "poddisruptionbudget "+ns+"/checkout", "never allows an eviction", "scale deployment checkout to 2")
	expect(doctor.SeverityError, doctor.CodeNoRoom, "pod "+ns+"/api-", "Insufficient cpu", "add capacity")
	expect(doctor.SeverityError, string(drain.ReasonUnreplicated), "pod "+ns+"/debug", "no controller", "Deployment or StatefulSet")
	expect(doctor.SeverityWarning, string(drain.ReasonLocalStorage), "pod "+ns+"/cache-", "emptyDir volume scratch", "PersistentVolume")
	expect(doctor.SeverityError, string(drain.ReasonDoNotDisrupt), "pod "+ns+"/pinned-", "sluice.dev/do-not-disrupt=true", "remove the annotation")
	expect(doctor.SeverityWarning, doctor.CodeGraceExceedsNotice, "pod "+ns+"/batch-", "asks for 120s", "30s")
	expect(doctor.SeverityWarning, doctor.CodeCordonedUnknown, "node "+spot, "no record of who did it", "uncordon")
	for _, f := range report.Findings {
		if f.Code == doctor.CodeNoRoom && strings.Contains(f.Object, "/checkout-") {
			t.Errorf("checkout fits on %s and must not be reported without room: %+v", small, f)
		}
	}

	// A healthy node: room to spare, a budget that allows a disruption.
	healthy := env.CreateNodes(t, fixture.EKSNodeGroup(sandboxtest.UniqueName("ok"), 2, fixture.WithLabels(map[string]string{"sluice.dev/doctor-ok": ns})))
	okOn := fixture.NodeSelector(map[string]string{"sluice.dev/doctor-ok": ns})
	env.Create(t, fixture.Deployment(ns, "web", 2, okOn), fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("1")))
	env.WaitForPods(t, "app=web", 2)
	waitForBudget(t, env, "web")
	out, errOut, code = run(t, sluice, "doctor", "node", healthy[0].Name, healthy[1].Name, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "0 error(s)") {
		t.Errorf("doctor on healthy nodes: exit %d\n%s%s", code, out, errOut)
	}

	// A node that stopped reporting.
	patch := []byte(`{"metadata":{"annotations":{"` + contract.SandboxNotReady + `":"true"}}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), healthy[1].Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForNodeReady(t, healthy[1].Name, false)
	out, _, code = run(t, sluice, "doctor", "node", healthy[1].Name, "--kubeconfig", kubeconfig)
	if code != 3 || !strings.Contains(out, doctor.CodeNodeNotReady) {
		t.Errorf("doctor on a NotReady node: exit %d\n%s", code, out)
	}
}

// TestDoctorFindsBudgetAndPodCauses covers the causes the story does not:
// overlapping budgets, a budget that selects nothing, a budget at zero because
// its pods run but are not Ready, hostPath, a pod stuck terminating on a
// finalizer, and a pod the scheduler cannot place.
func TestDoctorFindsBudgetAndPodCauses(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	ns := env.Namespace
	ctx := context.Background()
	pool := fixture.AKSPool(sandboxtest.UniqueName("causes"), 2)
	nodes := env.CreateNodes(t, pool)
	on := fixture.NodeSelector(pool.Selector())
	env.Create(t,
		fixture.Deployment(ns, "twice", 1, on),
		fixture.PDB(ns, "twice-a", "twice", fixture.MaxUnavailable("1")),
		fixture.PDB(ns, "twice-b", "twice", fixture.MaxUnavailable("1")),
		fixture.PDB(ns, "typo", "nosuchapp", fixture.MaxUnavailable("1")),
		fixture.Deployment(ns, "flaky", 3, on),
		fixture.PDB(ns, "flaky", "flaky", fixture.MinAvailable("2")),
		fixture.Deployment(ns, "logs", 1, on, fixture.HostPath("/var/log")),
		fixture.Pod(ns, "held", fixture.OnNode(nodes[0].Name), fixture.GracePeriod(1), fixture.Finalizer("example.com/never")),
		fixture.Pod(ns, "nowhere", fixture.NodeSelector(map[string]string{"no-such-label": "x"})),
	)
	flaky := env.WaitForPods(t, "app=flaky", 3)
	env.WaitForPods(t, "app in (twice,logs,held)", 3)
	// Two pods have failed their readiness probe for ten minutes: far longer
	// than a start may take, so they are stuck, not starting.
	since := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	for _, p := range flaky[:2] {
		for i := range p.Status.Conditions {
			if t := p.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].LastTransitionTime = since
			}
		}
		if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitFor(t, 30*time.Second, "budget flaky at zero", func(ctx context.Context) (bool, error) {
		p, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "flaky", metav1.GetOptions{})
		return err == nil && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0, nil
	})
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.Client.CoreV1().Pods(ns).Patch(context.Background(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	env.WaitFor(t, 30*time.Second, "pod nowhere marked unschedulable", func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "nowhere", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	env.WaitFor(t, 30*time.Second, "pod held to be past its grace period by more than --stuck-after", func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil && time.Since(p.DeletionTimestamp.Time) > 2*time.Second, nil
	})

	out, errOut, code := run(t, sluice, "doctor", "--kubeconfig", kubeconfig, "-o", "json", "--stuck-after", "1s")
	if code != 3 {
		t.Errorf("doctor: exit %d, want 3 (%s)", code, errOut)
	}
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	expect := func(sev doctor.Severity, code, object, message string) {
		t.Helper()
		for _, f := range report.Findings {
			if f.Severity == sev && f.Code == code && strings.HasPrefix(f.Object, object) && strings.Contains(f.Message, message) {
				return
			}
		}
		t.Errorf("no %s %s finding for %s containing %q", sev, code, object, message)
	}
	expect(doctor.SeverityError, string(drain.ReasonMultiplePDBs), "poddisruptionbudgets "+ns+"/{twice-a, twice-b}", "more than one budget")
	expect(doctor.SeverityWarning, doctor.CodePDBSelectsNothing, "poddisruptionbudget "+ns+"/typo", "selects no pods")
	expect(doctor.SeverityError, string(drain.ReasonPDBDeadlock), "poddisruptionbudget "+ns+"/flaky", "Running but not Ready")
	expect(doctor.SeverityWarning, doctor.CodeHostPath, "pod "+ns+"/logs-", "/var/log")
	expect(doctor.SeverityError, doctor.CodeStuckTerminating, "pod "+ns+"/held", "example.com/never")
	expect(doctor.SeverityWarning, doctor.CodePending, "pod "+ns+"/nowhere", "didn't match Pod's node affinity/selector")
}
