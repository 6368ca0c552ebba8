package kwok

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// DefaultRebootDowntime is how long a rebooted sandbox node is NotReady.
const DefaultRebootDowntime = 3 * time.Second

// kwokConditions are the conditions kwok's kubelets report themselves; any
// other (node-problem-detector's KernelDeadlock, a GPU check) was written
// by a fault, and a fresh boot clears it.
var kwokConditions = map[corev1.NodeConditionType]bool{
	corev1.NodeReady: true, corev1.NodeMemoryPressure: true, corev1.NodeDiskPressure: true,
	corev1.NodePIDPressure: true, corev1.NodeNetworkUnavailable: true,
}

// Reboot restarts a registered machine in place, as a cloud's reboot does
// to a VM: its Node is NotReady for the provider's reboot downtime, then
// comes back with a new boot ID (a kubelet reports its boot when it starts
// again, so the new ID never shows before the node went down). A fault the sandbox put on the node (not-ready, a bad
// condition) and the OS's reboot-required report go with the old boot,
// unless the node is annotated contract.SandboxFaultSurvivesReboot (a broken
// disk outlives a reboot). A machine without a Node is not found.
func (p *Provider) Reboot(ctx context.Context, name string) error {
	node, err := p.client.CoreV1().Nodes().Get(ctx, p.nodeName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("reading the node of machine %s: %w", name, err)
	}
	if m, ours := machineOf(node); !ours || m.Name != name {
		return fmt.Errorf("machine %s (node %s was not made by the kwok provider for it): %w", name, node.Name, provider.ErrNotFound)
	}
	survives := node.Annotations[contract.SandboxFaultSurvivesReboot] == "true"
	annotations := map[string]any{contract.SandboxRebootedAt: p.clock.Now().UTC().Format(time.RFC3339)}
	if !survives {
		annotations[contract.SandboxNotReady] = "rebooting"
		annotations[contract.AnnotationRebootRequired] = nil
	}
	if err := p.patch(ctx, node.Name, types.MergePatchType, map[string]any{"metadata": map[string]any{"annotations": annotations}}, ""); err != nil {
		return err
	}
	if survives {
		// The machine rebooted and its fault came back with it.
		return p.patch(ctx, node.Name, types.MergePatchType, map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"bootID": newBootID()}}}, "status")
	}
	go p.bootAfter(context.WithoutCancel(ctx), node.Name)
	return nil
}

// bootAfter ends the reboot's downtime: the kubelet reports its new boot,
// without the conditions a fault set (a merge patch replaces the list
// whole), and Ready again (kwok's sluice-node-ready stage) once the
// not-ready annotation goes.
func (p *Provider) bootAfter(ctx context.Context, node string) {
	<-p.clock.After(p.opts.RebootDowntime)
	n, err := p.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil || n.Annotations[contract.SandboxNotReady] != "rebooting" {
		return // gone, or a fault came back meanwhile
	}
	status := map[string]any{"nodeInfo": map[string]any{"bootID": newBootID()}}
	var kept []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if kwokConditions[c.Type] {
			kept = append(kept, c)
		}
	}
	if len(kept) != len(n.Status.Conditions) {
		status["conditions"] = kept
	}
	if err := p.patch(ctx, node, types.MergePatchType, map[string]any{"status": status}, "status"); err != nil {
		p.opts.Log.Error("ending a reboot's downtime", "node", node, "err", err)
		return
	}
	if err := p.patch(ctx, node, types.MergePatchType, map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.SandboxNotReady: nil}}}, ""); err != nil {
		p.opts.Log.Error("ending a reboot's downtime", "node", node, "err", err)
	}
}

func (p *Provider) patch(ctx context.Context, node string, pt types.PatchType, body map[string]any, subresource string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	if _, err := p.client.CoreV1().Nodes().Patch(ctx, node, pt, b, metav1.PatchOptions{FieldManager: "sluice-kwok"}, sub...); err != nil {
		return fmt.Errorf("rebooting node %s: %w", node, err)
	}
	return nil
}

// newBootID is a random boot ID, as a kernel makes one at each boot.
func newBootID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
