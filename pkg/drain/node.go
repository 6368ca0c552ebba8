package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/pkg/ownership"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// systemCriticalPriority is the priority from which pods are system-critical
// (system-cluster-critical and system-node-critical); they leave last.
const systemCriticalPriority = 2000000000

// nodeDrain is the drain of one node.
type nodeDrain struct {
	*run
	name  string
	node  *corev1.Node
	start time.Time

	pods podSource // the node's pods, as watched

	mu     sync.Mutex
	states []*podState
	byUID  map[types.UID]*podState
	claim  ownership.Claim // as written on the node
}

// podState is one pod's way off the node. Its result fields are written by
// the pod's own goroutine and read once that goroutine has ended.
type podState struct {
	pod   *corev1.Pod
	key   string
	class classification
	// leaving is the classifier's verdict of a pod that must leave, kept
	// when its budget holds it instead (class), so the hold can be looked
	// at again when the budgets change.
	leaving classification
	pdb     *policyv1.PodDisruptionBudget

	gone       chan struct{}
	goneOnce   sync.Once
	goneAt     atomic.Int64  // unix nanoseconds
	settled    chan struct{} // gone, asked to leave, or refused once: its wave may move on
	settleOnce sync.Once
	stuck      atomic.Bool // blocked in a way waiting will not fix
	// unwaited: terminating for longer than SkipWaitForDeleteTimeout, so
	// no longer waited for.
	unwaited atomic.Bool

	started      atomic.Bool
	outcome      PodOutcome
	reason       Reason
	message      string
	pdbName      string
	blockedSince *time.Time
	grace        *int64
	announced    Reason
	denials      int
}

func (st *podState) markGone(at time.Time) {
	st.goneOnce.Do(func() {
		st.goneAt.Store(at.UnixNano())
		close(st.gone)
		st.settle()
	})
}

func (st *podState) isGone() bool {
	select {
	case <-st.gone:
		return true
	default:
		return false
	}
}

func (st *podState) settle() { st.settleOnce.Do(func() { close(st.settled) }) }

func (r *run) drainNode(ctx context.Context, name string) NodeReport {
	nd := &nodeDrain{run: r, name: name, start: r.clock.Now(), byUID: map[types.UID]*podState{}}
	rep := nd.drain(ctx)
	rep.Name = name
	rep.Seconds = r.clock.Since(nd.start).Seconds()
	r.hooks.Observer.Observe(Progress{Time: r.clock.Now(), Node: name, Kind: ProgressNodeFinished, Message: string(rep.Outcome)})
	return rep
}

