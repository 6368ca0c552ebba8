// Package awsqueue is the AWS queue mode: one reader of an SQS queue that
// EventBridge rules feed (EC2 Spot interruption warnings, rebalance
// recommendations, instance state changes, AWS Health scheduled changes,
// and Auto Scaling "terminating" lifecycle actions), in place of an agent on
// every node. Each message becomes an event in the node's maintenance report
// (the annotation the agent would write), so the maintenance controller's
// pipeline, budgets and Events are the ones the agents feed. A message is
// deleted only once its event is written on its node (at-least-once; a
// redelivery names the same event, so it changes nothing).
//
// A terminate lifecycle hook holds its instance in Terminating:Wait: the
// reader heartbeats it while the node drains and completes it with CONTINUE
// once the controller approves the event (it does so when the node is
// drained), or once the Node is gone.
package awsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	maws "github.com/sluice-dev/sluice/pkg/maintenance/aws"
)

// SQS is the part of the SQS API the reader calls (*sqs.Client has it).
type SQS interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Hooks is the part of the Auto Scaling API that lifecycle actions need
// (*autoscaling.Client has it).
type Hooks interface {
	CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
	DescribeLifecycleHooks(context.Context, *autoscaling.DescribeLifecycleHooksInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error)
}

// Config is the reader's.
type Config struct {
	QueueURL string
	Clock    clock.WithTicker
	Log      *slog.Logger
	// Every is how often hooks are looked at when no node changes; default
	// 10 s.
	Every time.Duration
}

// Reader reads the queue and looks after lifecycle hooks. Build it with
// New.
type Reader struct {
	sqs    SQS
	hooks  Hooks
	client kubernetes.Interface
	cfg    Config

	nodes cache.Indexer
	wake  chan struct{}

	mu         sync.Mutex
	heartbeats map[string]time.Time     // token -> last heartbeat
	timeouts   map[string]time.Duration // group/hook -> heartbeat timeout
}

// New returns a reader of cfg.QueueURL writing onto client's Nodes.
func New(q SQS, hooks Hooks, client kubernetes.Interface, cfg Config) *Reader {
	if cfg.Every <= 0 {
		cfg.Every = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Reader{sqs: q, hooks: hooks, client: client, cfg: cfg, wake: make(chan struct{}, 1),
		heartbeats: map[string]time.Time{}, timeouts: map[string]time.Duration{}}
}

// Node indexes: by EC2 instance ID, and the nodes with pending hooks.
const (
	indexInstance = "instance"
	indexHooks    = "hooks"
)

// instanceOf is the EC2 instance ID in a Node's providerID.
var instanceOf = regexp.MustCompile(`^aws:///[a-z0-9-]+/(i-[0-9a-f]{8,17})$`)

// Run reads the queue and looks after hooks until ctx ends.
func (r *Reader) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(r.client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if err := inf.AddIndexers(cache.Indexers{indexInstance: func(o any) ([]string, error) {
		if m := instanceOf.FindStringSubmatch(o.(*corev1.Node).Spec.ProviderID); m != nil {
			return []string{m[1]}, nil
		}
		return nil, nil
	}, indexHooks: func(o any) ([]string, error) {
		if _, ok := o.(*corev1.Node).Annotations[contract.AnnotationAWSLifecycleHooks]; ok {
			return []string{"pending"}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	poke := func(any) { r.poke() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) },
		DeleteFunc: func(o any) { r.gone(ctx, o) }}); err != nil {
		return err
	}
	r.nodes = inf.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.tend(ctx) }()
	for ctx.Err() == nil {
		if err := r.receive(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Error("reading the queue", "queue", r.cfg.QueueURL, "err", err)
			r.sleep(ctx, 5*time.Second)
		}
	}
	wg.Wait()
	factory.Shutdown()
	return nil
}

func (r *Reader) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Reader) sleep(ctx context.Context, d time.Duration) {
	t := r.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

// receive takes one batch (a long poll of up to 20 s) and acts on it.
func (r *Reader) receive(ctx context.Context) error {
	out, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.cfg.QueueURL),
		MaxNumberOfMessages: 10, WaitTimeSeconds: 20})
	if err != nil {
		return err
	}
	for _, m := range out.Messages {
		if err := r.handle(ctx, m); err != nil {
			// Left on the queue: it comes back after its visibility
			// timeout (and to a dead-letter queue if one is set).
			r.cfg.Log.Error("acting on a queue message; it will be delivered again", "message", aws.ToString(m.MessageId), "err", err)
			continue
		}
		if _, err := r.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			r.cfg.Log.Error("deleting a queue message acted on; its redelivery will change nothing", "message", aws.ToString(m.MessageId), "err", err)
		}
	}
	return nil
}

