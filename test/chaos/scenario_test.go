package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/test/audit"
)

const (
	poolSize   = 8
	maintNodes = 5
	// scenarioTimeout bounds the acts; a healthy run takes two to four
	// minutes on a 2-core machine.
	scenarioTimeout = 10 * time.Minute
	// quietTimeout bounds the quiet period: a new leader's election, start
	// and two passes over what it could act on.
	quietTimeout = 3 * time.Minute
)

// scene is one run of the scenario: a pool with a provider that drifts, a
// handful of nodes that get maintenance events, and the people around them.
type scene struct {
	t    *testing.T
	env  *sandboxtest.Env
	kube client.Client
	name string

	poolLabels, maintLabels map[string]string
	pool                    *v1alpha1.NodePool
	poolNodes               []string
	// maint are the nodes without a pool: [0] a person cordoned it and it
	// gets a Reboot; [1] and [2] get a Redeploy; [3] a person drains with
	// `sluice drain`; [4] reports only metadata sluice rejected.
	maint []string
	// protected: do-not-disrupt on the node, or on a pod there.
	protected map[string]bool
	// deleted is the pool node a person deletes.
	deleted string
}

// minKills is the fewest SIGKILLs a run must see to vouch for anything.
const minKills = 3

// result is what a run prints and the README quotes.
type result struct {
	wall    time.Duration
	kills   int
	exits   int
	leaders []string
	summary audit.Summary
}

// runScenario sets the scene, starts the auditor and two controllers that
// reach the API server at server (the sandbox's own address, or a fault
// proxy's), and plays the acts while one controller is killed every 5–15 s.
// ca is the PEM certificate that server presents, nil for the sandbox's.
func runScenario(t *testing.T, env *sandboxtest.Env, server string, ca []byte, seed uint64) result {
	s := setScene(t, env)
	ctx := t.Context()

	a, err := audit.Start(ctx, env.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	a.Undisturbed(s.maint[4], "its metadata held only entries sluice rejected")
	bin := sandboxtest.Sluice(t)
	// -v 6: the client's request traces go into the logs too, for the
	// check that no secret does.
	f := newFleet(t, bin, controllerKubeconfig(t, env, server, ca), env.Client, seed, []string{"chaos-a", "chaos-b"}, "-v", "6")
	f.killLoop(ctx)
	start := time.Now()

	// A person deletes a pool node; then the pool's image changes; the
	// cloud announces maintenance; a person drains a node.
	if err := env.Client.CoreV1().Nodes().Delete(ctx, s.deleted, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting node %s as a person: %v", s.deleted, err)
	}
	s.setImage("img-2")
	soon := time.Now().Add(2 * time.Minute)
	s.report(s.maint[0], event("reboot-0", maintenance.TypeReboot, soon))
	s.report(s.maint[1], event("redeploy-1", maintenance.TypeRedeploy, soon))
	s.report(s.maint[2], event("redeploy-2", maintenance.TypeRedeploy, soon))
	drained := make(chan error, 1)
	go func() {
		out, err := exec.Command(bin, "drain", s.maint[3], "--kubeconfig", env.Sandbox.Kubeconfig(),
			"--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "5m").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("sluice drain %s: %w\n%s", s.maint[3], err, out)
		}
		drained <- err
	}()

	deadline := time.Now().Add(scenarioTimeout)
	s.waitUntil(f, deadline, "the Redeploy nodes drained", func(ctx context.Context) (bool, error) {
		return s.emptied(ctx, s.maint[1], s.maint[2])
	})
	// The cloud finishes its maintenance: the events leave the reports.
	for _, n := range s.maint[:3] {
		s.report(n)
	}
	s.waitUntil(f, deadline, "the Redeploy nodes back in service", func(ctx context.Context) (bool, error) {
		return s.schedulable(ctx, s.maint[1], s.maint[2])
	})
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Until(deadline)):
		t.Fatalf("sluice drain %s did not finish\n%s", s.maint[3], f.tail(30))
	}
	s.waitUntil(f, deadline, "the deleted node gone and the pool on img-2", s.rolledOut)
	wall := time.Since(start)
	// A quick scenario may have seen fewer kills than it takes to vouch for
	// anything: the kills go on, against a settled fleet that must stay
	// settled, until there have been enough.
	f.awaitKills(minKills, time.Now().Add(time.Minute))
	f.stopKilling()

	// Both controllers up and nothing left to do: nothing may move now.
	s.quiet(f, time.Now().Add(quietTimeout))
	sum := a.Finish()
	kills, exits, leaders := f.counts()
	t.Logf("seed %d: %d kills, %d exits by themselves, leaders seen %v, scenario %s, load %s\nauditor:\n%s",
		seed, kills, exits, leaders, wall.Round(100*time.Millisecond), loadavg(), sum)
	s.checkEnd(sum)
	// The controllers run with the chart's RBAC: a request it does not
	// allow is a permission the chart lacks.
	if denied := f.lines("forbidden"); len(denied) > 0 {
		t.Errorf("the API server refused the controllers %d requests as forbidden: the chart's RBAC lacks them:\n%s",
			len(denied), strings.Join(denied[:min(5, len(denied))], "\n"))
	}
	if traces := f.lines("/api/v1/nodes"); len(traces) == 0 {
		t.Error("no request traces in the controllers' logs at -v 6: klog's lines do not reach the log")
	}
	f.checkNoSecrets()
	if kills < minKills {
		t.Errorf("only %d kills during the scenario: too few to vouch for anything", kills)
	}
	return result{wall: wall, kills: kills, exits: exits, leaders: leaders, summary: sum}
}

