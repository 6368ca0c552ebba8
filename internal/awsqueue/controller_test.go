package awsqueue_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// The whole handshake with the real controller: a terminate lifecycle
// action for a node with pods; the controller drains the node (the pods go
// to the other node) and approves the event; only then is the action
// completed with CONTINUE.
func TestTheControllerDrainsBeforeTheHookIsCompleted(t *testing.T) {
	s := newScene(t)
	// The pods start on node 1, the one the group terminates; node 0 then
	// takes them.
	labels := map[string]string{"sluice.dev/test-queue": s.nodes[0].Name}
	label := func(n *corev1.Node) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"sluice.dev/test-queue":%q}}}`, s.nodes[0].Name)
		if _, err := s.env.Client.CoreV1().Nodes().Patch(context.Background(), n.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label(s.nodes[1])
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 4, fixture.NodeSelector(labels), fixture.GracePeriod(2), fixture.ExitsAfter(1)))
	for _, p := range s.env.WaitForPods(t, "", 4) {
		if p.Spec.NodeName != s.nodes[1].Name {
			t.Fatalf("pod %s is on %s, want %s", p.Name, p.Spec.NodeName, s.nodes[1].Name)
		}
	}
	label(s.nodes[0])

	mgr, err := controller.New(s.env.Config, controller.Options{Identity: "test-" + t.Name(), Workers: 2, RequestTimeout: 30 * time.Second,
		MetricsAddress: "0", HealthAddress: "0", Registry: prometheus.NewRegistry(), SeveralManagers: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// What is on the node the moment the action is completed.
	onNode := make(chan int, 1)
	s.hooks.setCompleting(func() {
		pods, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.nodes[1].Name).String()})
		if err != nil {
			t.Error(err)
		}
		select {
		case onNode <- len(pods.Items):
		default:
		}
	})
	token := "99999999-8888-7777-6666-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 10)
	body := fmt.Sprintf(`{"LifecycleHookName":"sluice-drain","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","AutoScalingGroupName":"eks-web",
"Service":"AWS Auto Scaling","Time":"2026-11-24T10:00:00.000Z","EC2InstanceId":%q,"LifecycleActionToken":%q}`, s.instance(1), token)
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.queue), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 90*time.Second, "the action completed", func(context.Context) (bool, error) { return s.hooks.count("complete", token) > 0, nil })
	if left := <-onNode; left != 0 {
		t.Errorf("the action was completed with %d pods still on the node", left)
	}
	n, err := s.env.Client.CoreV1().Nodes().Get(context.Background(), s.nodes[1].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Error("the node is not cordoned")
	}
	if got := s.hooks.calls(token); got[len(got)-1] != "complete CONTINUE" {
		t.Errorf("calls: %v", got)
	}
}