func (nd *nodeDrain) drain(ctx context.Context) NodeReport {
	node, err := nd.client.CoreV1().Nodes().Get(ctx, nd.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return NodeReport{Outcome: NodeFailed, Message: fmt.Sprintf("node %s not found", nd.name)}
	}
	if err != nil {
		return NodeReport{Outcome: NodeFailed, Message: fmt.Sprintf("getting node %s: %v", nd.name, err)}
	}
	nd.node = node
	if c, held := ownership.HeldByOther(node, nd.id, nd.clock.Now()); held && !nd.opts.DryRun {
		return NodeReport{Outcome: NodeFailed, Cordoned: node.Spec.Unschedulable, Message: fmt.Sprintf(
			"node is being drained by %s (drain %s, started %s); two drains of one node would fight: wait for it, or retry after %s",
			c.Holder, c.ID, c.Started.Format(time.RFC3339), c.Renewed.Add(ownership.ClaimTTL).Format(time.RFC3339))}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods, err := nd.watchPods(ctx)
	if err != nil {
		return NodeReport{Outcome: NodeFailed, Cordoned: node.Spec.Unschedulable, Message: err.Error()}
	}
	nd.classifyAll(ctx, pods)
	nd.hooks.Observer.Observe(Progress{Time: nd.clock.Now(), Node: nd.name, Kind: ProgressNodeStarted, Pods: nd.count(mustLeave, hold, waitGone)})
	if nd.opts.DryRun {
		return nd.simulate()
	}
	refuseEarly := nd.count(refuse)+nd.holdsPastStop() > 0 && nd.opts.Deadline.IsZero()
	for _, st := range nd.states {
		if st.class.verdict == refuse || (st.class.verdict == hold && refuseEarly) {
			nd.hooks.Observer.Observe(Progress{Time: nd.clock.Now(), Node: nd.name, Kind: ProgressBlocked, Pod: st.key,
				Reason: st.class.reason, Message: st.class.message, PDB: st.pdbName})
		}
	}
	if refuseEarly {
		msg := fmt.Sprintf("%d pod(s) cannot leave as things stand (see their reasons); nothing was evicted and the node was not cordoned",
			nd.count(refuse)+nd.holdsPastStop())
		nd.hooks.Recorder.Eventf(node, corev1.EventTypeWarning, "DrainBlocked", "sluice: %s", msg)
		return nd.report(NodeBlocked, msg, node.Spec.Unschedulable)
	}

	if err := nd.claimAndCordon(ctx); err != nil {
		// The patch may have landed even though we saw an error (a canceled
		// request): release a claim of ours, if there is one, so the next
		// drain of the node need not wait for it to expire.
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = ownership.RewriteClaim(releaseCtx, nd.client, nd.name, nd.id, nil, nil)
		return nd.report(NodeFailed, err.Error(), nd.node.Spec.Unschedulable)
	}
	// Pods bound to the node between the first look and the cordon are
	// classified now, as far as the watch has delivered them; the scheduler
	// binds nothing new to a cordoned node.
	if pods, err := nd.listPods(); err == nil {
		sortPods(pods)
		nd.classifyAll(ctx, pods)
	}
	nd.hooks.Observer.Observe(Progress{Time: nd.clock.Now(), Node: nd.name, Kind: ProgressCordoned})
	nd.hooks.Recorder.Eventf(node, corev1.EventTypeNormal, "DrainStarted", "sluice: draining %d pods", nd.count(mustLeave, hold, waitGone))
	renewDone := nd.keepClaim(ctx)
	nd.evictAll(ctx)
	var unswept []string
	var sweepErr error
	if ctx.Err() == nil && nd.timeLeft() > 0 {
		unswept, sweepErr = nd.sweep(ctx)
	}
	renewDone()
	releaseCtx, releaseCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer releaseCancel()
	releaseErr := ownership.RewriteClaim(releaseCtx, nd.client, nd.name, nd.id, nd.lastClaim(), nil)

	rep := nd.outcome(node, unswept, sweepErr)
	if releaseErr != nil {
		rep.Message = joinMessage(rep.Message, "releasing the drain claim: "+releaseErr.Error())
	}
	return rep
}

// outcome is the report of a drain that ran, with the Event that says how it
// ended. Every pod that did not leave is named with its reason, in the
// report, the Event and so in the logs of whoever ran the drain.
func (nd *nodeDrain) outcome(node *corev1.Node, unswept []string, sweepErr error) NodeReport {
	rep := nd.report(NodeDrained, "", true)
	switch left := rep.Left(); {
	case sweepErr != nil:
		rep.Outcome, rep.Message = NodeFailed, sweepMessage(unswept, sweepErr)
		nd.hooks.Recorder.Eventf(node, corev1.EventTypeWarning, "DrainFailed", "sluice: %s", rep.Message)
	case len(unswept) > 0:
		rep.Outcome, rep.Message = NodeBlocked, sweepMessage(unswept, nil)
		nd.hooks.Recorder.Eventf(node, corev1.EventTypeWarning, "DrainBlocked", "sluice: %s", rep.Message)
	case len(left) > 0:
		rep.Outcome = NodeBlocked
		rep.Message = fmt.Sprintf("%d pod(s) did not leave; the node stays cordoned: %s", len(left), Summary(left, 5))
		nd.hooks.Recorder.Eventf(node, corev1.EventTypeWarning, "DrainBlocked", "sluice: %s", rep.Message)
	default:
		nd.hooks.Recorder.Eventf(node, corev1.EventTypeNormal, "DrainCompleted", "sluice: drained in %s", nd.clock.Since(nd.start).Round(100*time.Millisecond))
	}
	return rep
}

// watchPods starts a watch of the node's pods and returns those the drain
// covers. Deletions seen on the watch mark pods gone; nothing polls.
func (nd *nodeDrain) watchPods(ctx context.Context) ([]*corev1.Pod, error) {
	if sh := nd.opts.Shared; sh != nil {
		context.AfterFunc(ctx, sh.follow(nd))
		nd.pods = sharedPods{s: sh, node: nd.name}
		return nd.sortedPods()
	}
	factory := informers.NewSharedInformerFactory(nd.client, 0)
	onNode := fields.OneTermEqualSelector("spec.nodeName", nd.name).String()
	pods := nd.client.CoreV1().Pods(metav1.NamespaceAll)
	pagedInformerFor(factory, &corev1.Pod{}, nd.opts.ChunkSize,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = onNode
			return pods.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = onNode
			return pods.Watch(ctx, o)
		})
	inf := factory.Core().V1().Pods()
	listErrs := newListErrors()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: nd.podDeleted}); err != nil {
		return nil, fmt.Errorf("watching pods on %s: %w", nd.name, err)
	}
	if err := listErrs.watch(inf.Informer()); err != nil {
		return nil, fmt.Errorf("watching pods on %s: %w", nd.name, err)
	}
	factory.Start(ctx.Done())
	if err := waitForLists(ctx, nd.clock, nd.listBound(nd.clock.Now()), "pods on "+nd.name, listErrs, inf.Informer().HasSynced); err != nil {
		return nil, err
	}
	nd.pods = listerPods{lister: inf.Lister()}
	return nd.sortedPods()
}

