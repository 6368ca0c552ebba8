// Package claims tells the termination queue about drains it does not run:
// a person's `sluice drain`, or another program using pkg/drain, holds a
// claim on the node it drains (the sluice.dev/drain annotation, renewed every
// 10 s). While the claim is live the node counts against the queue's caps,
// so the controller's voluntary work waits for a person's drain as it waits
// for its own.
package claims

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// Queue is what the reconciler tells; termination.Queue implements it.
type Queue interface {
	Outside(node, pool, holder string, until time.Time)
	OutsideEnded(node string)
}

// Reconciler follows the drain claims on nodes.
type Reconciler struct {
	kube     client.Reader // the shared cache
	clock    clock.Clock
	queue    Queue
	identity string // the controller's own claims carry it
	poolOf   func(context.Context, *corev1.Node) string
}

// New returns a reconciler; poolOf names a node's NodePool ("" for none).
func New(kube client.Reader, clk clock.Clock, queue Queue, identity string, poolOf func(context.Context, *corev1.Node) string) *Reconciler {
	return &Reconciler{kube: kube, clock: clk, queue: queue, identity: identity, poolOf: poolOf}
}

// SetupWithManager watches nodes whose claim changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	claimOf := func(obj client.Object) string { return obj.GetAnnotations()[contract.AnnotationDrain] }
	changed := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return claimOf(e.Object) != "" },
		UpdateFunc:  func(e event.UpdateEvent) bool { return claimOf(e.ObjectOld) != claimOf(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return claimOf(e.Object) != "" },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("claims").
		For(&corev1.Node{}, builder.WithPredicates(changed)).
		Complete(r)
}

// Reconcile records or forgets the node's drain by someone else; a live
// claim is looked at again when it would lapse unrenewed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	err := r.kube.Get(ctx, types.NamespacedName{Name: req.Name}, node)
	if apierrors.IsNotFound(err) {
		r.queue.OutsideEnded(req.Name)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	holder, until, live := ownership.LiveClaim(node, r.clock.Now())
	if !live || holder == r.identity {
		r.queue.OutsideEnded(req.Name)
		return reconcile.Result{}, nil
	}
	r.queue.Outside(req.Name, r.poolOf(ctx, node), holder, until)
	return reconcile.Result{RequeueAfter: until.Sub(r.clock.Now()) + time.Second}, nil
}
