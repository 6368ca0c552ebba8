package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/test/audit"
)

// The side-by-side drift scene: a pool of 200 Standard_D4s_v5 nodes, two
// pods on each (1500m of the type's 3860m allocatable: a third does not fit)
// in Deployments of 100 under PDBs of maxUnavailable 25 %, pods that exit 3 s
// after being asked, machines that boot in 5 s, a budget of 10 %.
const (
	driftSideNodes   = 200
	driftSidePerNode = 2
	driftSidePerApp  = 100
	driftSideBudget  = 10 // percent
	driftSideBoot    = 5 * time.Second
	driftSideExit    = 3 * time.Second
	driftSideType    = "Standard_D4s_v5"
	driftSideCPU     = "1500m"
	driftSideMemory  = "4Gi"
	driftSidePool    = "drift"
)

// BenchmarkDriftVersusKarpenter drifts the same pool twice on identical
// sandboxes: once by sluice (`sluice controller` as its own process, a
// kwok-provider NodePool whose image changes), once by Karpenter v1.14.1's
// kwok provider (the consolidation side by side's build and process; its
// NodePool's template gains a label, which drifts every NodeClaim), each
// replacing nodes replacement first under the same 10 % budget with the same
// 5 s boot (sluice's bootDelay, Karpenter's nodeRegistrationDelay). It
// prints, side by side: the time to turn the pool over (the edit to every
// node new and Ready, the pool at its size), its ratio to the lower bound
// rounds × (boot + exit) with rounds = ceil(200 / 20), the evictions (the
// API server's count of those granted), the time from a slot freeing to the
// next node chosen, p50 and p99 (as BenchmarkDriftAtScale defines it; a node
// is chosen when sluice records its disruption, or when Karpenter taints it
// karpenter.sh/disrupted), the most old nodes out of service at once, and
// PDB floors broken (test/audit's watcher). Karpenter gets 40 minutes; if it
// is not done by then the table says so, with how far it got.
func BenchmarkDriftVersusKarpenter(b *testing.B) {
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		karpenter := karpenterTools(b)
		bin := buildSluiceBinary(b)
		waitCalm(b, 3*time.Minute)
		s := runDriftSide(b, &sluiceDrift{bin: bin}, 15*time.Minute)
		waitCalm(b, 3*time.Minute)
		k := runDriftSide(b, &karpenterDrift{karpenterSide: karpenterSide{dir: karpenter, manifest: karpenterDriftObjects("img-1")}}, 40*time.Minute)
		reportDriftSides(sc, s, k, loadStart)
	}
	sc.judge()
}

// driftSide is one tool under test.
type driftSide interface {
	name() string
	// start brings up the tool and, for sluice, the pool's nodes; the
	// workload is created after it returns (Karpenter makes its nodes for it).
	start(b *testing.B, sb *sandbox.Sandbox, clientset kubernetes.Interface, kubectl string)
	// drift changes the pool's template.
	drift(b *testing.B)
	// chosen says whether the tool has chosen the node to replace; fresh
	// whether the node is of the new template.
	chosen(n *corev1.Node) bool
	fresh(n *corev1.Node) bool
	check(b *testing.B)
	stop()
}

// driftResult is what one side measured.
type driftResult struct {
	name            string
	wall            time.Duration
	finished        bool
	turned          int // nodes new and Ready at the end
	moving          int // pods on the old nodes at the edit
	evictions       int
	slots           []time.Duration
	mostOut         int
	created, broken int
	load            string
	audit           string
}

