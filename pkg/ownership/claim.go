package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ClaimTTL is how long a claim stays live without renewal; ClaimRenew is how
// long after its last write a running drain renews it, and ClaimRetry how
// soon it tries again when a renewal fails. Renewing at half the TTL, with
// retries, keeps the claim live through four failed renewals in a row, and
// a node drained in less than ClaimRenew (most are) costs no renewal at all.
const (
	ClaimTTL   = 30 * time.Second
	ClaimRenew = 15 * time.Second
	ClaimRetry = 3 * time.Second
)

// Claim is a drain's record on the node it drains (contract.AnnotationDrain):
// a lease its drain renews ClaimRenew after each write, live for ClaimTTL
// after each.
type Claim struct {
	ID       string     `json:"id"`
	Holder   string     `json:"holder"`
	Started  time.Time  `json:"started"`
	Renewed  time.Time  `json:"renewed"`
	Deadline *time.Time `json:"deadline,omitempty"`
}

// ClaimOf reads the node's claim, if it has a well-formed one.
func ClaimOf(node *corev1.Node) (Claim, bool) {
	var c Claim
	raw, ok := node.Annotations[contract.AnnotationDrain]
	if !ok || json.Unmarshal([]byte(raw), &c) != nil {
		return Claim{}, false
	}
	return c, true
}

// LiveClaim reads the claim of the drain in progress on the node: who holds
// it and when it lapses unless renewed; ok is false when no drain holds the
// node (no claim, an unreadable one, or one past its time).
func LiveClaim(node *corev1.Node, now time.Time) (holder string, until time.Time, ok bool) {
	c, found := ClaimOf(node)
	if !found || now.Sub(c.Renewed) > ClaimTTL {
		return "", time.Time{}, false
	}
	return c.Holder, c.Renewed.Add(ClaimTTL), true
}

// HeldByOther reports a live claim by another drain than the one with id;
// with id empty (no drain of the caller's), by any drain, a claim without
// an ID included.
func HeldByOther(node *corev1.Node, id string, now time.Time) (Claim, bool) {
	c, ok := ClaimOf(node)
	if !ok || id != "" && c.ID == id || now.Sub(c.Renewed) > ClaimTTL {
		return c, false
	}
	return c, true
}

// ClaimAndCordon claims the node and cordons it in one conditional patch, so
// two drains racing for a node cannot both win.
func ClaimAndCordon(ctx context.Context, client kubernetes.Interface, node *corev1.Node, c Claim, owner string) error {
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding claim: %w", err)
	}
	annotations := map[string]any{contract.AnnotationDrain: string(data)}
	// The cordon becomes ours when we place it, and a person's drain takes
	// over a cordon placed for a maintenance event: the person now wants the
	// node out of service, and the event's end must not put it back.
	if !node.Spec.Unschedulable || owner == OwnerCLI && IsMaintenanceOwner(node.Annotations[contract.AnnotationCordonedBy]) {
		annotations[contract.AnnotationCordonedBy] = owner
	}
	patch := map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion, "annotations": annotations},
		"spec":     map[string]any{"unschedulable": true},
	}
	return patchNode(ctx, client, node.Name, patch)
}

// ErrClaimLost means another drain has taken the node over.
var ErrClaimLost = errors.New("the drain claim on the node is no longer this drain's")

// RewriteClaim replaces our claim on the node with next, or removes it when
// next is nil, but only while the claim is still ours: a drain whose renewals
// failed long enough for another to take over must not overwrite or delete
// that drain's claim. When the caller knows the claim as last written (last),
// one JSON patch tests that it is still there and replaces it, so a renewal
// costs one request; otherwise, or when the test fails (a write we thought
// had failed went through), it reads the node and patches conditionally on its
// resourceVersion.
func RewriteClaim(ctx context.Context, client kubernetes.Interface, nodeName, id string, last, next *Claim) error {
	var value any // JSON null removes the annotation
	if next != nil {
		data, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encoding claim: %w", err)
		}
		value = string(data)
	}
	if last != nil {
		if err := testAndSetClaim(ctx, client, nodeName, *last, value); err == nil {
			return nil
		}
	}
	var err error
	for range 3 {
		var node *corev1.Node
		node, err = client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading node %s: %w", nodeName, err)
		}
		if cur, ok := ClaimOf(node); !ok || cur.ID != id {
			return ErrClaimLost
		}
		err = patchNode(ctx, client, nodeName, map[string]any{"metadata": map[string]any{
			"resourceVersion": node.ResourceVersion, "annotations": map[string]any{contract.AnnotationDrain: value}}})
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// testAndSetClaim replaces (or, for a nil value, removes) the claim in one
// JSON patch that first tests it still reads as last.
func testAndSetClaim(ctx context.Context, client kubernetes.Interface, nodeName string, last Claim, value any) error {
	old, err := json.Marshal(last)
	if err != nil {
		return fmt.Errorf("encoding claim: %w", err)
	}
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(contract.AnnotationDrain, "~", "~0"), "/", "~1")
	ops := []map[string]any{{"op": "test", "path": path, "value": string(old)}}
	if value == nil {
		ops = append(ops, map[string]any{"op": "remove", "path": path})
	} else {
		ops = append(ops, map[string]any{"op": "replace", "path": path, "value": value})
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encoding patch for node %s: %w", nodeName, err)
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, nodeName, types.JSONPatchType, data, metav1.PatchOptions{})
	return err
}

func patchNode(ctx context.Context, client kubernetes.Interface, node string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding patch for node %s: %w", node, err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching node %s: %w", node, err)
	}
	return nil
}
