package uninstall

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// scene is sluice as the chart installs it, in the test's namespace, at
// work on four nodes: a controller Deployment whose one "pod" (a goroutine
// standing in for the process, as the sandbox runs no containers) holds
// the leader Lease until the Deployment is scaled to zero, then releases
// it as controller-runtime does; the agents' DaemonSet; nodes mid-drain,
// mid-delete and cordoned by people; timelines and claims.
type scene struct {
	env     *sandboxtest.Env
	opts    Options
	nodes   map[string]string // role → node name
	stopped chan struct{}
}

func newScene(t *testing.T, stopsWhenScaled bool) *scene {
	env := sandboxtest.New(t)
	s := &scene{env: env, nodes: map[string]string{}, stopped: make(chan struct{}),
		opts: Options{Namespace: env.Namespace, Deployment: "sluice-controller", DaemonSet: "sluice-agent", Lease: "sluice-controller",
			ClaimConfigMaps: []string{"sluice-azure-vmss-claims"}, StopTimeout: 20 * time.Second, Clock: clock.RealClock{}}}
	ctx := context.Background()
	c := env.Client
	labels := map[string]string{"app": "sluice"}
	pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sluice", Image: "sluice"}}}}
	if _, err := c.AppsV1().Deployments(env.Namespace).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "sluice-controller"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().DaemonSets(env.Namespace).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "sluice-agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.lead(t, stopsWhenScaled)
	s.node(t, "draining", func(n *corev1.Node) {
		n.Finalizers = []string{contract.FinalizerTermination}
		n.Spec.Unschedulable = true
		n.Annotations = map[string]string{contract.AnnotationCordonedBy: ownership.MaintenanceOwner("evt-1"), contract.AnnotationDrain: `{"holder":"sluice-controller"}`,
			contract.AnnotationMachine: "web-abc12"}
		n.Spec.Taints = []corev1.Taint{{Key: contract.TaintMaintenance, Value: "evt-1", Effect: corev1.TaintEffectNoSchedule}}
	})
	s.node(t, "personal", func(n *corev1.Node) {
		n.Finalizers = []string{contract.FinalizerTermination}
		n.Spec.Unschedulable = true
	})
	s.node(t, "drained by a person", func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Annotations = map[string]string{contract.AnnotationCordonedBy: ownership.OwnerCLI}
	})
	s.node(t, "unregistered", func(n *corev1.Node) {
		n.Finalizers = []string{contract.FinalizerTermination}
		n.Spec.Taints = []corev1.Taint{{Key: contract.TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoExecute},
			{Key: contract.TaintConsolidation, Effect: corev1.TaintEffectPreferNoSchedule}}
	})
	for name, l := range map[string]map[string]string{"timeline-web-1": {contract.LabelTimeline: "true"}, "sluice-azure-vmss-claims": nil, "someone-elses": nil} {
		if _, err := c.CoreV1().ConfigMaps(env.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// lead is the controller's pod: it renews the Lease every second, and once
// the Deployment wants no replica (and it was asked to stop then), it
// stops and releases the Lease.
func (s *scene) lead(t *testing.T, stopsWhenScaled bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.WaitGroup
	once.Add(1)
	t.Cleanup(func() { cancel(); once.Wait() })
	c, ns := s.env.Client, s.env.Namespace
	now := metav1.NewMicroTime(time.Now())
	if _, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "sluice-controller"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("sluice-controller-7d9f"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &now}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer once.Done()
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			d, err := c.AppsV1().Deployments(ns).Get(ctx, "sluice-controller", metav1.GetOptions{})
			if err == nil && ptr.Deref(d.Spec.Replicas, 1) == 0 && stopsWhenScaled {
				release(ctx, c, ns)
				close(s.stopped)
				return
			}
			renew(ctx, c, ns)
		}
	}()
}

func renew(ctx context.Context, c kubernetes.Interface, ns string) {
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, "sluice-controller", metav1.GetOptions{})
	if err != nil {
		return
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	_, _ = c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
}

func release(ctx context.Context, c kubernetes.Interface, ns string) {
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, "sluice-controller", metav1.GetOptions{})
	if err != nil {
		return
	}
	l.Spec.HolderIdentity = ptr.To("")
	_, _ = c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
}

func (s *scene) node(t *testing.T, role string, edit func(*corev1.Node)) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sandboxtest.UniqueName("uninstall-")}}
	edit(n)
	if _, err := s.env.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.nodes[role] = n.Name
	t.Cleanup(func() {
		ctx := context.Background()
		if now, err := s.env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil && len(now.Finalizers) > 0 {
			now.Finalizers = nil
			_, _ = s.env.Client.CoreV1().Nodes().Update(ctx, now, metav1.UpdateOptions{})
		}
		_ = s.env.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	})
}

func (s *scene) get(t *testing.T, role string) *corev1.Node {
	t.Helper()
	n, err := s.env.Client.CoreV1().Nodes().Get(context.Background(), s.nodes[role], metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s (%s): %v", s.nodes[role], role, err)
	}
	return n
}

