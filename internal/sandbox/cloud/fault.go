package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// Fault breaks a sandbox node for a while, as a failing machine would
// (docs/health.md): its kubelet reports NotReady, or a node-problem-detector
// condition (KernelDeadlock, a GPU check) turns True.
type Fault struct {
	Node string `json:"node"`
	// NotReady makes the kubelet report NotReady; Condition, when set,
	// makes that condition True instead (as node-problem-detector reports
	// it, through the node's status).
	Condition string `json:"condition,omitempty"`
	// For is how long the fault lasts; it ends by itself after (a reboot
	// through the kwok provider ends it sooner unless SurvivesReboot).
	For time.Duration `json:"for"`
	// SurvivesReboot keeps the fault through a reboot, as a broken disk.
	SurvivesReboot bool `json:"survivesReboot,omitempty"`
	// Clear ends every fault of the node now.
	Clear bool `json:"clear,omitempty"`
}

// conditionType is what a Kubernetes condition type may be.
var conditionType = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// Validate says what is wrong with the fault, as a person gave it.
func (f Fault) Validate() error {
	switch {
	case f.Node == "":
		return errors.New("--node is required")
	case f.Clear:
		return nil
	case f.For <= 0:
		return fmt.Errorf("the fault's duration %s must be positive (such as 5m)", f.For)
	case f.Condition == string(corev1.NodeReady):
		return errors.New("--condition Ready: use --not-ready, which makes the kubelet report it")
	case f.Condition != "" && (len(f.Condition) > 316 || !conditionType.MatchString(f.Condition)):
		return fmt.Errorf("--condition %q is not a condition type (such as KernelDeadlock or example.com/GPUHealthy)", f.Condition)
	}
	return nil
}

// ApplyFault breaks the node now and schedules the fault's end.
func (c *Cloud) ApplyFault(ctx context.Context, f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Clear {
		return c.heal(context.WithoutCancel(ctx), f.Node, "")
	}
	annotations := map[string]any{}
	if f.SurvivesReboot {
		annotations[contract.SandboxFaultSurvivesReboot] = "true"
	}
	if f.Condition == "" {
		annotations[contract.SandboxNotReady] = "fault"
	}
	if len(annotations) > 0 {
		if err := c.patchNode(ctx, f.Node, map[string]any{"metadata": map[string]any{"annotations": annotations}}, ""); err != nil {
			return err
		}
	}
	if f.Condition != "" {
		if err := c.setCondition(ctx, f.Node, f.Condition, corev1.ConditionTrue); err != nil {
			return err
		}
	}
	go func() {
		<-c.clock.After(f.For)
		if err := c.heal(context.WithoutCancel(ctx), f.Node, f.Condition); err != nil {
			c.log.Info("ending a fault", "node", f.Node, "err", err)
		}
	}()
	return nil
}

// heal ends the node's faults: the not-ready mark, and the condition (all
// True conditions the sandbox set, with "").
func (c *Cloud) heal(ctx context.Context, node, condition string) error {
	if err := c.patchNode(ctx, node, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		contract.SandboxNotReady: nil, contract.SandboxFaultSurvivesReboot: nil}}}, ""); err != nil {
		return err
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Reason == faultReason && cond.Status == corev1.ConditionTrue && (condition == "" || string(cond.Type) == condition) {
			if err := c.setCondition(ctx, node, string(cond.Type), corev1.ConditionFalse); err != nil {
				return err
			}
		}
	}
	return nil
}

// faultReason is the reason of the conditions a fault sets.
const faultReason = "SandboxFault"

// setCondition reports the condition on the node's status, as
// node-problem-detector does (a strategic merge of status.conditions by type).
func (c *Cloud) setCondition(ctx context.Context, node, typ string, status corev1.ConditionStatus) error {
	now := metav1.Now()
	msg := "sandbox: fault injected by `sluice sandbox fault`"
	if status == corev1.ConditionFalse {
		msg = "sandbox: the fault ended"
	}
	cond := map[string]any{"type": typ, "status": status, "reason": faultReason, "message": msg,
		"lastHeartbeatTime": now, "lastTransitionTime": now}
	return c.patchNode(ctx, node, map[string]any{"status": map[string]any{"conditions": []any{cond}}}, "status")
}

func (c *Cloud) patchNode(ctx context.Context, node string, body map[string]any, subresource string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	pt, sub := types.MergePatchType, []string(nil)
	if subresource != "" {
		pt, sub = types.StrategicMergePatchType, []string{subresource}
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, node, pt, b, metav1.PatchOptions{FieldManager: "sluice-sandbox"}, sub...); err != nil {
		return fmt.Errorf("breaking node %s: %w", node, err)
	}
	return nil
}