func setScene(t *testing.T, env *sandboxtest.Env) *scene {
	t.Helper()
	s := newPoolScene(t, env, "chaos", poolSize, 5*time.Second, &v1alpha1.DisruptionSpec{
		Budgets:                []v1alpha1.Budget{{Nodes: "2"}},
		TerminationGracePeriod: &metav1.Duration{Duration: 3 * time.Minute},
		ConsolidateAfter:       v1alpha1.Never, // the scene's small workload would shrink the pool
	})
	for _, n := range env.CreateNodes(t, fixture.AKSPool(s.name+"m", maintNodes, fixture.WithLabels(s.maintLabels))) {
		s.maint = append(s.maint, n.Name)
	}

	ns := env.Namespace
	env.Create(t,
		fixture.Deployment(ns, "web", 16, fixture.NodeSelector(s.poolLabels), fixture.Requests("100m", "128Mi"), fixture.GracePeriod(10), fixture.ExitsAfter(3)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("25%")),
		fixture.Deployment(ns, "pinned", 1, fixture.NodeSelector(s.poolLabels), fixture.Annotate(contract.AnnotationDoNotDisrupt, "true")),
		fixture.Deployment(ns, "svc", 10, fixture.NodeSelector(s.maintLabels), fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "svc", "svc", fixture.MinAvailable("60%")))
	env.WaitForPods(t, "app=web", 16)
	env.WaitForPods(t, "app=svc", 10)
	pinned := env.WaitForPods(t, "app=pinned", 1)
	env.WaitForPDB(t, "web", 16)
	env.WaitForPDB(t, "svc", 10)

	s.patchNode(s.poolNodes[0], fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, contract.AnnotationDoNotDisrupt))
	s.protected[s.poolNodes[0]] = true
	s.protected[pinned[0].Spec.NodeName] = true
	for _, n := range slices.Backward(s.poolNodes) {
		if !s.protected[n] {
			s.deleted = n
			break
		}
	}
	s.patchNode(s.maint[0], `{"spec":{"unschedulable":true}}`) // a person's cordon
	s.reportRejected(s.maint[4], errUnreadable)
	return s
}

// errUnreadable is what maint[4]'s metadata holds: nothing sluice can read.
var errUnreadable = errors.New(`event "x": NotBefore "soon-ish": not a time`)