func (nd *nodeDrain) sortedPods() ([]*corev1.Pod, error) {
	all, err := nd.listPods()
	if err != nil {
		return nil, fmt.Errorf("listing pods on %s: %w", nd.name, err)
	}
	sortPods(all)
	return all, nil
}

// listPods lists the node's pods this drain is about: those PodSelector and
// PodFilter both pick.
func (nd *nodeDrain) listPods() ([]*corev1.Pod, error) {
	pods, err := nd.pods.list(nd.opts.PodSelector)
	if err != nil || nd.opts.PodFilter == nil {
		return pods, err
	}
	return slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !nd.opts.PodFilter(p) }), nil
}

func (nd *nodeDrain) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	nd.mu.Lock()
	st := nd.byUID[pod.UID]
	nd.mu.Unlock()
	if st != nil {
		st.markGone(nd.clock.Now())
		nd.hooks.Observer.Observe(Progress{Time: nd.clock.Now(), Node: nd.name, Kind: ProgressGone, Pod: st.key})
	}
}

// matchBudget finds the budget of a pod that must leave: two budgets, or one
// that can never allow an eviction, hold it instead.
func (nd *nodeDrain) matchBudget(st *podState, budgets []*policyv1.PodDisruptionBudget) {
	if st.class.verdict != mustLeave || nd.opts.DisableEviction || !budgetApplies(st.pod, budgets) {
		return
	}
	st.leaving = st.class
	matched := budgetsFor(st.pod, budgets)
	switch {
	case len(matched) > 1:
		st.class = multipleBudgets(matched)
	case len(matched) == 1:
		st.pdb = matched[0]
		st.pdbName = st.pdb.Name
		if c, dead := staticDeadlock(st.pdb, st.pod); dead {
			st.class = c
		}
	}
}

// classifyAll decides each pod's verdict, then checks the budgets of the pods
// that must leave: two budgets, or one that can never allow an eviction, stop
// the pod before anything is touched.
func (nd *nodeDrain) classifyAll(ctx context.Context, pods []*corev1.Pod) {
	budgets := nd.budgets()
	// Classify without the lock (it may ask the API server about a
	// DaemonSet), so pod deletions from the watch are never held up by it.
	nd.mu.Lock()
	var unknown []*corev1.Pod
	for _, pod := range pods {
		if _, known := nd.byUID[pod.UID]; !known {
			unknown = append(unknown, pod)
		}
	}
	nd.mu.Unlock()
	fresh := make([]*podState, 0, len(unknown))
	for _, pod := range unknown {
		st := &podState{pod: pod, key: pod.Namespace + "/" + pod.Name, gone: make(chan struct{}), settled: make(chan struct{})}
		st.class = nd.classify.classify(ctx, pod)
		nd.matchBudget(st, budgets)
		fresh = append(fresh, st)
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, st := range fresh {
		if _, known := nd.byUID[st.pod.UID]; !known {
			nd.states = append(nd.states, st)
			nd.byUID[st.pod.UID] = st
		}
	}
	// A deletion the watch delivered before the pod had a state was dropped;
	// catch it from the watched list.
	for _, st := range nd.states {
		if p, err := nd.pods.get(st.pod.Namespace, st.pod.Name); err != nil || p.UID != st.pod.UID {
			st.markGone(nd.clock.Now())
		}
	}
}

// budgetApplies reports whether the eviction API checks budgets for the pod:
// it does not for pods that are not running yet or have finished, and a pod
// that is not Ready under an AlwaysAllow budget goes regardless.
func budgetApplies(pod *corev1.Pod, budgets []*policyv1.PodDisruptionBudget) bool {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	if podReady(pod) {
		return true
	}
	for _, pdb := range budgetsFor(pod, budgets) {
		if pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
			return true
		}
	}
	return false
}

