package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// A Notice is one queue message about instances: the event it means for
// each, and the lifecycle hook to complete when it came from one.
type Notice struct {
	InstanceIDs []string
	Event       maintenance.Event
	// Hook is set for an Auto Scaling "terminating" lifecycle action: the
	// instance waits in Terminating:Wait until the hook is completed.
	Hook *LifecycleHook
	// Ends are the prefixes of the IDs of the events this notice ends (an
	// instance running again ends its stop and spot events); Event is then
	// empty.
	Ends []string
}

// LifecycleHook names one pending lifecycle action.
type LifecycleHook struct {
	Group      string `json:"group"`
	Name       string `json:"name"`
	Token      string `json:"token"`
	InstanceID string `json:"instanceID"`
}

// Detail types of the EventBridge events the queue mode reads.
const (
	DetailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailStateChange      = "EC2 Instance State-change Notification"
	DetailHealth           = "AWS Health Event"
	DetailTerminateHook    = "EC2 Instance-terminate Lifecycle Action"
)

// statePrefix begins the IDs of instance state-change events.
const statePrefix = "state-"

// spotNotice is how long before the reclaim EC2 sends its warning.
const spotNotice = 2 * time.Minute

// envelope is an EventBridge event, or (Service/Event/LifecycleTransition
// set) a lifecycle hook's own notification sent straight to SQS.
type envelope struct {
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`

	// A lifecycle hook's direct notification.
	Event      string    `json:"Event"`
	NotifiedAt time.Time `json:"Time"`
	hookDetail
}

type hookDetail struct {
	LifecycleActionToken string `json:"LifecycleActionToken"`
	AutoScalingGroupName string `json:"AutoScalingGroupName"`
	LifecycleHookName    string `json:"LifecycleHookName"`
	EC2InstanceID        string `json:"EC2InstanceId"`
	LifecycleTransition  string `json:"LifecycleTransition"`
}

type instanceDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

type healthDetail struct {
	EventArn         string `json:"eventArn"`
	Service          string `json:"service"`
	EventTypeCode    string `json:"eventTypeCode"`
	EventTypeCat     string `json:"eventTypeCategory"`
	StatusCode       string `json:"statusCode"`
	StartTime        string `json:"startTime"`
	EndTime          string `json:"endTime"`
	EventDescription []struct {
		Language          string `json:"language"`
		LatestDescription string `json:"latestDescription"`
	} `json:"eventDescription"`
	AffectedEntities []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// lifecycleTerminating is the transition a terminate hook holds.
const lifecycleTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"

// ParseMessage reads one queue message body. relevant is false for a
// message that asks nothing of sluice (an instance starting, a hook's test
// notification, a launch hook, another service's Health event); a body that
// is not what AWS documents is an error.
func ParseMessage(body []byte) (n Notice, relevant bool, err error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Notice{}, false, fmt.Errorf("queue message is not an EventBridge event: %w", err)
	}
	switch {
	case env.Event == "autoscaling:TEST_NOTIFICATION":
		return Notice{}, false, nil
	case env.DetailType == "" && env.LifecycleTransition != "":
		return hookNotice(env.hookDetail, env.NotifiedAt)
	case env.DetailType == "":
		return Notice{}, false, fmt.Errorf("queue message has no detail-type: %s", clip(string(body)))
	}
	switch env.DetailType {
	case DetailSpotInterruption, DetailRebalance, DetailStateChange:
		var d instanceDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil || !instanceIDPattern(d.InstanceID) {
			return Notice{}, false, fmt.Errorf("%s %s: no valid instance-id in its detail", env.DetailType, env.ID)
		}
		if env.Time.IsZero() {
			return Notice{}, false, fmt.Errorf("%s %s: no time", env.DetailType, env.ID)
		}
		return instanceNotice(env, d)
	case DetailTerminateHook:
		var d hookDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Notice{}, false, fmt.Errorf("%s %s: %w", env.DetailType, env.ID, err)
		}
		return hookNotice(d, env.Time)
	case DetailHealth:
		var d healthDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Notice{}, false, fmt.Errorf("%s %s: %w", env.DetailType, env.ID, err)
		}
		return healthNotice(env, d)
	}
	return Notice{}, false, nil
}

func instanceNotice(env envelope, d instanceDetail) (Notice, bool, error) {
	e := maintenance.Event{Source: maintenance.SourceAWS, Status: maintenance.StatusScheduled, Resources: []string{d.InstanceID}}
	switch env.DetailType {
	case DetailSpotInterruption:
		e.ID, e.Type = spotPrefix+env.ID, maintenance.TypePreempt
		e.Deadline = env.Time.Add(spotNotice)
		e.Description = "EC2 Spot interruption warning: the instance is reclaimed (" + d.InstanceAction + ") two minutes after " + env.Time.Format(time.RFC3339)
	case DetailRebalance:
		e.ID, e.Type = rebalancePrefix+env.ID, maintenance.TypeRebalance
		e.Description = "EC2 rebalance recommendation: the Spot instance is at elevated risk of interruption"
	case DetailStateChange:
		switch d.State {
		case "stopping", "stopped", "shutting-down", "terminated":
		case "running": // started again: its stop (and a spot stop) are over
			return Notice{InstanceIDs: []string{d.InstanceID}, Ends: []string{statePrefix, spotPrefix}}, true, nil
		default: // pending
			return Notice{}, false, nil
		}
		e.ID, e.Type, e.Status = statePrefix+env.ID, maintenance.TypeTerminate, maintenance.StatusStarted
		e.Deadline = env.Time
		e.Description = "EC2 instance state is " + d.State
	}
	return Notice{InstanceIDs: []string{d.InstanceID}, Event: e}, true, nil
}

func hookNotice(d hookDetail, at time.Time) (Notice, bool, error) {
	if d.LifecycleTransition != lifecycleTerminating {
		return Notice{}, false, nil // a launch hook: not sluice's
	}
	if !instanceIDPattern(d.EC2InstanceID) || d.LifecycleActionToken == "" || d.AutoScalingGroupName == "" || d.LifecycleHookName == "" {
		return Notice{}, false, fmt.Errorf("terminate lifecycle action: instance %q, group %q, hook %q, token set %t: all four are needed",
			clip(d.EC2InstanceID), clip(d.AutoScalingGroupName), clip(d.LifecycleHookName), d.LifecycleActionToken != "")
	}
	e := maintenance.Event{
		ID: lifecyclePrefix + "hook-" + short(d.LifecycleActionToken), Source: maintenance.SourceAWS,
		Type: maintenance.TypeTerminate, Status: maintenance.StatusScheduled, Resources: []string{d.EC2InstanceID},
		Description: fmt.Sprintf("Auto Scaling group %s is terminating the instance; lifecycle hook %s holds it until the node is drained (notified %s)",
			d.AutoScalingGroupName, d.LifecycleHookName, at.UTC().Format(time.RFC3339)),
	}
	hook := &LifecycleHook{Group: d.AutoScalingGroupName, Name: d.LifecycleHookName, Token: d.LifecycleActionToken, InstanceID: d.EC2InstanceID}
	return Notice{InstanceIDs: []string{d.EC2InstanceID}, Event: e, Hook: hook}, true, nil
}

// healthNotice maps an AWS Health scheduled change for EC2 instances.
func healthNotice(env envelope, d healthDetail) (Notice, bool, error) {
	if d.Service != "EC2" || d.EventTypeCat != "scheduledChange" {
		return Notice{}, false, nil
	}
	var ids []string
	for _, a := range d.AffectedEntities {
		if instanceIDPattern(a.EntityValue) {
			ids = append(ids, a.EntityValue)
		}
	}
	if len(ids) == 0 {
		return Notice{}, false, nil
	}
	start, err := healthTime(d.StartTime)
	if err != nil {
		return Notice{}, false, fmt.Errorf("AWS Health event %s: startTime: %w", clip(d.EventArn), err)
	}
	e := maintenance.Event{
		ID: "health-" + short(d.EventArn), Source: maintenance.SourceAWS, Type: maintenance.TypeMaintenance,
		Status: maintenance.StatusScheduled, NotBefore: start, Deadline: start, Resources: ids,
		Description: "AWS Health " + d.EventTypeCode,
	}
	switch code := d.EventTypeCode; {
	case strings.Contains(code, "REBOOT"):
		e.Type = maintenance.TypeReboot
	case strings.Contains(code, "RETIREMENT"), strings.Contains(code, "STOP"), strings.Contains(code, "TERMINATION"):
		e.Type = maintenance.TypeTerminate
	}
	if end, err := healthTime(d.EndTime); err == nil && end.After(start) {
		dur := end.Sub(start)
		e.Duration = &dur
	}
	switch d.StatusCode {
	case "closed":
		e.Status = maintenance.StatusCompleted
	case "open":
		e.Status = maintenance.StatusStarted
	}
	for _, desc := range d.EventDescription {
		if desc.Language == "en_US" && desc.LatestDescription != "" {
			e.Description += ": " + clip(desc.LatestDescription)
		}
	}
	return Notice{InstanceIDs: ids, Event: e}, true, nil
}

// healthTime reads AWS Health's times: "Wed, 31 Jan 2018 21:00:00 GMT", or
// RFC 3339.
func healthTime(s string) (time.Time, error) {
	if t, err := http.ParseTime(s); err == nil {
		return t.UTC(), nil
	}
	return time.Parse(time.RFC3339, s)
}

func instanceIDPattern(id string) bool {
	if !strings.HasPrefix(id, "i-") || len(id) < 10 || len(id) > 19 {
		return false
	}
	for _, c := range id[2:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// short is a stable 12-character name for a long identifier.
func short(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}
