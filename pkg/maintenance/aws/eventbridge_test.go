package aws

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The bodies are shaped as the EC2, Auto Scaling and AWS Health user guides
// document their EventBridge events (and a lifecycle hook's notification
// sent straight to SQS), with made-up IDs.
const (
	spotBody = `{"version":"0","id":"1e5527d7-bb36-4607-3370-4164db56a40e","detail-type":"EC2 Spot Instance Interruption Warning",
"source":"aws.ec2","account":"123456789012","time":"2026-11-24T10:00:00Z","region":"us-east-1",
"resources":["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],"detail":{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}}`
	rebalanceBody = `{"version":"0","id":"5b6a3e4c-0e0f-4b5e-8a7b-2a1d6f3c9e11","detail-type":"EC2 Instance Rebalance Recommendation",
"source":"aws.ec2","account":"123456789012","time":"2026-11-24T10:00:00Z","region":"us-east-1",
"resources":["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],"detail":{"instance-id":"i-0b662ef9931388ba0"}}`
	stateBody = `{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"EC2 Instance State-change Notification",
"source":"aws.ec2","account":"123456789012","time":"2026-11-24T10:00:00Z","region":"us-east-1",
"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-0b662ef9931388ba0"],"detail":{"instance-id":"i-0b662ef9931388ba0","state":"%s"}}`
	hookBody = `{"version":"0","id":"468fc2b4-4d2f-4a73-a1e2-111111111111","detail-type":"EC2 Instance-terminate Lifecycle Action",
"source":"aws.autoscaling","account":"123456789012","time":"2026-11-24T10:00:00Z","region":"us-east-1",
"resources":["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:d4738357-2d40-4038-ae7e-b00ae0227003:autoScalingGroupName/eks-web"],
"detail":{"LifecycleActionToken":"87654321-4321-4321-4321-210987654321","AutoScalingGroupName":"eks-web","LifecycleHookName":"sluice-drain",
"EC2InstanceId":"i-0b662ef9931388ba0","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","NotificationMetadata":"","Origin":"AutoScalingGroup","Destination":"EC2"}}`
	directHookBody = `{"Origin":"AutoScalingGroup","LifecycleHookName":"sluice-drain","Destination":"EC2","AccountId":"123456789012",
"RequestId":"4a1b2c3d-0000-1111-2222-333344445555","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","AutoScalingGroupName":"eks-web",
"Service":"AWS Auto Scaling","Time":"2026-11-24T10:00:00.000Z","EC2InstanceId":"i-0b662ef9931388ba0","LifecycleActionToken":"87654321-4321-4321-4321-210987654321"}`
	testNotificationBody = `{"AccountId":"123456789012","RequestId":"4a1b2c3d","AutoScalingGroupARN":"arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/eks-web",
"AutoScalingGroupName":"eks-web","Service":"AWS Auto Scaling","Event":"autoscaling:TEST_NOTIFICATION","Time":"2026-11-24T10:00:00.000Z"}`
	healthBody = `{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1603","detail-type":"AWS Health Event","source":"aws.health",
"account":"123456789012","time":"2026-11-24T10:00:00Z","region":"us-east-1","resources":["i-0b662ef9931388ba0","i-0c1d2e3f4a5b6c7d8"],
"detail":{"eventArn":"arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_ABC123",
"service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange","statusCode":"upcoming",
"startTime":"Sat, 28 Nov 2026 13:00:00 GMT","endTime":"Sat, 28 Nov 2026 14:00:00 GMT",
"eventDescription":[{"language":"en_US","latestDescription":"EC2 has detected degradation of the underlying hardware hosting your instance."}],
"affectedEntities":[{"entityValue":"i-0b662ef9931388ba0"},{"entityValue":"i-0c1d2e3f4a5b6c7d8"}]}}`
)