// Uninstalling stops the controller first, then leaves no node that
// `kubectl delete node` cannot delete, lifts the cordons sluice placed and
// keeps a person's, and deletes sluice's objects and no one else's.
func TestUninstallLeavesNothingThatBlocks(t *testing.T) {
	s := newScene(t, true)
	ctx := context.Background()
	// A node being deleted already: sluice's finalizer holds it.
	if err := s.env.Client.CoreV1().Nodes().Delete(ctx, s.nodes["draining"], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := Run(ctx, s.env.Client, s.opts)
	if err != nil {
		t.Fatalf("Run: %v (report %+v)", err, r)
	}
	select {
	case <-s.stopped:
	default:
		t.Error("Run finished while the controller still ran")
	}
	if _, err := s.env.Client.AppsV1().DaemonSets(s.env.Namespace).Get(ctx, "sluice-agent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the agents' DaemonSet after Run: %v; want it deleted", err)
	}
	// The node being deleted is gone, its finalizer lifted.
	s.env.WaitFor(t, 10*time.Second, "the node being deleted gone", func(ctx context.Context) (bool, error) {
		_, err := s.env.Client.CoreV1().Nodes().Get(ctx, s.nodes["draining"], metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// kubectl delete node of a pool node completes.
	if err := s.env.Client.CoreV1().Nodes().Delete(ctx, s.nodes["unregistered"], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 10*time.Second, "a pool node deleted after the uninstall", func(ctx context.Context) (bool, error) {
		_, err := s.env.Client.CoreV1().Nodes().Get(ctx, s.nodes["unregistered"], metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if n := s.get(t, "personal"); !n.Spec.Unschedulable || slices.Contains(n.Finalizers, contract.FinalizerTermination) {
		t.Errorf("a person's cordoned node: unschedulable %v, finalizers %v; want it cordoned still, without sluice's finalizer", n.Spec.Unschedulable, n.Finalizers)
	}
	if n := s.get(t, "drained by a person"); !n.Spec.Unschedulable {
		t.Error("the cordon of a person's sluice drain was lifted")
	}
	cms, err := s.env.Client.CoreV1().ConfigMaps(s.env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, cm := range cms.Items {
		left = append(left, cm.Name)
	}
	if slices.Contains(left, "timeline-web-1") || slices.Contains(left, "sluice-azure-vmss-claims") || !slices.Contains(left, "someone-elses") {
		t.Errorf("ConfigMaps left: %v; want sluice's timeline and claims deleted, someone-elses kept", left)
	}
	if _, err := s.env.Client.CoordinationV1().Leases(s.env.Namespace).Get(ctx, "sluice-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease after Run: %v; want it deleted", err)
	}
	if len(r.Nodes) < 4 || len(r.Deleted) != 3 {
		t.Errorf("the report names %d nodes and deleted %v; want the 4 nodes and 3 objects", len(r.Nodes), r.Deleted)
	}
}

// --dry-run says what it would remove and changes nothing, not even the
// controller's replicas.
func TestUninstallDryRunChangesNothing(t *testing.T) {
	s := newScene(t, true)
	s.opts.DryRun = true
	before := s.get(t, "draining")
	r, err := Run(context.Background(), s.env.Client, s.opts)
	if err != nil {
		t.Fatal(err)
	}
	if after := s.get(t, "draining"); !sameSluiceState(before, after) {
		t.Errorf("a dry run changed a node: %+v, then %+v", before, after)
	}
	d, err := s.env.Client.AppsV1().Deployments(s.env.Namespace).Get(context.Background(), "sluice-controller", metav1.GetOptions{})
	if err != nil || ptr.Deref(d.Spec.Replicas, 0) != 1 {
		t.Errorf("a dry run scaled the controller: %v", err)
	}
	var draining *NodeChange
	for i := range r.Nodes {
		if r.Nodes[i].Node == s.nodes["draining"] {
			draining = &r.Nodes[i]
		}
	}
	if !r.DryRun || draining == nil || !draining.Finalizer || draining.Uncordoned == "" || len(r.Deleted) != 3 {
		t.Errorf("the dry run's report = %+v; want the draining node's finalizer and cordon and 3 objects listed", r)
	}
}

// A controller that does not stop (another one outside the chart, say)
// keeps every node as it was: Run gives up and says what to do.
func TestUninstallWithAControllerThatWillNotStop(t *testing.T) {
	s := newScene(t, false)
	s.opts.StopTimeout = 4 * time.Second
	before := s.get(t, "draining")
	_, err := Run(context.Background(), s.env.Client, s.opts)
	if err == nil {
		t.Fatal("Run succeeded with the controller still holding its Lease")
	}
	if after := s.get(t, "draining"); !sameSluiceState(before, after) {
		t.Errorf("a node was changed although the controller still ran (%v): %+v, then %+v", err, before, after)
	}
	t.Logf("the refusal: %v", err)
}

// sameSluiceState compares what sluice put on two readings of a node (the
// node lifecycle controller taints a node without a kubelet meanwhile).
func sameSluiceState(a, b *corev1.Node) bool {
	_, ca := Clean(a)
	_, cb := Clean(b)
	ca.Node, cb.Node = "", ""
	return a.Spec.Unschedulable == b.Spec.Unschedulable && slices.Equal(a.Finalizers, b.Finalizers) &&
		slices.Equal(ca.Taints, cb.Taints) && slices.Equal(ca.Annotations, cb.Annotations) && ca.Uncordoned == cb.Uncordoned
}