// holdsPastStop counts the held pods whose hold will not end by itself
// before the drain stops: for good, or a do-not-disrupt duration that runs
// past --timeout. A hold that ends in time is waited for.
func (nd *nodeDrain) holdsPastStop() int {
	n := 0
	for _, st := range nd.states {
		if st.class.verdict == hold && (st.class.until.IsZero() || !nd.stopAt.IsZero() && !st.class.until.Before(nd.stopAt)) {
			n++
		}
	}
	return n
}

func (nd *nodeDrain) count(verdicts ...verdict) int {
	n := 0
	for _, st := range nd.states {
		for _, v := range verdicts {
			if st.class.verdict == v {
				n++
			}
		}
	}
	return n
}

// claimAndCordon claims and cordons the node, re-reading it when someone else
// changed it in between (kubelets update nodes all the time).
func (nd *nodeDrain) claimAndCordon(ctx context.Context) error {
	now := nd.clock.Now()
	c := ownership.Claim{ID: nd.id, Holder: nd.opts.Holder, Started: now, Renewed: now}
	if !nd.opts.Deadline.IsZero() {
		dl := nd.opts.Deadline
		c.Deadline = &dl
	}
	for attempt := 0; ; attempt++ {
		err := ownership.ClaimAndCordon(ctx, nd.client, nd.node, c, nd.opts.CordonOwner)
		if err == nil {
			nd.claim = c
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return fmt.Errorf("cordoning: %w", err)
		}
		node, getErr := nd.client.CoreV1().Nodes().Get(ctx, nd.name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("cordoning: %w", getErr)
		}
		if other, held := ownership.HeldByOther(node, nd.id, nd.clock.Now()); held {
			return fmt.Errorf("node was claimed by %s (drain %s) at the same moment; it continues that drain", other.Holder, other.ID)
		}
		nd.node = node
	}
}

// keepClaim renews the claim ClaimRenew after each write until the returned
// function is called, retrying a failed renewal after ClaimRetry, and stops
// renewing if another drain has taken the node over.
func (nd *nodeDrain) keepClaim(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := ownership.ClaimRenew
		for {
			timer := nd.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C():
			}
			last := nd.lastClaim()
			next := *last
			next.Renewed = nd.clock.Now()
			err := ownership.RewriteClaim(ctx, nd.client, nd.name, nd.id, last, &next)
			switch {
			case errors.Is(err, ownership.ErrClaimLost):
				return
			case err != nil:
				wait = ownership.ClaimRetry
			default:
				nd.mu.Lock()
				nd.claim = next
				nd.mu.Unlock()
				wait = ownership.ClaimRenew
			}
		}
	}()
	return func() { cancel(); <-done }
}

// lastClaim is the claim as this drain last wrote it.
func (nd *nodeDrain) lastClaim() *ownership.Claim {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	c := nd.claim
	return &c
}

// evictAll runs the waves: each pod that must leave gets a goroutine; a wave's
// successors start once each of its pods is gone or refused (with a deadline:
// asked to leave).
func (nd *nodeDrain) evictAll(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	stuckDone := make(chan struct{})
	go func() { defer close(stuckDone); nd.cancelWhenStuck(ctx, cancel) }()
	// It reads the pods' states: it has ended before a sweep adds to them.
	defer func() { cancel(); <-stuckDone }()
	var wg sync.WaitGroup
	for _, wave := range nd.waves() {
		if ctx.Err() != nil {
			break // the rest stay NotEvicted
		}
		for _, st := range wave {
			st.started.Store(true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				nd.leave(ctx, st)
			}()
		}
		for _, st := range wave {
			select {
			case <-st.settled:
			case <-ctx.Done():
			}
		}
	}
	wg.Wait()
}