func TestParseMessage(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name     string
		body     string
		typ      maintenance.Type
		status   maintenance.Status
		deadline time.Time
		ids      int
		hook     bool
	}{
		{"spot", spotBody, maintenance.TypePreempt, maintenance.StatusScheduled, at.Add(2 * time.Minute), 1, false},
		{"rebalance", rebalanceBody, maintenance.TypeRebalance, maintenance.StatusScheduled, time.Time{}, 1, false},
		{"shutting down", strings.Replace(stateBody, "%s", "shutting-down", 1), maintenance.TypeTerminate, maintenance.StatusStarted, at, 1, false},
		{"terminate hook", hookBody, maintenance.TypeTerminate, maintenance.StatusScheduled, time.Time{}, 1, true},
		{"terminate hook sent to SQS", directHookBody, maintenance.TypeTerminate, maintenance.StatusScheduled, time.Time{}, 1, true},
		{"retirement", healthBody, maintenance.TypeTerminate, maintenance.StatusScheduled, time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC), 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, relevant, err := ParseMessage([]byte(tt.body))
			if err != nil || !relevant {
				t.Fatalf("ParseMessage = %v, relevant %t", err, relevant)
			}
			e := n.Event
			if e.Type != tt.typ || e.Status != tt.status || !e.Deadline.Equal(tt.deadline) || len(n.InstanceIDs) != tt.ids || (n.Hook != nil) != tt.hook {
				t.Errorf("notice = %+v (hook %+v)", n, n.Hook)
			}
			if e.ID == "" || e.Source != maintenance.SourceAWS || n.InstanceIDs[0] != "i-0b662ef9931388ba0" {
				t.Errorf("event = %+v, instances %v", e, n.InstanceIDs)
			}
			again, _, _ := ParseMessage([]byte(tt.body))
			if again.Event.ID != e.ID {
				t.Errorf("the same message gave IDs %s and %s; a redelivery must name the same event", e.ID, again.Event.ID)
			}
		})
	}
	a, _, _ := ParseMessage([]byte(hookBody))
	b, _, _ := ParseMessage([]byte(directHookBody))
	if a.Event.ID != b.Event.ID || *a.Hook != *b.Hook {
		t.Errorf("one lifecycle action by two routes: %s %+v and %s %+v; want one event", a.Event.ID, a.Hook, b.Event.ID, b.Hook)
	}
	if h := a.Hook; h.Group != "eks-web" || h.Name != "sluice-drain" || h.Token != "87654321-4321-4321-4321-210987654321" {
		t.Errorf("hook = %+v", h)
	}
}

// An instance running again ends its state-change and spot events.
func TestRunningEndsStopAndSpotEvents(t *testing.T) {
	n, relevant, err := ParseMessage([]byte(strings.Replace(stateBody, "%s", "running", 1)))
	if err != nil || !relevant || n.Event.ID != "" || !slices.Equal(n.Ends, []string{statePrefix, spotPrefix}) || len(n.InstanceIDs) != 1 {
		t.Errorf("running = %+v, %t, %v; want a notice that ends the instance's state and spot events", n, relevant, err)
	}
}

func TestParseMessageIgnoresAndRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"test notification": testNotificationBody,
		"pending":           strings.Replace(stateBody, "%s", "pending", 1),
		"launch hook":       strings.Replace(hookBody, "EC2_INSTANCE_TERMINATING", "EC2_INSTANCE_LAUNCHING", 1),
		"RDS health":        strings.Replace(healthBody, `"service":"EC2"`, `"service":"RDS"`, 1),
		"other detail-type": strings.Replace(spotBody, "EC2 Spot Instance Interruption Warning", "EC2 AMI State Change", 1),
	} {
		if _, relevant, err := ParseMessage([]byte(body)); relevant || err != nil {
			t.Errorf("%s: relevant %t, err %v; want ignored", name, relevant, err)
		}
	}
	for name, body := range map[string]string{
		"not JSON":           "spot!",
		"no detail-type":     `{"id":"x","source":"aws.ec2"}`,
		"bad instance ID":    strings.ReplaceAll(spotBody, "i-0b662ef9931388ba0", "i-XYZ"),
		"spot without time":  strings.Replace(spotBody, `"time":"2026-11-24T10:00:00Z",`, "", 1),
		"hook without token": strings.Replace(hookBody, "87654321-4321-4321-4321-210987654321", "", 1),
		"health bad start":   strings.Replace(healthBody, "Sat, 28 Nov 2026 13:00:00 GMT", "soon", 1),
	} {
		if _, relevant, err := ParseMessage([]byte(body)); err == nil {
			t.Errorf("%s: accepted (relevant %t); want an error", name, relevant)
		}
	}
}

// Whatever arrives on the queue, a message is an error, ignored, or a
// notice of at least one valid instance with a named event; a hook names
// all it needs to be completed.
func FuzzParseMessage(f *testing.F) {
	for _, seed := range []string{spotBody, rebalanceBody, stateBody, hookBody, directHookBody, testNotificationBody, healthBody, `{}`, `[]`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, relevant, err := ParseMessage(body)
		if err != nil || !relevant {
			if relevant {
				t.Fatalf("relevant with an error: %v", err)
			}
			return
		}
		if (n.Event.ID == "" || n.Event.Type == "") && len(n.Ends) == 0 || len(n.InstanceIDs) == 0 {
			t.Fatalf("notice %+v from %q", n, body)
		}
		for _, id := range n.InstanceIDs {
			if !instanceIDPattern(id) {
				t.Fatalf("instance %q from %q", id, body)
			}
		}
		if h := n.Hook; h != nil && (h.Token == "" || h.Group == "" || h.Name == "" || h.InstanceID != n.InstanceIDs[0]) {
			t.Fatalf("hook %+v from %q", h, body)
		}
	})
}
