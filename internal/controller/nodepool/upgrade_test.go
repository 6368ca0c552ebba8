package nodepool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// upgrade sets the pool's upgrade settings and its template's image, as
// `sluice upgrade pool` does.
func (s *scene) upgrade(t *testing.T, image string, u v1alpha1.UpgradeSpec) {
	t.Helper()
	s.edit(t, func(p *v1alpha1.NodePool) {
		p.Spec.Upgrade = &u
		p.Spec.Template.Image = image
	})
}

// waitUpgrade waits until the pool's upgrade to image is in phase.
func (s *scene) waitUpgrade(t *testing.T, image string, phase v1alpha1.UpgradePhase, timeout time.Duration) *v1alpha1.UpgradeStatus {
	t.Helper()
	var st *v1alpha1.UpgradeStatus
	s.env.WaitFor(t, timeout, "upgrade "+string(phase), func(ctx context.Context) (bool, error) {
		st = s.pool(t).Status.Upgrade
		return st != nil && st.Image == image && st.Phase == phase, nil
	})
	return st
}

func surge(v intstr.IntOrString) *intstr.IntOrString { return &v }

// A 10-node pool upgraded with maxSurge 33% (4 nodes): surge nodes first,
// so the pool never has fewer Ready, schedulable nodes than before; at most
// 4 old nodes at once; the PDB always holds; every node ends on the new
// image, and the provider holds exactly the pool's 10 machines.
func TestUpgradeSurgesAThirdAtATime(t *testing.T) {
	s := newScene(t, 10, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "40%"}}
	})
	s.workload(t, 20, "16")
	before := s.waitNodes(t, 10, time.Minute)
	s.start(t)
	a := s.audit(t)
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromString("33%"))})
	st := s.waitUpgrade(t, "img-2", v1alpha1.UpgradeSucceeded, 5*time.Minute)
	a.check(t, 4)
	a.mu.Lock()
	minServing, most := a.minServing, a.maxDisrupting
	a.mu.Unlock()
	if minServing < 10 {
		t.Errorf("the pool had %d Ready, schedulable nodes at one point; a surge upgrade must never go below the 10 it had", minServing)
	}
	if most < 2 {
		t.Errorf("at most %d node(s) were upgraded at once; maxSurge 33%% allows 4", most)
	}
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if slices.Contains(before, n.Name) || n.Annotations[contract.AnnotationImage] != "img-2" {
			t.Errorf("node %s (image %s) is still there after the upgrade", n.Name, n.Annotations[contract.AnnotationImage])
		}
		// The forecast's observed boot time: from the request to serving,
		// never less than the provider's 1 s boot.
		if d, err := time.ParseDuration(n.Annotations[contract.AnnotationBootTime]); err != nil || d < time.Second {
			t.Errorf("node %s notes boot time %q, want a duration of at least the 1s boot", n.Name, n.Annotations[contract.AnnotationBootTime])
		}
	}
	if st.Upgraded != 10 || st.Nodes != 10 || st.CompletedAt == nil {
		t.Errorf("status.upgrade %+v; want 10 of 10 upgraded, completed", st)
	}
	if machines, err := s.kwok.List(context.Background(), s.name); err != nil || len(machines) != 10 {
		t.Errorf("the provider holds %d machines after the upgrade (err %v), want 10", len(machines), err)
	}
	s.env.WaitForPods(t, "app=web", 20)
}

// maxUnavailable without surge: each node is drained first (its pods go
// to the others), then its replacement is made, and the empty old node is
// deleted once the replacement serves. One node at a time is out, and the
// pool ends with its 4 nodes, all on the new image.
func TestUpgradeDrainsFirstWithMaxUnavailable(t *testing.T) {
	s := newScene(t, 4, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "2"}}
	})
	s.workload(t, 8, "6")
	s.start(t)
	a := s.audit(t)
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(0)), MaxUnavailable: surge(intstr.FromInt32(1))})
	st := s.waitUpgrade(t, "img-2", v1alpha1.UpgradeSucceeded, 4*time.Minute)
	a.check(t, 1)
	if st.Upgraded != 4 || st.Nodes != 4 {
		t.Errorf("status.upgrade %+v; want 4 of 4 upgraded", st)
	}
	s.env.WaitFor(t, time.Minute, "the pool settled", func(ctx context.Context) (bool, error) { return s.settled(ctx, t) })
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := countImage(nodes, "img-2"); got != 4 || len(nodes) != 4 {
		t.Errorf("%d of %d nodes on img-2, want 4 of 4", got, len(nodes))
	}
	s.env.WaitForPods(t, "app=web", 8)
}

