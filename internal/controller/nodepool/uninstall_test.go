package nodepool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/uninstall"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// Uninstalling sluice in the middle of its work — a drift rollout and a
// Preempt's drain under way, a node cordoned by a person — stops the
// controller first (the leader, told to stop once its Deployment wants no
// replica, releases its Lease), then leaves no node that `kubectl delete
// node` cannot delete, no sluice.dev finalizer, taint or sluice-owned
// cordon, and the person's cordon as it was; nothing is put back after.
func TestUninstallMidRollout(t *testing.T) {
	s := newScene(t, 4, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "1"}}
	})
	// Pods that take their time to leave keep the drains under way.
	s.workload(t, 4, "2")
	before := s.waitNodes(t, 4, time.Minute)
	ctx := context.Background()
	ns := s.env.Namespace
	labels := map[string]string{"app": "sluice-controller"}
	if _, err := s.env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "sluice-controller"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"no": "node"}, Containers: []corev1.Container{{Name: "sluice", Image: "sluice"}}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller as the chart runs it: leader-elected on the Lease
	// sluice-controller; the test plays the kubelet that stops it once its
	// Deployment is scaled to zero.
	stop := s.run(t, func(o *controller.Options) {
		o.LeaderElection, o.LeaseNamespace, o.LeaseName = true, ns, "sluice-controller"
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	})
	t.Cleanup(stop)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			d, err := s.env.Client.AppsV1().Deployments(ns).Get(ctx, "sluice-controller", metav1.GetOptions{})
			if err == nil && ptr.Deref(d.Spec.Replicas, 1) == 0 {
				stop()
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	var drifting string
	s.env.WaitFor(t, time.Minute, "the drift's first node cordoned", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if _, marked := n.Annotations[contract.AnnotationDisruption]; marked && n.Spec.Unschedulable && slices.Contains(before, n.Name) {
				drifting = n.Name
				return true, nil
			}
		}
		return false, nil
	})
	var preempted, personal string
	for _, name := range before {
		switch {
		case name == drifting:
		case preempted == "":
			preempted = name
		case personal == "":
			personal = name
		}
	}
	preempt := maintenance.Event{ID: "preempt-" + preempted, Source: maintenance.SourceAzure, Type: maintenance.TypePreempt,
		Status: maintenance.StatusScheduled, NotBefore: time.Now().Add(time.Minute), Deadline: time.Now().Add(time.Minute)}
	s.annotateNode(t, preempted, contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAzure, false, []maintenance.Event{preempt}).Encode())
	s.env.WaitFor(t, 10*time.Second, preempted+" cordoned for the Preempt", func(ctx context.Context) (bool, error) {
		n, err := s.env.Client.CoreV1().Nodes().Get(ctx, preempted, metav1.GetOptions{})
		return err == nil && ownership.IsMaintenanceOwner(ownership.CordonedBy(n)), err
	})
	if _, err := s.env.Client.CoreV1().Nodes().Patch(ctx, personal, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	r, err := uninstall.Run(ctx, s.env.Client, uninstall.Options{Namespace: ns, Deployment: "sluice-controller", DaemonSet: "sluice-agent",
		Lease: "sluice-controller", StopTimeout: time.Minute, Clock: clock.RealClock{}})
	if err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("uninstall went on while the controller ran")
	}
	t.Logf("uninstall: stopped %v; %d nodes changed; deleted %v", r.Stopped, len(r.Nodes), r.Deleted)

	// Nothing of sluice's is left, nor put back, on any node of the pool.
	s.holdsFor(t, 5*time.Second, "no sluice finalizer, taint or own cordon on the pool's nodes", func(ctx context.Context) bool {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range nodes {
			owner := ownership.CordonedBy(n)
			if slices.Contains(n.Finalizers, contract.FinalizerTermination) || owner != "" && owner != ownership.OwnerCLI ||
				slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
					return t.Key == contract.TaintMaintenance || t.Key == contract.TaintConsolidation || t.Key == contract.TaintUnregistered
				}) {
				t.Logf("node %s: finalizers %v, cordoned by %q, taints %v", n.Name, n.Finalizers, owner, n.Spec.Taints)
				return false
			}
		}
		return true
	})
	if n, err := s.env.Client.CoreV1().Nodes().Get(ctx, personal, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("the person's cordon on %s: %v; want it kept", personal, err)
	}
	// kubectl delete node of a pool node completes.
	if err := s.env.Client.CoreV1().Nodes().Delete(ctx, preempted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 10*time.Second, preempted+" deleted", func(ctx context.Context) (bool, error) {
		_, err := s.env.Client.CoreV1().Nodes().Get(ctx, preempted, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
