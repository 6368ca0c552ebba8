package awsqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/awsqueue"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// scene is a queue in moto fed by EventBridge rules, two EKS-like nodes in
// the sandbox, and a reader.
type scene struct {
	env   *sandboxtest.Env
	sqs   *sqs.Client
	eb    *eventbridge.Client
	queue string
	hooks *hooks
	nodes []*corev1.Node // each with its own instance ID
}

func newScene(t *testing.T) *scene {
	m := mototest.Start(t)
	env := sandboxtest.New(t)
	s := &scene{env: env, sqs: sqs.NewFromConfig(m.Config), eb: eventbridge.NewFromConfig(m.Config), hooks: &hooks{timeout: 2}}
	ctx := context.Background()
	name := sandboxtest.UniqueName("sluice-")
	q, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	s.queue = aws.ToString(q.QueueUrl)
	attrs, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	// The rules aws-node-termination-handler's docs and ours set up.
	pattern := `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning","EC2 Instance Rebalance Recommendation"]}`
	if _, err := s.eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(pattern)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name),
		Targets: []ebtypes.Target{{Id: aws.String("sluice"), Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}}}); err != nil {
		t.Fatal(err)
	}
	for i, n := range fixture.EKSNodeGroup(name, 2).Nodes() {
		n.Spec.ProviderID = fmt.Sprintf("aws:///us-east-1a/%s", instanceID(name, i))
		created, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
		s.nodes = append(s.nodes, created)
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := awsqueue.New(s.sqs, s.hooks, env.Client, awsqueue.Config{QueueURL: s.queue, Clock: clock.RealClock{}, Every: 200 * time.Millisecond})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// instanceID is a unique EC2-shaped instance ID.
func instanceID(seed string, i int) string {
	h := uint64(14695981039346656037)
	for _, c := range seed {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Sprintf("i-%016x%d", h, i)[:19]
}

func (s *scene) instance(i int) string {
	return s.nodes[i].Spec.ProviderID[strings.LastIndex(s.nodes[i].Spec.ProviderID, "/")+1:]
}

func (s *scene) put(t *testing.T, detailType, detail string) {
	out, err := s.eb.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String(detailType), Detail: aws.String(detail)}}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("put event: %v (%d failed)", err, out.FailedEntryCount)
	}
}

func (s *scene) report(t *testing.T, i int) maintenance.Report {
	n, err := s.env.Client.CoreV1().Nodes().Get(context.Background(), s.nodes[i].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := maintenance.ReportOf(n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitEmpty waits until the queue holds no message, visible or in flight:
// every message was acted on and deleted.
func (s *scene) waitEmpty(t *testing.T) {
	s.env.WaitFor(t, 30*time.Second, "the queue empty", func(ctx context.Context) (bool, error) {
		out, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.queue), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return false, err
		}
		return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" &&
			out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] == "0", nil
	})
}

