package uninstall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Options say where sluice runs and how to go about removing it.
type Options struct {
	// Namespace is the controller's: its Deployment, Lease, timelines and
	// claims are there.
	Namespace string
	// Deployment and DaemonSet are the controller's and the agents' (the
	// chart's names by default); Lease is the controller's leader lease.
	Deployment, DaemonSet, Lease string
	// ClaimConfigMaps are the providers' claims (azure-vmss, aks-agentpool).
	ClaimConfigMaps []string
	// StopTimeout is how long to wait for the controller to stop before
	// giving up with nothing changed on the nodes.
	StopTimeout time.Duration
	// DryRun lists what would be removed and changes nothing.
	DryRun bool
	Clock  clock.PassiveClock
	// Dynamic reaches Cluster API's Machines, whose pre-drain hooks sluice
	// removes; nil leaves them (a cluster without Cluster API).
	Dynamic dynamic.Interface
}

// Report is what was removed (or, with DryRun, would be), and what was left
// on purpose.
type Report struct {
	DryRun  bool         `json:"dryRun,omitempty"`
	Stopped []string     `json:"stopped,omitempty"`
	Nodes   []NodeChange `json:"nodes,omitempty"`
	// Machines are the Cluster API Machines whose pre-drain hook was
	// removed: Cluster API drains them itself from now on.
	Machines []string `json:"machines,omitempty"`
	Deleted  []string `json:"deleted,omitempty"`
	Kept     []string `json:"kept,omitempty"`
}

// Run stops sluice and removes what it put on the cluster.
func Run(ctx context.Context, client kubernetes.Interface, opts Options) (*Report, error) {
	r := &Report{DryRun: opts.DryRun}
	if err := look(ctx, client, opts); err != nil {
		return r, err
	}
	if err := stop(ctx, client, opts, r); err != nil {
		return r, err
	}
	if err := cleanNodes(ctx, client, opts, r); err != nil {
		return r, err
	}
	if opts.Dynamic != nil {
		released, err := clusterapi.ReleaseHooks(ctx, opts.Dynamic, opts.DryRun)
		r.Machines = released
		if err != nil {
			return r, err
		}
	}
	if err := deleteObjects(ctx, client, opts, r); err != nil {
		return r, err
	}
	r.Kept = append(r.Kept, "NodePools and their CRD: helm uninstall keeps CRDs; delete them with kubectl delete crd nodepools.sluice.dev when they are not wanted",
		"cloud machines: sluice deletes none on uninstall")
	return r, nil
}

// look reads what the next steps change before anything is changed, so
// that a cluster that cannot be read (or a namespace that is not sluice's)
// is found before the controller is stopped.
func look(ctx context.Context, client kubernetes.Interface, opts Options) error {
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	if _, err := client.AppsV1().Deployments(opts.Namespace).Get(ctx, opts.Deployment, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the controller's deployment %s/%s: %w", opts.Namespace, opts.Deployment, err)
	}
	if _, err := client.CoordinationV1().Leases(opts.Namespace).Get(ctx, opts.Lease, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the controller's lease %s/%s: %w", opts.Namespace, opts.Lease, err)
	}
	return nil
}