// undrainableScene is a 3-node pool where one node runs the only replica
// of a Deployment whose PDB never allows an eviction.
func undrainableScene(t *testing.T, behavior v1alpha1.UndrainableNodeBehavior) (*scene, string) {
	s := newScene(t, 3, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "2"}}
	})
	nodes := s.waitNodes(t, 3, time.Minute)
	slices.Sort(nodes)
	stuck := nodes[0]
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "single", 1, fixture.NodeSelector(map[string]string{corev1.LabelHostname: stuck}),
		fixture.Requests("100m", "128Mi")), fixture.PDB(s.env.Namespace, "single", "single", fixture.MinAvailable("1")))
	s.env.WaitForPods(t, "app=single", 1)
	s.start(t)
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(1)), DrainTimeout: &metav1.Duration{Duration: 15 * time.Second},
		UndrainableNodeBehavior: behavior})
	return s, stuck
}

// Schedule: the node that will not drain goes back into service on its old
// image, labelled Blocked, its surge node is removed, the other nodes are
// upgraded, and the upgrade ends Failed naming it.
func TestUndrainableNodeIsScheduledBack(t *testing.T) {
	s, stuck := undrainableScene(t, v1alpha1.UndrainableSchedule)
	st := s.waitUpgrade(t, "img-2", v1alpha1.UpgradeFailed, 4*time.Minute)
	if !slices.Equal(st.Blocked, []string{stuck}) || len(st.Quarantined) != 0 || st.Upgraded != 2 {
		t.Errorf("status.upgrade %+v; want %s blocked, 2 upgraded", st, stuck)
	}
	s.env.WaitFor(t, time.Minute, "the surge node removed and the pool back to 3 nodes", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		return err == nil && len(nodes) == 3, err
	})
	n := &corev1.Node{}
	if err := s.kube.Get(context.Background(), clientKey(stuck), n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || n.Labels[contract.LabelUpgradeStatus] != v1alpha1.UpgradeStatusBlocked ||
		n.Annotations[contract.AnnotationImage] != "img-1" || n.Annotations[contract.AnnotationDisruption] != "" {
		t.Errorf("blocked node: unschedulable %v, labels %v, annotations %v; want schedulable, Blocked, img-1, no record", n.Spec.Unschedulable, n.Labels, n.Annotations)
	}
	if machines, err := s.kwok.List(context.Background(), s.name); err != nil || len(machines) != 3 {
		t.Errorf("the provider holds %d machines (err %v), want 3: the blocked node's surge node must go", len(machines), err)
	}
	s.env.WaitForPods(t, "app=single", 1)
}

// Cordon: the node stays cordoned on its old image, labelled Quarantined,
// and its surge node stays; one quarantined node is within maxBlockedNodes
// (the surge count, 1), so the others are upgraded, and the upgrade ends
// Failed naming it.
func TestUndrainableNodeIsQuarantined(t *testing.T) {
	s, stuck := undrainableScene(t, v1alpha1.UndrainableCordon)
	st := s.waitUpgrade(t, "img-2", v1alpha1.UpgradeFailed, 4*time.Minute)
	if !slices.Equal(st.Quarantined, []string{stuck}) || len(st.Blocked) != 0 || st.Upgraded != 3 || st.Nodes != 4 {
		t.Errorf("status.upgrade %+v; want %s quarantined, 3 of 4 upgraded (its surge node kept)", st, stuck)
	}
	n := &corev1.Node{}
	if err := s.kube.Get(context.Background(), clientKey(stuck), n); err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Labels[contract.LabelUpgradeStatus] != v1alpha1.UpgradeStatusQuarantined || n.Annotations[contract.AnnotationDisruption] != "" {
		t.Errorf("quarantined node: unschedulable %v, labels %v; want cordoned, Quarantined, no record", n.Spec.Unschedulable, n.Labels)
	}
	if machines, err := s.kwok.List(context.Background(), s.name); err != nil || len(machines) != 4 {
		t.Errorf("the provider holds %d machines (err %v), want 4: the quarantined node and its kept surge node", len(machines), err)
	}
}

// settled says whether no node of the pool is in an upgrade's hands (no
// record short of the deletion controller's), no node is cordoned by the
// upgrade, and the provider holds as many machines as the pool has nodes.
func (s *scene) settled(ctx context.Context, t *testing.T) (bool, error) {
	nodes, err := s.nodes(ctx)
	if err != nil {
		return false, err
	}
	for _, n := range nodes {
		rec, err := disruption.RecordOf(n)
		if err != nil {
			return false, err
		}
		if rec != nil && rec.Phase != disruption.PhaseTerminating || n.DeletionTimestamp != nil || ownership.CordonedBy(n) == "upgrade" {
			return false, nil
		}
	}
	machines, err := s.kwok.List(ctx, s.name)
	return err == nil && len(machines) == len(nodes), err
}