// waves groups the pods that must leave by priority, lowest first, then
// system-critical pods, then (with --evict-daemonsets) DaemonSet pods, as the
// kubelet's graceful shutdown orders them, then the pods Options.Last picks;
// within a wave, the longest shutdowns start first.
func (nd *nodeDrain) waves() [][]*podState {
	groups := map[int64][]*podState{}
	for _, st := range nd.states {
		if st.started.Load() || (st.class.verdict != mustLeave && st.class.verdict != hold && st.class.verdict != waitGone) {
			continue // a sweep's second run of the waves starts only the pods it found
		}
		p := int64(0)
		if st.pod.Spec.Priority != nil {
			p = int64(*st.pod.Spec.Priority)
		}
		switch {
		case st.class.verdict == waitGone:
			p = -1 << 40 // already going: wait for it from the start
		case nd.opts.Last != nil && nd.opts.Last(st.pod):
			p = 1 << 41 // the drainer itself, after everything
		case st.class.reason == ReasonDaemonSetPod:
			p = 1 << 40 // node agents go after everything, system-critical pods included
		case p >= systemCriticalPriority:
			p = 1 << 39
		}
		groups[p] = append(groups[p], st)
	}
	keys := make([]int64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	waves := make([][]*podState, 0, len(keys))
	for _, k := range keys {
		wave := groups[k]
		sort.SliceStable(wave, func(i, j int) bool { return nd.podGrace(wave[i]) > nd.podGrace(wave[j]) })
		waves = append(waves, wave)
	}
	return waves
}

// cancelWhenStuck ends a drain with no timeout and no deadline as soon as every
// pod still there is blocked in a way that waiting will not fix, instead of
// hanging as kubectl does.
func (nd *nodeDrain) cancelWhenStuck(ctx context.Context, cancel context.CancelFunc) {
	if !nd.stopAt.IsZero() {
		return
	}
	ticker := nd.clock.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		waiting, stuck := 0, 0
		for _, st := range nd.states {
			if !st.started.Load() || st.isGone() {
				continue
			}
			waiting++
			if st.stuck.Load() {
				stuck++
			}
		}
		if waiting > 0 && stuck == waiting {
			cancel()
			return
		}
	}
}

// report builds the node's report from its pods' states.
func (nd *nodeDrain) report(outcome NodeOutcome, message string, cordoned bool) NodeReport {
	rep := NodeReport{Outcome: outcome, Message: message, Cordoned: cordoned, Pods: make([]PodReport, 0, len(nd.states))}
	for _, st := range nd.states {
		pr := PodReport{Namespace: st.pod.Namespace, Name: st.pod.Name, PDB: st.pdbName, GracePeriodSeconds: st.grace}
		goneAt := st.goneAt.Load()
		switch {
		case st.class.verdict == skip:
			pr.Outcome, pr.Reason, pr.Message = PodSkipped, st.class.reason, st.class.message
		case !st.started.Load() && goneAt != 0 && !nd.opts.DryRun:
			// It left before its turn: someone else deleted it.
			s := time.Unix(0, goneAt).Sub(nd.start).Seconds()
			pr.Outcome, pr.Message, pr.GoneAfterSeconds = PodDeleted, "deleted by someone else during the drain", &s
		case (st.class.verdict == refuse || st.class.verdict == hold) && !st.started.Load():
			pr.Outcome, pr.Reason, pr.Message = PodBlocked, st.class.reason, st.class.message
		case !st.started.Load():
			pr.Outcome, pr.Message = PodNotEvicted, "not evicted: other pods on the node cannot leave"
		default:
			pr.Outcome, pr.Reason, pr.Message, pr.BlockedSince = st.outcome, st.reason, st.message, st.blockedSince
			if pr.Outcome == "" {
				pr.Outcome = PodNotEvicted
			}
			if nd.opts.DryRun {
				break
			}
			if goneAt != 0 {
				s := time.Unix(0, goneAt).Sub(nd.start).Seconds()
				pr.GoneAfterSeconds = &s
				pr.BlockedSince = nil
			} else if st.unwaited.Load() {
				pr.Message = joinMessage(pr.Message, fmt.Sprintf("still terminating %s after its grace period ended (--skip-wait-for-delete-timeout): not waited for", nd.opts.SkipWaitForDeleteTimeout))
			} else if pr.Outcome == PodEvicted || pr.Outcome == PodDeleted {
				pr.Reason, pr.Message = ReasonTimeout, joinMessage(pr.Message, "asked to leave, but still terminating when the drain stopped")
			} else if pr.Reason == "" {
				pr.Outcome, pr.Reason, pr.Message = PodBlocked, ReasonTimeout, "still on the node when the drain stopped"
			}
		}
		if pr.Message == "" && st.class.message != "" && pr.Reason == "" {
			pr.Message = st.class.message // a warning: emptyDir data deleted, no controller
		}
		rep.Pods = append(rep.Pods, pr)
	}
	return rep
}

func joinMessage(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "; " + b
}