// newPoolScene creates a kwok pool of size nodes (image img-1, boot as
// given) with its disruption settings; the maintenance nodes are the
// caller's.
func newPoolScene(t *testing.T, env *sandboxtest.Env, prefix string, size int, boot time.Duration, disruption *v1alpha1.DisruptionSpec) *scene {
	t.Helper()
	s := &scene{t: t, env: env, kube: poolClient(t, env), name: sandboxtest.UniqueName(prefix), protected: map[string]bool{}}
	s.poolLabels = map[string]string{"chaos.sluice.dev/pool": s.name}
	s.maintLabels = map[string]string{"chaos.sluice.dev/maint": s.name}
	s.pool = &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: s.poolLabels},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok, Kwok: &v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{Duration: boot}}},
			Template:     &v1alpha1.NodeTemplate{Labels: s.poolLabels, InstanceTypes: []string{"Standard_D4s_v5"}, Image: "img-1"},
			Disruption:   disruption,
		},
	}
	if err := s.kube.Create(t.Context(), s.pool); err != nil {
		t.Fatalf("creating pool %s: %v", s.name, err)
	}
	// Registered first, so it runs last: after the controllers stop, let
	// the pool's nodes go (nobody is left to remove their finalizer).
	t.Cleanup(s.cleanup)
	s.poolNodes = s.makeNodes(size)
	return s
}

// makeNodes has a kwok provider of the test's own make n nodes for the
// pool, as the controllers' providers would have; they find them from their
// Nodes.
func (s *scene) makeNodes(n int) []string {
	t := s.t
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := kwok.New(s.env.Client, clock.RealClock{}, kwok.Options{Registered: true})
	go func() { _ = p.Run(ctx) }()
	fast := s.pool.DeepCopy()
	fast.Spec.Provider.Kwok.BootDelay = &metav1.Duration{}
	var names []string
	for range n {
		m, err := p.Create(ctx, fast, "")
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m.Name)
	}
	s.env.WaitFor(t, 5*time.Minute, "the pool's nodes Ready", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx, s.poolLabels)
		if err != nil || len(nodes) != n {
			return false, nil
		}
		for _, n := range nodes {
			if !sandboxtest.NodeReady(&n) || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
				return false, nil
			}
		}
		return true, nil
	})
	return names
}