func countImage(nodes []*corev1.Node, image string) int {
	c := 0
	for _, n := range nodes {
		if n.Annotations[contract.AnnotationImage] == image {
			c++
		}
	}
	return c
}

// Abort mid-rollout: nothing new starts, the nodes in flight are rolled
// back or finished, and the pool is left consistent (no record, no upgrade
// cordon, one machine per node, some nodes still on the old image); resume
// then finishes the upgrade.
func TestUpgradeAbortAndResume(t *testing.T) {
	s := newScene(t, 6, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "2"}}
		p.Spec.Provider.Kwok.BootDelay = &metav1.Duration{Duration: 3 * time.Second}
	})
	s.workload(t, 6, "4")
	s.start(t)
	a := s.audit(t)
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(2)), NodeSoakDuration: &metav1.Duration{Duration: 3 * time.Second}})
	s.env.WaitFor(t, 2*time.Minute, "the first node upgraded, others in flight", func(ctx context.Context) (bool, error) {
		st := s.pool(t).Status.Upgrade
		return st != nil && st.Upgraded >= 1 && st.InFlight >= 1, nil
	})
	s.setUpgradeControl(t, v1alpha1.UpgradeControlAborted)
	s.waitUpgrade(t, "img-2", v1alpha1.UpgradeAborted, time.Minute)
	s.env.WaitFor(t, 2*time.Minute, "the pool settled after the abort", func(ctx context.Context) (bool, error) { return s.settled(ctx, t) })
	// Settled, it stays so: nothing new starts while aborted.
	s.holdsFor(t, 5*time.Second, "the pool stays settled at 6 nodes while aborted", func(ctx context.Context) bool {
		nodes, err := s.nodes(ctx)
		ok, serr := s.settled(ctx, t)
		return err == nil && serr == nil && ok && len(nodes) == 6
	})
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	old := countImage(nodes, "img-1")
	if old == 0 || old == 6 {
		t.Errorf("%d of 6 nodes on the old image after an abort mid-rollout; want some", old)
	}
	s.setUpgradeControl(t, "")
	s.waitUpgrade(t, "img-2", v1alpha1.UpgradeSucceeded, 4*time.Minute)
	a.check(t, 2)
	nodes, err = s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := countImage(nodes, "img-2"); got != len(nodes) || len(nodes) != 6 {
		t.Errorf("after resume %d of %d nodes on img-2, want 6 of 6", got, len(nodes))
	}
}

// A controller killed mid-rollout and started again resumes from the
// nodes' records: no second surge node for a node, none lost, every node
// upgraded, one machine per node.
func TestUpgradeSurvivesAControllerRestart(t *testing.T) {
	s := newScene(t, 6, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "2"}}
		p.Spec.Provider.Kwok.BootDelay = &metav1.Duration{Duration: 2 * time.Second}
	})
	s.workload(t, 6, "4")
	stop := s.run(t, nil)
	a := s.audit(t)
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(2)), NodeSoakDuration: &metav1.Duration{Duration: 2 * time.Second}})
	for _, phase := range []disruption.Phase{disruption.PhaseLaunching, disruption.PhaseDraining, disruption.PhaseSoaking} {
		s.env.WaitFor(t, 2*time.Minute, "a node in phase "+string(phase), func(ctx context.Context) (bool, error) {
			nodes, err := s.nodes(ctx)
			if err != nil {
				return false, err
			}
			for _, n := range nodes {
				if rec, _ := disruption.RecordOf(n); rec != nil && rec.Phase == phase {
					return true, nil
				}
			}
			return false, nil
		})
		stop()
		stop = s.run(t, nil)
	}
	t.Cleanup(func() { stop() })
	s.waitUpgrade(t, "img-2", v1alpha1.UpgradeSucceeded, 4*time.Minute)
	a.check(t, 2)
	s.env.WaitFor(t, time.Minute, "the pool settled", func(ctx context.Context) (bool, error) { return s.settled(ctx, t) })
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := countImage(nodes, "img-2"); got != 6 || len(nodes) != 6 {
		t.Errorf("after restarts %d of %d nodes on img-2, want 6 of 6", got, len(nodes))
	}
}

func (s *scene) setUpgradeControl(t *testing.T, value string) {
	t.Helper()
	p := s.pool(t)
	orig := p.DeepCopy()
	if value == "" {
		delete(p.Annotations, contract.AnnotationUpgrade)
	} else {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[contract.AnnotationUpgrade] = value
	}
	if err := s.kube.Patch(context.Background(), p, clientMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }

func clientMergeFrom(o client.Object) client.Patch { return client.MergeFrom(o) }
