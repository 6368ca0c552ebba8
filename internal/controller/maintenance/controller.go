package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Options configure the controller.
type Options struct {
	// Identity names this replica on drain claims (its pod name).
	Identity string
	// Self picks the controller's own pod, evicted after every other pod
	// when the controller runs on a node it drains.
	Self func(*corev1.Pod) bool
	// Policies resolves a node's NodePool policy.
	Policies Policies
	// Recorder writes Kubernetes Events.
	Recorder record.EventRecorder
	// Webhook, when set, receives every Event too.
	Webhook *Webhook
	// Metrics, when set, are updated.
	Metrics *Metrics
	// Resync re-examines every node with maintenance state this often.
	Resync time.Duration
	// BlockedRetry is how long to wait before draining a blocked node again.
	BlockedRetry time.Duration
	Log          *slog.Logger
}

// Controller acts on the maintenance events written onto nodes.
type Controller struct {
	client   kubernetes.Interface
	clock    clock.WithTicker
	opts     Options
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	drains map[string]*running // by node
	wg     sync.WaitGroup
}

// running is a drain in progress for one node's event.
type running struct {
	event  string
	cancel context.CancelFunc
}

// NewController returns a controller; Run starts it.
func NewController(client kubernetes.Interface, clk clock.WithTicker, opts Options) *Controller {
	if opts.Resync <= 0 {
		opts.Resync = 30 * time.Second
	}
	if opts.BlockedRetry <= 0 {
		opts.BlockedRetry = 15 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	return &Controller{
		client:   client,
		clock:    clk,
		opts:     opts,
		recorder: teeRecorder{EventRecorder: opts.Recorder, webhook: opts.Webhook},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "maintenance", Clock: clk}),
		drains: map[string]*running{},
	}
}

// Run watches nodes and reconciles those with maintenance events until ctx
// ends. On the way out it stops its drains, which release their claims, so a
// successor can take over at once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	factory := informers.NewSharedInformerFactory(c.client, c.opts.Resync)
	informer := factory.Core().V1().Nodes().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.stopDrain(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	if c.opts.Webhook != nil {
		go c.opts.Webhook.Run(ctx)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("watching nodes: %w", context.Cause(ctx))
	}
	c.opts.Log.Info("maintenance controller started", "identity", c.opts.Identity)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	factory.Shutdown()
	c.mu.Lock()
	for _, r := range c.drains {
		r.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
	c.opts.Log.Info("maintenance controller stopped")
	return nil
}

// enqueue queues nodes that carry a report or the controller's state.
func (c *Controller) enqueue(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	_, hasReport := n.Annotations[maintenance.AnnotationEvents]
	_, hasState := n.Annotations[maintenance.AnnotationState]
	if hasReport || hasState {
		c.queue.Add(n.Name)
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	after, err := c.Reconcile(ctx, name)
	switch {
	case err != nil && ctx.Err() == nil:
		c.opts.Log.Error("reconciling node", "node", name, "err", err)
		c.queue.AddRateLimited(name)
	case after > 0:
		c.queue.Forget(name)
		c.queue.AddAfter(name, after)
	default:
		c.queue.Forget(name)
	}
	return true
}

// update applies change to a fresh copy of the node and writes it back,
// retrying on conflicts.
func (c *Controller) update(ctx context.Context, name string, change func(*corev1.Node) error) (*corev1.Node, error) {
	for attempt := 0; ; attempt++ {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		node = node.DeepCopy()
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		if err := change(node); err != nil {
			return nil, err
		}
		updated, err := c.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			return updated, nil
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return nil, fmt.Errorf("updating node %s: %w", name, err)
		}
	}
}

// errStale ends an update whose record was replaced meanwhile.
var errStale = errors.New("the node's maintenance record changed meanwhile")