func (s *scene) cleanup() {
	ctx := context.Background()
	nodes, _ := s.nodes(ctx, s.poolLabels)
	for _, n := range nodes {
		_, _ = s.env.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = s.env.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
	_ = s.kube.Delete(ctx, s.pool)
}

func (s *scene) setImage(image string) {
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"image":%q}}}`, image))
	if err := s.kube.Patch(s.t.Context(), s.pool, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.t.Fatal(err)
	}
}

func event(id string, typ maintenance.Type, notBefore time.Time) maintenance.Event {
	return maintenance.Event{ID: id, Source: maintenance.SourceAzure, Type: typ, Status: maintenance.StatusScheduled, NotBefore: notBefore}
}

// report writes what the node's agent would after reading the cloud's
// metadata: the events announced now (none: the maintenance is over).
func (s *scene) report(node string, events ...maintenance.Event) {
	s.patchNode(node, annotate(contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAzure, false, events).Encode()))
}

// reportRejected writes what an agent would after reading metadata with
// only these unreadable parts.
func (s *scene) reportRejected(node string, parts ...error) {
	report := maintenance.NewReport(maintenance.SourceAzure, false, nil).WithRejected(parts)
	s.patchNode(node, annotate(contract.AnnotationMaintenanceEvents, report.Encode()))
}

func annotate(key, value string) string {
	return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
}

func (s *scene) patchNode(node, patch string) {
	s.t.Helper()
	if _, err := s.env.Client.CoreV1().Nodes().Patch(s.t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		s.t.Fatalf("patching node %s: %v", node, err)
	}
}

func (s *scene) nodes(ctx context.Context, labels map[string]string) ([]corev1.Node, error) {
	list, err := s.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (s *scene) waitUntil(f *fleet, deadline time.Time, what string, cond func(context.Context) (bool, error)) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.t.Context(), 500*time.Millisecond, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			s.t.Logf("waiting for %s: %v", what, err)
		}
		return ok, nil
	})
	if err != nil {
		s.t.Fatalf("%s did not happen by %s\n%s", what, deadline.Format(time.TimeOnly), f.tail(40))
	}
	s.t.Logf("%s", what)
}

// quiet holds the settled scene under watch until the leader has passed over
// everything it could act on, twice, and then checks that nothing moved. A
// fixed wait would vouch for nothing on a machine slow enough that the
// leader elected after the last kill had not yet looked. So each pass is
// seen through a write the leader must make in it, to a change the test
// makes first:
//   - the pool: an edit that changes nothing it decides (a cap on its node
//     count far above its size) bumps its generation, and the pool's status
//     shows that generation only once a reconcile that started after the
//     edit has decided and acted (status is written last);
//   - each maintenance node: a new unreadable part in its report, which the
//     maintenance controller announces as a MetadataRejected Event at the
//     start of its reconcile of the node.
//
// A reconcile of one object never overlaps the next one of the same object,
// so the second pass being seen means the first has finished acting. Both
// passes must come from one leader, alive after the kills: a leader change
// meanwhile (a replica that lost its Lease by itself) starts over.
func (s *scene) quiet(f *fleet, deadline time.Time) {
	s.t.Helper()
	calm := time.Now()
	for pass := 1; ; pass++ {
		leader := s.liveLeader(f, deadline, calm)
		for round := 1; round <= 2; round++ {
			s.reconciled(f, deadline, fmt.Sprintf("quiet period, pass %d, round %d", pass, round))
		}
		now := s.liveLeader(f, deadline, calm)
		if now == leader {
			break
		}
		s.t.Logf("the leader changed during the quiet period (%s, then %s): once more", leader, now)
	}
	s.t.Logf("quiet for %s", time.Since(calm).Round(100*time.Millisecond))
	// The auditor judges every act (checkEnd); what it allows, such as a
	// node disrupted within budget, must not happen either.
	ctx := s.t.Context()
	if ok, err := s.rolledOut(ctx); !ok || err != nil {
		s.t.Errorf("the pool moved during the quiet period: it is no longer as rolled out (%v)\n%s", err, f.tail(40))
	}
	if ok, err := s.schedulable(ctx, s.maint[1], s.maint[2]); !ok || err != nil {
		s.t.Errorf("the Redeploy nodes left service during the quiet period (%v)\n%s", err, f.tail(40))
	}
}

// liveLeader waits for the Lease to be renewed after since, so its holder is
// alive now (a killed replica renews nothing), and returns the holder: the
// replica's identity and its start's own suffix, new at every start.
func (s *scene) liveLeader(f *fleet, deadline, since time.Time) string {
	s.t.Helper()
	var holder string
	s.waitUntil(f, deadline, "a leader alive after the kills", func(ctx context.Context) (bool, error) {
		lease, err := s.env.Client.CoordinationV1().Leases(controllerNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		spec := lease.Spec
		if spec.HolderIdentity == nil || *spec.HolderIdentity == "" || spec.RenewTime == nil || !spec.RenewTime.After(since) {
			return false, nil
		}
		holder = *spec.HolderIdentity
		return true, nil
	})
	return holder
}

// reconciled makes the changes quiet describes, marked, and waits for the
// leader's writes that answer them.
//
// The pool's answer is durable: a status write that fails is retried by the
// reconcile. A node's answer is an Event, and Events are best-effort: the
// recorder drops one the API server refuses with a 5xx, which the proxy
// injects. So a node whose Event has not come within eventLost gets its
// report written again, with the marker and a count; the Event of that new
// reconcile carries the marker as well.
func (s *scene) reconciled(f *fleet, deadline time.Time, marker string) {
	s.t.Helper()
	ctx := s.t.Context()
	most := 1000 + s.pool.Generation // a new value each time, far above the pool's size
	patch := []byte(fmt.Sprintf(`{"spec":{"limits":{"nodes":%d}}}`, most))
	if err := s.kube.Patch(ctx, s.pool, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.t.Fatalf("editing pool %s: %v", s.name, err)
	}
	generation := s.pool.Generation
	mark := func(n string, part error) {
		if n == s.maint[4] {
			s.reportRejected(n, errUnreadable, part)
		} else {
			s.reportRejected(n, part)
		}
	}
	for _, n := range s.maint {
		mark(n, errors.New(marker))
	}
	written, again := time.Now(), 0
	s.waitUntil(f, deadline, marker+": the leader's reconcile of the pool and of each maintenance node", func(ctx context.Context) (bool, error) {
		var unanswered []string
		for _, n := range s.maint {
			events, err := s.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.name": n, "reason": "MetadataRejected"}.String()})
			if err != nil {
				return false, err
			}
			if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool { return strings.Contains(e.Message, marker) }) {
				unanswered = append(unanswered, n)
			}
		}
		if len(unanswered) > 0 && time.Since(written) > eventLost {
			again++
			s.t.Logf("%s: no MetadataRejected Event yet for %v; writing their reports again (%d)", marker, unanswered, again)
			for _, n := range unanswered {
				mark(n, fmt.Errorf("%s (again, %d)", marker, again))
			}
			written = time.Now()
		}
		pool := &v1alpha1.NodePool{}
		if err := s.kube.Get(ctx, client.ObjectKeyFromObject(s.pool), pool); err != nil {
			return false, err
		}
		return pool.Status.ObservedGeneration >= generation && len(unanswered) == 0, nil
	})
}

// eventLost is how long reconciled waits for a node's Event before taking it
// as dropped: far longer than a live leader takes to reconcile a node.
const eventLost = 15 * time.Second

// emptied: the nodes are cordoned and hold no pod that had to leave.
func (s *scene) emptied(ctx context.Context, names ...string) (bool, error) {
	for _, name := range names {
		node, err := s.env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !node.Spec.Unschedulable {
			return false, nil
		}
		pods, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return false, err
		}
		if len(pods.Items) > 0 {
			return false, nil
		}
	}
	return true, nil
}

func (s *scene) schedulable(ctx context.Context, names ...string) (bool, error) {
	for _, name := range names {
		node, err := s.env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || node.Spec.Unschedulable {
			return false, err
		}
	}
	return true, nil
}

// rolledOut: the node a person deleted is gone, every other pool node that
// is not protected runs img-2 and is Ready, the protected ones still run
// img-1, and no node is marked.
func (s *scene) rolledOut(ctx context.Context) (bool, error) {
	if _, err := s.env.Client.CoreV1().Nodes().Get(ctx, s.deleted, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return false, err
	}
	nodes, err := s.nodes(ctx, s.poolLabels)
	if err != nil {
		return false, err
	}
	if len(nodes) != poolSize-1 {
		return false, nil
	}
	for _, n := range nodes {
		want := "img-2"
		if s.protected[n.Name] {
			want = "img-1"
		}
		_, marked := n.Annotations[contract.AnnotationDisruption]
		if marked || n.Annotations[contract.AnnotationImage] != want || !sandboxtest.NodeReady(&n) || n.Spec.Unschedulable {
			return false, nil
		}
	}
	return true, nil
}

// checkEnd: the auditor saw the acts and found no breach; only the people's
// cordons remain.
func (s *scene) checkEnd(sum audit.Summary) {
	t := s.t
	if v := sum.Violations(); v > 0 {
		t.Errorf("the auditor found %d violations", v)
	}
	for _, inv := range []audit.Invariant{audit.Budget, audit.PDBFloor, audit.MachineAfterPods, audit.OneReplacement, audit.DoNotDisrupt} {
		if sum.Row(inv).Checked == 0 {
			t.Errorf("the auditor never had occasion to check %s: the scenario did not exercise it", inv)
		}
	}
	ctx := context.Background()
	want := []string{s.maint[0], s.maint[3]}
	var cordoned []string
	for _, labels := range []map[string]string{s.poolLabels, s.maintLabels} {
		nodes, err := s.nodes(ctx, labels)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Spec.Unschedulable {
				cordoned = append(cordoned, n.Name)
			}
		}
	}
	slices.Sort(cordoned)
	slices.Sort(want)
	if !slices.Equal(cordoned, want) {
		t.Errorf("cordoned at the end: %v; want only the people's: %v (a person's cordon on %s, sluice drain on %s)",
			cordoned, want, s.maint[0], s.maint[3])
	}
}

func poolClient(t *testing.T, env *sandboxtest.Env) client.Client {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodepool.Install(t.Context(), ext); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	kube, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}