// A spot warning and a rebalance recommendation routed by EventBridge reach
// the node whose providerID names the instance, as the agent would have
// written them; an event for an instance of no node is dropped; the messages
// are deleted; a redelivered message changes nothing.
func TestQueueEventsReachTheirNode(t *testing.T) {
	s := newScene(t)
	sent := time.Now().Truncate(time.Second)
	s.put(t, "EC2 Spot Instance Interruption Warning", fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, s.instance(0)))
	s.put(t, "EC2 Instance Rebalance Recommendation", fmt.Sprintf(`{"instance-id":%q}`, s.instance(0)))
	s.put(t, "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-00000000000000000","instance-action":"terminate"}`)

	s.env.WaitFor(t, 30*time.Second, "both events on the node", func(context.Context) (bool, error) {
		return len(s.report(t, 0).Events) == 2, nil
	})
	s.waitEmpty(t)
	r := s.report(t, 0)
	var spot maintenance.Event
	for _, e := range r.Events {
		if e.Type == maintenance.TypePreempt {
			spot = e
		}
	}
	if r.Source != maintenance.SourceAWS || spot.ID == "" || spot.Deadline.Before(sent.Add(2*time.Minute-time.Second)) || spot.Deadline.After(time.Now().Add(2*time.Minute+time.Second)) {
		t.Errorf("report = %+v; want an AWS report with a Preempt due two minutes after the warning", r)
	}
	if got := s.report(t, 1); len(got.Events) != 0 {
		t.Errorf("the other node has events %+v", got.Events)
	}

	// A redelivery (SQS is at-least-once): the same body again.
	body := fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":%q,"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		strings.TrimPrefix(spot.ID, "spot-"), spot.Deadline.Add(-2*time.Minute).Format(time.RFC3339), s.instance(0))
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.queue), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	s.waitEmpty(t)
	if got := s.report(t, 0); len(got.Events) != 2 {
		t.Errorf("after a redelivery the node has %d events, want the same 2: %+v", len(got.Events), got.Events)
	}

	// Stopped (a spot stop), then running again: the stop and the spot
	// warning end; the rebalance recommendation stays.
	for _, state := range []string{"stopping", "running"} {
		body := fmt.Sprintf(`{"version":"0","id":"state-%s","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":%q,"detail":{"instance-id":%q,"state":%q}}`,
			state, time.Now().UTC().Format(time.RFC3339), s.instance(0), state)
		if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.queue), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"stopping": 3, "running": 1}[state]
		s.env.WaitFor(t, 30*time.Second, fmt.Sprintf("%d events once the instance is %s", want, state), func(context.Context) (bool, error) {
			return len(s.report(t, 0).Events) == want, nil
		})
	}
	if got := s.report(t, 0).Events; got[0].Type != maintenance.TypeRebalance {
		t.Errorf("events once running again: %+v; want the rebalance recommendation only", got)
	}
}

// A terminate lifecycle action for an instance that is no Node (sluice
// deleted it, or it never joined) has nothing to wait for: completed at
// once.
func TestAHookForNoNodeIsCompletedAtOnce(t *testing.T) {
	s := newScene(t)
	token := "22222222-3333-4444-5555-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 10)
	body := fmt.Sprintf(`{"LifecycleHookName":"sluice-drain","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","AutoScalingGroupName":"eks-web",
"Service":"AWS Auto Scaling","Time":"2026-11-24T10:00:00.000Z","EC2InstanceId":"i-0aaaaaaaaaaaaaaaa","LifecycleActionToken":%q}`, token)
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.queue), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 30*time.Second, "the action completed", func(context.Context) (bool, error) { return s.hooks.count("complete", token) == 1, nil })
	s.waitEmpty(t)
}

// A terminate lifecycle action (as a hook sends it to SQS) is heartbeated
// while its node is not drained, and completed with CONTINUE once the
// controller approves the event (which it does when the node is drained);
// the approval is then recorded on the node, as the agent records its own.
func TestATerminateHookWaitsForTheDrain(t *testing.T) {
	s := newScene(t)
	token := "87654321-4321-4321-4321-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 10)
	body := fmt.Sprintf(`{"Origin":"AutoScalingGroup","LifecycleHookName":"sluice-drain","Destination":"EC2","AccountId":"123456789012","RequestId":"r-1",
"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","AutoScalingGroupName":"eks-web","Service":"AWS Auto Scaling",
"Time":"2026-11-24T10:00:00.000Z","EC2InstanceId":%q,"LifecycleActionToken":%q}`, s.instance(1), token)
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.queue), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	var id string
	s.env.WaitFor(t, 30*time.Second, "the lifecycle event on the node", func(context.Context) (bool, error) {
		r := s.report(t, 1)
		if len(r.Events) == 1 && r.Approvable {
			id = r.Events[0].ID
		}
		return id != "", nil
	})
	s.waitEmpty(t)
	s.env.WaitFor(t, 30*time.Second, "two heartbeats", func(context.Context) (bool, error) { return s.hooks.count("heartbeat", token) >= 2, nil })
	if n := s.hooks.count("complete", token); n != 0 {
		t.Fatalf("the action was completed %d times before the node was drained", n)
	}

	// The maintenance controller, once the node is drained.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationMaintenanceApprove: id}}})
	if _, err := s.env.Client.CoreV1().Nodes().Patch(context.Background(), s.nodes[1].Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 30*time.Second, "the action completed and the approval recorded", func(ctx context.Context) (bool, error) {
		n, err := s.env.Client.CoreV1().Nodes().Get(ctx, s.nodes[1].Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, pending := n.Annotations[contract.AnnotationAWSLifecycleHooks]
		return n.Annotations[contract.AnnotationMaintenanceApproved] == id && !pending, nil
	})
	if got := s.hooks.calls(token); got[len(got)-1] != "complete CONTINUE" || s.hooks.count("complete", token) != 1 {
		t.Errorf("calls for the action: %v; want heartbeats, then one complete CONTINUE", got)
	}
}

// A Node deleted while its instance waits in Terminating:Wait has nothing
// left to drain: the action is completed.
func TestADeletedNodeCompletesItsHook(t *testing.T) {
	s := newScene(t)
	token := "11111111-2222-3333-4444-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 10)
	body := fmt.Sprintf(`{"LifecycleHookName":"sluice-drain","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","AutoScalingGroupName":"eks-web",
"Service":"AWS Auto Scaling","Time":"2026-11-24T10:00:00.000Z","EC2InstanceId":%q,"LifecycleActionToken":%q}`, s.instance(0), token)
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.queue), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 30*time.Second, "the hook on the node", func(ctx context.Context) (bool, error) {
		n, err := s.env.Client.CoreV1().Nodes().Get(ctx, s.nodes[0].Name, metav1.GetOptions{})
		return err == nil && n.Annotations[contract.AnnotationAWSLifecycleHooks] != "", err
	})
	if err := s.env.Client.CoreV1().Nodes().Delete(context.Background(), s.nodes[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 30*time.Second, "the action completed", func(context.Context) (bool, error) { return s.hooks.count("complete", token) == 1, nil })
}

// hooks is a recorded-behaviour fake of Auto Scaling's lifecycle action
// calls (moto 5.2.1 does not hold an instance in Terminating:Wait and
// answers CompleteLifecycleAction with a 500): a heartbeat or completion of
// a token already completed is the ValidationError "No active Lifecycle
// Action found with token ...", as AWS answers; DescribeLifecycleHooks
// answers the hook with a heartbeat timeout of timeout seconds.
type hooks struct {
	timeout int32
	// completing, when set, runs as a completion arrives.
	completing func()

	mu    sync.Mutex
	log   map[string][]string // token -> calls
	ended map[string]bool
}

func (h *hooks) record(token, call string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.log == nil {
		h.log, h.ended = map[string][]string{}, map[string]bool{}
	}
	if h.ended[token] {
		return &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with token " + token}
	}
	h.log[token] = append(h.log[token], call)
	if strings.HasPrefix(call, "complete") {
		h.ended[token] = true
	}
	return nil
}

func (h *hooks) setCompleting(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.completing = f
}

func (h *hooks) calls(token string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.log[token]...)
}

func (h *hooks) count(prefix, token string) int {
	n := 0
	for _, c := range h.calls(token) {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (h *hooks) CompleteLifecycleAction(_ context.Context, in *autoscaling.CompleteLifecycleActionInput, _ ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error) {
	h.mu.Lock()
	completing := h.completing
	h.mu.Unlock()
	if completing != nil {
		completing()
	}
	return &autoscaling.CompleteLifecycleActionOutput{}, h.record(aws.ToString(in.LifecycleActionToken), "complete "+aws.ToString(in.LifecycleActionResult))
}

func (h *hooks) RecordLifecycleActionHeartbeat(_ context.Context, in *autoscaling.RecordLifecycleActionHeartbeatInput, _ ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error) {
	return &autoscaling.RecordLifecycleActionHeartbeatOutput{}, h.record(aws.ToString(in.LifecycleActionToken), "heartbeat")
}

func (h *hooks) DescribeLifecycleHooks(_ context.Context, in *autoscaling.DescribeLifecycleHooksInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error) {
	return &autoscaling.DescribeLifecycleHooksOutput{LifecycleHooks: []astypes.LifecycleHook{{
		AutoScalingGroupName: in.AutoScalingGroupName, LifecycleHookName: aws.String(in.LifecycleHookNames[0]),
		LifecycleTransition: aws.String("autoscaling:EC2_INSTANCE_TERMINATING"), HeartbeatTimeout: aws.Int32(h.timeout)}}}, nil
}
