package drain

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// A cordon does not stop a pod from landing on the node at once: the
// scheduler may bind one in the moment before its cache shows the cordon, and
// the watch the drain reads can run behind the API server. So a drain that
// has emptied the node asks the API server itself, and drains what it did not
// know of, before it calls the node drained.
const (
	// sweepRounds bounds the rounds: a pod that something keeps binding to
	// the cordoned node is reported, not chased forever.
	sweepRounds = 3
	// sweepWatchWait is how long a round waits for the watch to show the
	// pods the API server named, so they are drained from what it shows.
	sweepWatchWait = 10 * time.Second
)

// sweepBackoff retries the API server's list through passing errors.
var sweepBackoff = wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1}

// sweep drains the pods the API server says are on the node and this drain
// has not seen. It returns the pods still unknown after the last round, or
// the error that kept it from asking.
func (nd *nodeDrain) sweep(ctx context.Context) ([]string, error) {
	for round := 0; ; round++ {
		fresh, err := nd.unknownPods(ctx)
		if err != nil || len(fresh) == 0 || round == sweepRounds || ctx.Err() != nil || nd.timeLeft() <= 0 {
			return podKeys(fresh), err
		}
		nd.awaitWatched(ctx, fresh)
		pods, err := nd.sortedPods()
		if err != nil {
			return podKeys(fresh), err
		}
		nd.classifyAll(ctx, pods)
		nd.evictAll(ctx)
	}
}

// unknownPods lists the node's pods from the API server (a consistent read)
// and returns those the drain covers and has no state for. DaemonSet pods
// are not among them: they tolerate the cordon by design, and their
// DaemonSet recreates an evicted one at once; the drain's flags decided
// their fate when it began.
func (nd *nodeDrain) unknownPods(ctx context.Context) ([]*corev1.Pod, error) {
	var pods []corev1.Pod
	err := retry.OnError(sweepBackoff, func(err error) bool { return ctx.Err() == nil && !apierrors.IsForbidden(err) }, func() error {
		var err error
		pods, err = listPods(ctx, nd.client, metav1.NamespaceAll, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nd.name).String(),
			LabelSelector: nd.opts.PodSelector.String(),
		}, nd.opts.ChunkSize)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("asking the API server which pods are still on the node: %w", err)
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var fresh []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		if _, known := nd.byUID[pod.UID]; known || (nd.opts.PodFilter != nil && !nd.opts.PodFilter(pod)) {
			continue
		}
		if DaemonSetOf(pod) != nil {
			continue
		}
		fresh = append(fresh, pod)
	}
	return fresh, nil
}

// awaitWatched waits, briefly, until the watch shows each pod: the drain
// learns of their deletion from it. A pod it never shows is asked about
// again in the next round.
func (nd *nodeDrain) awaitWatched(ctx context.Context, pods []*corev1.Pod) {
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, min(sweepWatchWait, nd.timeLeft()), true, func(context.Context) (bool, error) {
		return !slices.ContainsFunc(pods, func(want *corev1.Pod) bool {
			p, err := nd.pods.get(want.Namespace, want.Name)
			return err != nil || p.UID != want.UID
		}), nil
	})
}

// timeLeft is the time until the drain's timeout or deadline; a drain
// without either has all the time it wants.
func (nd *nodeDrain) timeLeft() time.Duration {
	if nd.stopAt.IsZero() {
		return time.Duration(math.MaxInt64)
	}
	return nd.stopAt.Sub(nd.clock.Now())
}

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// sweepMessage says why the sweep could not call the node empty.
func sweepMessage(left []string, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d pod(s) kept arriving on the node after it was cordoned (%s): something binds pods to it directly",
		len(left), strings.Join(left[:min(5, len(left))], ", "))
}