// stop scales the controller to zero, deletes the agents, and waits until
// no controller holds the Lease, so that nothing puts back what the next
// steps remove.
func stop(ctx context.Context, client kubernetes.Interface, opts Options, r *Report) error {
	scale := []byte(`{"spec":{"replicas":0}}`)
	what := "deployment/" + opts.Deployment + " scaled to 0"
	if opts.DryRun {
		r.Stopped = append(r.Stopped, what, "daemonset/"+opts.DaemonSet+" deleted")
		return nil
	}
	_, err := client.AppsV1().Deployments(opts.Namespace).Patch(ctx, opts.Deployment, types.MergePatchType, scale, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		what = "deployment/" + opts.Deployment + " not found"
	case err != nil:
		return fmt.Errorf("stopping the controller (scaling deployment %s/%s to 0): %w", opts.Namespace, opts.Deployment, err)
	}
	r.Stopped = append(r.Stopped, what)
	err = client.AppsV1().DaemonSets(opts.Namespace).Delete(ctx, opts.DaemonSet, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.Stopped = append(r.Stopped, "daemonset/"+opts.DaemonSet+" not found")
	case err != nil:
		return fmt.Errorf("stopping the agents (deleting daemonset %s/%s): %w", opts.Namespace, opts.DaemonSet, err)
	default:
		r.Stopped = append(r.Stopped, "daemonset/"+opts.DaemonSet+" deleted")
	}
	var holder string
	err = wait.PollUntilContextTimeout(ctx, time.Second, opts.StopTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases(opts.Namespace).Get(ctx, opts.Lease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil //nolint:nilerr // asked again until the timeout; a lasting failure ends as one
		}
		holder = held(l, opts.Clock.Now())
		return holder == "", nil
	})
	switch {
	case wait.Interrupted(err) && ctx.Err() == nil:
		return fmt.Errorf("the controller still holds its Lease %s/%s (holder %q) after %s, so nothing was changed on the nodes: "+
			"stop every sluice controller (kubectl -n %s scale deployment %s --replicas 0), then run sluice uninstall again",
			opts.Namespace, opts.Lease, holder, opts.StopTimeout, opts.Namespace, opts.Deployment)
	case err != nil:
		return fmt.Errorf("waiting for the controller to stop (Lease %s/%s): %w", opts.Namespace, opts.Lease, err)
	}
	r.Stopped = append(r.Stopped, "lease/"+opts.Lease+" free: no controller runs")
	return nil
}

// held is the Lease's holder while its lease runs, "" when it was released
// or lapsed.
func held(l *coordinationv1.Lease, now time.Time) string {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return ""
	}
	if now.After(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)) {
		return ""
	}
	return *s.HolderIdentity
}

// cleanNodes takes sluice's working state off every node, each in one
// update at the node's resourceVersion, retried on conflict.
func cleanNodes(ctx context.Context, client kubernetes.Interface, opts Options, r *Report) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var errs []error
	for i := range nodes.Items {
		change, err := cleanNode(ctx, client, &nodes.Items[i], opts.DryRun)
		if err != nil {
			errs = append(errs, err)
		}
		if !change.Empty() || change.Kept != "" {
			r.Nodes = append(r.Nodes, change)
		}
	}
	return errors.Join(errs...)
}

func cleanNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node, dryRun bool) (NodeChange, error) {
	clean, change := Clean(n)
	if dryRun || change.Empty() {
		return change, nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := client.CoreV1().Nodes().Update(ctx, clean, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
		now, gerr := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		clean, change = Clean(now)
		return err
	})
	if apierrors.IsNotFound(err) {
		return change, nil // deleted meanwhile: its finalizer was the last thing holding it
	}
	if err != nil {
		return change, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return change, nil
}

// deleteObjects deletes the timelines, the providers' claims and the Lease
// that exist.
func deleteObjects(ctx context.Context, client kubernetes.Interface, opts Options, r *Report) error {
	cms := client.CoreV1().ConfigMaps(opts.Namespace)
	all, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the ConfigMaps of %s: %w", opts.Namespace, err)
	}
	var errs []error
	for _, cm := range all.Items {
		if _, timeline := cm.Labels[contract.LabelTimeline]; !timeline && !slices.Contains(opts.ClaimConfigMaps, cm.Name) {
			continue
		}
		if err := deleteOne(opts.DryRun, "configmap/"+cm.Name, r, func() error { return cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}) }); err != nil {
			errs = append(errs, err)
		}
	}
	leases := client.CoordinationV1().Leases(opts.Namespace)
	if _, err := leases.Get(ctx, opts.Lease, metav1.GetOptions{}); err == nil {
		if err := deleteOne(opts.DryRun, "lease/"+opts.Lease, r, func() error { return leases.Delete(ctx, opts.Lease, metav1.DeleteOptions{}) }); err != nil {
			errs = append(errs, err)
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("reading lease %s: %w", opts.Lease, err))
	}
	return errors.Join(errs...)
}

func deleteOne(dryRun bool, what string, r *Report, del func() error) error {
	if dryRun {
		r.Deleted = append(r.Deleted, what)
		return nil
	}
	switch err := del(); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("deleting %s: %w", what, err)
	}
	r.Deleted = append(r.Deleted, what)
	return nil
}