// handle writes the message's event on its nodes; nil when the message may
// be deleted.
func (r *Reader) handle(ctx context.Context, m sqstypes.Message) error {
	n, relevant, err := maws.ParseMessage([]byte(aws.ToString(m.Body)))
	if err != nil {
		// It will never read better: dropped, loudly.
		r.cfg.Log.Error("dropping a queue message that is not an event sluice knows", "message", aws.ToString(m.MessageId), "err", err)
		return nil
	}
	if !relevant {
		return nil
	}
	var errs []error
	for _, id := range n.InstanceIDs {
		objs, err := r.nodes.ByIndex(indexInstance, id)
		if err != nil {
			return err
		}
		if len(objs) == 0 {
			if n.Hook != nil {
				// No Node (sluice deleted it, or it never joined): nothing
				// to drain, so the instance may go at once.
				if err := r.complete(ctx, *n.Hook); err != nil {
					errs = append(errs, fmt.Errorf("completing the lifecycle action of instance %s, which is no node: %w", id, err))
				}
				continue
			}
			r.cfg.Log.Info("no node of this cluster is the instance; the event is not ours", "instance", id, "event", n.Event.ID)
			continue
		}
		node := objs[0].(*corev1.Node)
		if err := r.note(ctx, node.Name, n); err != nil {
			errs = append(errs, err)
			continue
		}
		r.cfg.Log.Info("maintenance event from the queue", "node", node.Name, "instance", id, "event", n.Event.ID, "type", n.Event.Type)
	}
	return errors.Join(errs...)
}

