// Package nodepool keeps each NodePool's status true: how many nodes it
// selects, and a Ready condition that says, on the pool itself, when the pool
// cannot be applied (a nodeSelector that does not parse). A broken pool
// affects only itself: the maintenance controller passes over it, and this
// controller makes it visible with a condition, an Event and a metric.
package nodepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Condition types and reasons on a NodePool.
const (
	ConditionReady = "Ready"

	ReasonValid               = "Valid"
	ReasonInvalidNodeSelector = "InvalidNodeSelector"
)

// Metrics are the NodePool controller's metrics.
type Metrics struct {
	Ready *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{Ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_nodepool_ready",
		Help: "1 when the NodePool can be applied, 0 when its Ready condition is False (see the condition's reason)."}, []string{"nodepool"})}
	reg.MustRegister(m.Ready)
	return m
}

// Controller reconciles NodePool status.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
	metrics  *Metrics
	log      *slog.Logger
}

// NewController returns the controller; SetupWithManager registers it.
func NewController(kube client.Client, recorder record.EventRecorder, metrics *Metrics, log *slog.Logger) *Controller {
	return &Controller{kube: kube, recorder: recorder, metrics: metrics, log: log}
}

// SetupWithManager watches NodePools, and nodes as they come, go or change
// labels (which changes the pools' node counts).
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	nodeChanged := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return fmt.Sprint(e.ObjectOld.GetLabels()) != fmt.Sprint(e.ObjectNew.GetLabels())
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodepool").
		For(&v1alpha1.NodePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A pool's node count depends on the other pools (the oldest wins a
		// node two select): a change to one is a change to all.
		Watches(&v1alpha1.NodePool{}, handler.EnqueueRequestsFromMapFunc(c.allPools), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.allPools), builder.WithPredicates(nodeChanged)).
		Complete(c)
}

func (c *Controller) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.NodePoolList
	if err := c.kube.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, p := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}}
	}
	return out
}

// Reconcile writes one pool's node count and Ready condition.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pool := &v1alpha1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			c.metrics.Ready.DeleteLabelValues(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	var all v1alpha1.NodePoolList
	if err := c.kube.List(ctx, &all); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing node pools: %w", err)
	}
	cond, count := judge(pool, nodes.Items, all.Items)
	ready := 1.0
	if cond.Status != metav1.ConditionTrue {
		ready = 0
	}
	c.metrics.Ready.WithLabelValues(pool.Name).Set(ready)
	before := meta.FindStatusCondition(pool.Status.Conditions, ConditionReady)
	if before != nil && before.Status == cond.Status && before.Reason == cond.Reason && before.Message == cond.Message &&
		before.ObservedGeneration == cond.ObservedGeneration && pool.Status.Nodes == count {
		return reconcile.Result{}, nil
	}
	orig := pool.DeepCopy()
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	pool.Status.Nodes = count
	if err := c.kube.Status().Patch(ctx, pool, client.MergeFrom(orig), client.FieldOwner("sluice")); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of node pool %s: %w", pool.Name, err)
	}
	if cond.Status == metav1.ConditionFalse && (before == nil || before.Status != metav1.ConditionFalse || before.Message != cond.Message) {
		c.recorder.Event(pool, corev1.EventTypeWarning, cond.Reason, cond.Message)
		c.log.Error("node pool cannot be applied", "nodepool", pool.Name, "reason", cond.Reason, "message", cond.Message)
	}
	return reconcile.Result{}, nil
}

// judge computes the pool's Ready condition and how many nodes it selects.
func judge(pool *v1alpha1.NodePool, nodes []corev1.Node, all []v1alpha1.NodePool) (metav1.Condition, int32) {
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: "the pool applies to the nodes it selects", ObservedGeneration: pool.Generation}
	if selErr := selectorError(pool); selErr != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonInvalidNodeSelector
		cond.Message = selErr.Error() + "; its nodes get the default maintenance policy until it is fixed"
		return cond, 0
	}
	count := int32(0)
	for i := range nodes {
		if owner, _ := pools.For(&nodes[i], all); owner != nil && owner.Name == pool.Name {
			count++
		}
	}
	return cond, count
}

// selectorError checks the pool's selector on its own (For only reports it
// while matching nodes, and a cluster may have none).
func selectorError(pool *v1alpha1.NodePool) *pools.SelectorError {
	_, err := pools.For(&corev1.Node{}, []v1alpha1.NodePool{*pool})
	var selErr *pools.SelectorError
	if errors.As(err, &selErr) {
		return selErr
	}
	return nil
}