func runDriftSide(b *testing.B, s driftSide, timeout time.Duration) driftResult {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sb, clientset, kubectl := startSandbox(b)
	defer func() { _ = sb.Stop() }()
	w := watchRollout(ctx, b, clientset, driftSidePool, s.chosen)
	s.start(b, sb, clientset, kubectl)
	defer s.stop()

	const ns = "work"
	apps := driftSideNodes * driftSidePerNode / driftSidePerApp
	pods := apps * driftSidePerApp
	objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	for a := range apps {
		name := fmt.Sprintf("app%d", a)
		objs = append(objs,
			fixture.Deployment(ns, name, driftSidePerApp, fixture.NodeSelector(map[string]string{"bench.sluice.dev/pool": driftSidePool}),
				fixture.Requests(driftSideCPU, driftSideMemory), fixture.GracePeriod(30), fixture.ExitsAfter(driftSideExit.Seconds())),
			fixture.PDB(ns, name, name, fixture.MaxUnavailable("25%")))
	}
	createParallel(ctx, b, clientset, objs, 4)
	waitUntil(b, 20*time.Minute, fmt.Sprintf("%s: %d nodes and %d pods Ready", s.name(), driftSideNodes, pods), func() bool {
		s.check(b)
		return w.readyUntainted() == driftSideNodes && len(w.names()) == driftSideNodes && readyPods(b, clientset, ns) == pods
	})
	waitBudgetsSettled(b, clientset, ns, apps, 5*time.Minute)
	waitCalm(b, 3*time.Minute)

	a, err := audit.Start(ctx, sb.RESTConfig(), func(string, ...any) {})
	if err != nil {
		b.Fatal(err)
	}
	r := driftResult{name: s.name(), finished: true}
	r.moving = podsOn(b, clientset, ns, w.start())
	evictedBefore := evictionsByCode(b, clientset)["201"]
	start := time.Now()
	s.drift(b)
	for !w.rolledTo(s.fresh, driftSideNodes) {
		s.check(b)
		if time.Since(start) > timeout {
			r.finished = false
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.wall = time.Since(start)
	sum := a.Finish()
	r.evictions = int(evictionsByCode(b, clientset)["201"] - evictedBefore)
	r.slots = w.slotToMark(budgetOf(driftSideNodes, driftSideBudget))
	r.mostOut = w.mostOut()
	r.broken = sum.Row(audit.PDBFloor).Violated
	r.audit = sum.String()
	r.load = loadavg()
	for _, name := range w.names() {
		w.mu.Lock()
		old := w.old[name]
		w.mu.Unlock()
		if !old {
			r.created++
		}
	}
	r.turned = w.freshReady(s.fresh)
	return r
}

// budgetOf is what a budget of pct % allows of nodes: rounded up.
func budgetOf(nodes, pct int) int { return int(math.Ceil(float64(nodes) * float64(pct) / 100)) }

// freshReady counts the pool's nodes that are new, fresh and Ready.
func (w *rolloutWatch) freshReady(fresh func(*corev1.Node) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, obj := range w.store.List() {
		node := obj.(*corev1.Node)
		if !w.old[node.Name] && fresh(node) && nodeReady(node) {
			n++
		}
	}
	return n
}

func reportDriftSides(sc *scorecard, s, k driftResult, loadStart string) {
	rounds := int(math.Ceil(float64(driftSideNodes) / float64(budgetOf(driftSideNodes, driftSideBudget))))
	lower := time.Duration(rounds) * (driftSideBoot + driftSideExit)
	wall := func(r driftResult) string {
		if !r.finished {
			return fmt.Sprintf("not over after %s (%d of %d nodes turned over)", r.wall.Round(time.Second), r.turned, driftSideNodes)
		}
		return r.wall.Round(100 * time.Millisecond).String()
	}
	ratio := func(r driftResult) string {
		q := fmt.Sprintf("%.2fx", r.wall.Seconds()/lower.Seconds())
		if !r.finished {
			q = "more than " + q
		}
		return q
	}
	slot := func(r driftResult) string {
		if len(r.slots) == 0 {
			return "none"
		}
		return fmt.Sprintf("%s / %s (%d slots)", nearestRank(r.slots, 0.5).Round(time.Millisecond), nearestRank(r.slots, 0.99).Round(time.Millisecond), len(r.slots))
	}
	fmt.Printf("\n# Drift side by side: a pool of %d %s nodes, %d pods (%s/%s, %d a node) in Deployments of %d with PDBs maxUnavailable 25%%, pods exit %s, boot %s, budget %d%% (%d nodes); each tool on its own sandbox (load at start %s)\n",
		driftSideNodes, driftSideType, driftSideNodes*driftSidePerNode, driftSideCPU, driftSideMemory, driftSidePerNode, driftSidePerApp,
		driftSideExit, driftSideBoot, driftSideBudget, budgetOf(driftSideNodes, driftSideBudget), loadStart)
	printTable("", [][]string{
		{"figure", s.name, k.name, "target"},
		{"time to turn the pool over", wall(s), wall(k), "sluice's over Karpenter's " + sc.want(driftSideVersus)},
		{"lower bound", fmt.Sprintf("%s = %d rounds × (%s + %s)", lower, rounds, driftSideBoot, driftSideExit), "the same", ""},
		{"ratio to the lower bound", ratio(s), ratio(k), "sluice " + sc.want(driftSideRatio)},
		{"slot freed (old Node gone) -> next node chosen, p50 / p99", slot(s), slot(k), ""},
		{"evictions (the API server's count, granted)", strconv.Itoa(s.evictions), strconv.Itoa(k.evictions), fmt.Sprintf("the pods on the old nodes: %d / %d", s.moving, k.moving)},
		{"old nodes out of service at once, most", strconv.Itoa(s.mostOut), strconv.Itoa(k.mostOut), fmt.Sprintf("≤ %d (the budget)", budgetOf(driftSideNodes, driftSideBudget))},
		{"nodes created", strconv.Itoa(s.created), strconv.Itoa(k.created), ""},
		{"PDB floors broken (auditor)", strconv.Itoa(s.broken), strconv.Itoa(k.broken), ""},
		{"load at the end", s.load, k.load, ""},
	})
	for _, r := range []driftResult{s, k} {
		if r.broken > 0 {
			fmt.Printf("\n%s: the auditor saw PDB floors broken:\n%s\n", r.name, r.audit)
		}
	}
	sRatio := s.wall.Seconds() / lower.Seconds()
	if !s.finished {
		sRatio = math.Inf(1)
	}
	sc.add(driftSideRatio, sRatio)
	sc.add(driftSideVersus, s.wall.Seconds()/k.wall.Seconds())
}

// sluiceDrift is sluice's controller with a kwok-provider NodePool.
type sluiceDrift struct {
	bin string
	sb  *sandbox.Sandbox
	ctl *controllerProcess
	kc  string
}

func (s *sluiceDrift) name() string { return "sluice" }

func (s *sluiceDrift) start(b *testing.B, sb *sandbox.Sandbox, clientset kubernetes.Interface, kubectl string) {
	b.Helper()
	s.sb, s.kc = sb, kubectl
	pool := benchPool(driftSidePool, driftSideBudget, driftSideBoot)
	pool.Spec.Template.InstanceTypes = []string{driftSideType}
	makePool(b, sb, clientset, poolClient(b, sb), pool, driftSideNodes)
	s.ctl = startControllerProcess(b, s.bin, sb.Kubeconfig(), "--providers", "kwok")
	s.ctl.waitQueuesEmpty(b, 5*time.Minute)
}

func (s *sluiceDrift) drift(b *testing.B) {
	b.Helper()
	kubectlPatch(b, s.kc, s.sb, "nodepools.sluice.dev/"+driftSidePool, `{"spec":{"template":{"image":"img-2"}}}`)
}

func (s *sluiceDrift) chosen(n *corev1.Node) bool { return markedBySluice(n) }
func (s *sluiceDrift) fresh(n *corev1.Node) bool  { return onImage("img-2")(n) }
func (s *sluiceDrift) check(b *testing.B)         { b.Helper(); s.ctl.mustRun(b, "during the drift") }
func (s *sluiceDrift) stop()                      { s.ctl.stop() }

// karpenterDrift is Karpenter's kwok provider with the scene's NodePool.
type karpenterDrift struct {
	karpenterSide
}

// karpenterDisrupted is the taint Karpenter puts on a node it has chosen to
// disrupt, before it launches the node's replacement.
const karpenterDisrupted = "karpenter.sh/disrupted"

func (k *karpenterDrift) drift(b *testing.B) {
	b.Helper()
	kubectlApply(b, k.kctl, k.sb, karpenterDriftObjects("img-2"))
}

func (k *karpenterDrift) chosen(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpenterDisrupted })
}

func (k *karpenterDrift) fresh(n *corev1.Node) bool {
	return n.Labels["bench.sluice.dev/image"] == "img-2" &&
		!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "karpenter.sh/unregistered" })
}

// karpenterDriftObjects are Karpenter's KWOKNodeClass and NodePool for the
// drift scene: one instance type, the 10 % budget, no consolidation of
// nodes in use, no expiry, and a label naming the image, whose change
// drifts every node.
func karpenterDriftObjects(image string) string {
	return fmt.Sprintf(`apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: %s
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    metadata:
      labels:
        bench.sluice.dev/pool: %s
        bench.sluice.dev/image: %s
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      expireAfter: Never
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [%q]}
      - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
    budgets:
    - nodes: "%d%%"
`, driftSideBoot, driftSidePool, driftSidePool, image, driftSideType, driftSideBudget)
}

var (
	_ driftSide = (*sluiceDrift)(nil)
	_ driftSide = (*karpenterDrift)(nil)
)