// note adds the event (and its hook) to the node's report.
func (r *Reader) note(ctx context.Context, name string, n maws.Notice) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := r.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		report, _, err := maintenance.ReportOf(node)
		if err != nil {
			report = maintenance.Report{} // unreadable: replaced, the controller reported it
		}
		now := r.cfg.Clock.Now()
		events := slices.DeleteFunc(report.Events, func(e maintenance.Event) bool {
			return e.ID == n.Event.ID || !e.Deadline.IsZero() && now.Sub(e.Deadline) > time.Hour ||
				slices.ContainsFunc(n.Ends, func(prefix string) bool { return strings.HasPrefix(e.ID, prefix) })
		})
		if n.Event.ID != "" {
			events = append(events, n.Event)
		}
		next := maintenance.NewReport(maintenance.SourceAWS, true, events).WithRejected(nil)
		hooks, err := hooksOf(node)
		if err != nil {
			return err
		}
		if n.Hook != nil {
			hooks[n.Event.ID] = *n.Hook
		}
		value := next.Encode()
		if node.Annotations[contract.AnnotationMaintenanceEvents] == value && n.Hook == nil {
			return nil
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[contract.AnnotationMaintenanceEvents] = value
		setHooks(node, hooks)
		_, err = r.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func hooksOf(n *corev1.Node) (map[string]maws.LifecycleHook, error) {
	out := map[string]maws.LifecycleHook{}
	raw, ok := n.Annotations[contract.AnnotationAWSLifecycleHooks]
	if !ok {
		return out, nil
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("annotation %s on node %s: %w", contract.AnnotationAWSLifecycleHooks, n.Name, err)
	}
	return out, nil
}

func setHooks(n *corev1.Node, hooks map[string]maws.LifecycleHook) {
	if len(hooks) == 0 {
		delete(n.Annotations, contract.AnnotationAWSLifecycleHooks)
		return
	}
	raw, _ := json.Marshal(hooks) // plain data
	n.Annotations[contract.AnnotationAWSLifecycleHooks] = string(raw)
}

// tend completes approved hooks and heartbeats the others, on every node
// change and every cfg.Every.
func (r *Reader) tend(ctx context.Context) {
	tick := r.cfg.Clock.NewTicker(r.cfg.Every)
	defer tick.Stop()
	for {
		pending, _ := r.nodes.ByIndex(indexHooks, "pending") // the index exists
		for _, o := range pending {
			node := o.(*corev1.Node)
			if err := r.tendNode(ctx, node); err != nil && ctx.Err() == nil {
				r.cfg.Log.Error("lifecycle hooks", "node", node.Name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C():
		}
	}
}

func (r *Reader) tendNode(ctx context.Context, node *corev1.Node) error {
	hooks, err := hooksOf(node)
	if err != nil {
		return err
	}
	approved := strings.Split(node.Annotations[contract.AnnotationMaintenanceApproved], ",")
	st := controllerStateOf(node)
	var done []string
	for id, h := range hooks {
		if node.Annotations[contract.AnnotationMaintenanceApprove] == id || slices.Contains(approved, id) || st.done(id) {
			if err := r.complete(ctx, h); err != nil {
				return err
			}
			r.cfg.Log.Info("lifecycle action completed: the node is drained", "node", node.Name, "event", id, "group", h.Group, "hook", h.Name)
			done = append(done, id)
			continue
		}
		if err := r.heartbeat(ctx, h); err != nil {
			return err
		}
	}
	if len(done) == 0 {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := r.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		hooks, err := hooksOf(n)
		if err != nil {
			return err
		}
		have := slices.DeleteFunc(strings.Split(n.Annotations[contract.AnnotationMaintenanceApproved], ","), func(s string) bool { return s == "" })
		for _, id := range done {
			delete(hooks, id)
			if !slices.Contains(have, id) {
				have = append(have, id)
			}
		}
		setHooks(n, hooks)
		n.Annotations[contract.AnnotationMaintenanceApproved] = strings.Join(have, ",")
		_, err = r.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// gone completes the hooks of a Node that was deleted: nothing is left to
// drain.
func (r *Reader) gone(ctx context.Context, o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	node, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	hooks, err := hooksOf(node)
	if err != nil {
		return
	}
	for id, h := range hooks {
		if err := r.complete(ctx, h); err != nil {
			r.cfg.Log.Error("completing the lifecycle action of a deleted node", "node", node.Name, "event", id, "err", err)
		}
	}
}

// complete lets the group go on terminating the instance; an action that is
// no longer pending (completed, or timed out) is done already.
func (r *Reader) complete(ctx context.Context, h maws.LifecycleHook) error {
	_, err := r.hooks.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(h.Group), LifecycleHookName: aws.String(h.Name),
		LifecycleActionToken: aws.String(h.Token), InstanceId: aws.String(h.InstanceID), LifecycleActionResult: aws.String("CONTINUE")})
	if noLongerPending(err) {
		err = nil
	}
	r.mu.Lock()
	delete(r.heartbeats, h.Token)
	r.mu.Unlock()
	return err
}

// heartbeat extends the action's timeout once half of it has passed.
func (r *Reader) heartbeat(ctx context.Context, h maws.LifecycleHook) error {
	timeout, err := r.timeout(ctx, h)
	if err != nil {
		return err
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	last, ok := r.heartbeats[h.Token]
	r.mu.Unlock()
	if ok && now.Sub(last) < timeout/2 {
		return nil
	}
	_, err = r.hooks.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(h.Group), LifecycleHookName: aws.String(h.Name),
		LifecycleActionToken: aws.String(h.Token), InstanceId: aws.String(h.InstanceID)})
	if err != nil && !noLongerPending(err) {
		return err
	}
	r.mu.Lock()
	r.heartbeats[h.Token] = now
	r.mu.Unlock()
	return nil
}

// defaultHeartbeat is Auto Scaling's default heartbeat timeout.
const defaultHeartbeat = time.Hour

func (r *Reader) timeout(ctx context.Context, h maws.LifecycleHook) (time.Duration, error) {
	key := h.Group + "/" + h.Name
	r.mu.Lock()
	d, ok := r.timeouts[key]
	r.mu.Unlock()
	if ok {
		return d, nil
	}
	out, err := r.hooks.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{
		AutoScalingGroupName: aws.String(h.Group), LifecycleHookNames: []string{h.Name}})
	if err != nil {
		return 0, fmt.Errorf("reading lifecycle hook %s of group %s: %w", h.Name, h.Group, err)
	}
	d = defaultHeartbeat
	if len(out.LifecycleHooks) > 0 && out.LifecycleHooks[0].HeartbeatTimeout != nil {
		d = time.Duration(*out.LifecycleHooks[0].HeartbeatTimeout) * time.Second
	}
	r.mu.Lock()
	r.timeouts[key] = d
	r.mu.Unlock()
	return d, nil
}

// noLongerPending says Auto Scaling has no such pending action: "No active
// Lifecycle Action found with token ..." (a ValidationError).
func noLongerPending(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationError" && strings.Contains(api.ErrorMessage(), "No active Lifecycle Action")
}

// controllerState is what the reader needs of the maintenance controller's
// record on a node (sluice.dev/maintenance).
type controllerState struct {
	Event  string `json:"event"`
	Action string `json:"action"`
	Phase  string `json:"phase"`
}

func controllerStateOf(n *corev1.Node) controllerState {
	var st controllerState
	_ = json.Unmarshal([]byte(n.Annotations[contract.AnnotationMaintenanceState]), &st) // none or unreadable: nothing known
	return st
}

// done says the node needs the hook's instance held no longer: it is
// drained (for whichever event the controller acts on: a spot warning may
// outrank the hook's), or the controller acts on the hook's event without
// draining (the pool's action for Terminate is None or Cordon), so it will
// never approve it.
func (st controllerState) done(event string) bool {
	return st.Phase == "Drained" || st.Event == event && st.Action != "" && st.Action != "Drain"
}
