package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// clusterAPIFacts are the Cluster API objects behind a node of a
// cluster-api pool, for `sluice explain node`.
type clusterAPIFacts struct {
	Machine           string `json:"machine"`
	MachineDeployment string `json:"machineDeployment,omitempty"`
	MachineSet        string `json:"machineSet,omitempty"`
	Phase             string `json:"phase,omitempty"`
	// Deleting: Cluster API is deleting the Machine.
	Deleting bool `json:"deleting,omitempty"`
	// Held: sluice's pre-drain hook is on the Machine.
	Held bool `json:"held"`
	// Drained is sluice's condition on the Machine: status, reason, message.
	Drained string `json:"drained,omitempty"`
	// RollingOut lists the MachineDeployment's MachineSets that hold
	// replicas when there are several (a rollout in progress).
	RollingOut []string `json:"rollingOut,omitempty"`
	// Error says why the Machine could not be read.
	Error string `json:"error,omitempty"`
}

// clusterAPIOf finds the node's Machine (by providerID, in the pool's
// namespace); nil for a node of another provider.
func clusterAPIOf(ctx context.Context, dyn dynamic.Interface, pool *v1alpha1.NodePool, node *corev1.Node) *clusterAPIFacts {
	spec := pool.Spec.Provider.ClusterAPI
	if pool.Spec.Provider.Name != v1alpha1.ProviderClusterAPI || spec == nil {
		return nil
	}
	machines, err := dyn.Resource(clusterapi.Machines).Namespace(spec.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return &clusterAPIFacts{Error: fmt.Sprintf("listing Machines in %s: %v", spec.Namespace, err)}
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		ref, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		if (id == "" || id != node.Spec.ProviderID) && ref != node.Name {
			continue
		}
		f := &clusterAPIFacts{Machine: m.GetNamespace() + "/" + m.GetName(),
			MachineDeployment: m.GetLabels()[clusterapi.LabelDeploymentName],
			Deleting:          m.GetDeletionTimestamp() != nil,
			Held:              m.GetAnnotations()[clusterapi.AnnotationPreDrainHook] != ""}
		f.Phase, _, _ = unstructured.NestedString(m.Object, "status", "phase")
		for _, o := range m.GetOwnerReferences() {
			if o.Kind == "MachineSet" {
				f.MachineSet = o.Name
			}
		}
		conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok && cm["type"] == contract.ConditionMachineDrained {
				f.Drained = fmt.Sprintf("%v (%v): %v", cm["status"], cm["reason"], cm["message"])
			}
		}
		if f.MachineDeployment != "" {
			f.RollingOut = rollingOut(ctx, dyn, spec.Namespace, f.MachineDeployment)
		}
		return f
	}
	return &clusterAPIFacts{Error: fmt.Sprintf("no Machine in %s has providerID %q or names the node", spec.Namespace, node.Spec.ProviderID)}
}

// rollingOut lists the MachineDeployment's MachineSets with replicas when
// more than one has them.
func rollingOut(ctx context.Context, dyn dynamic.Interface, ns, md string) []string {
	sets, err := dyn.Resource(clusterapi.MachineSets).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: clusterapi.LabelDeploymentName + "=" + md})
	if err != nil {
		return nil
	}
	var active []string
	for _, s := range sets.Items {
		if r, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas"); r > 0 {
			active = append(active, fmt.Sprintf("%s: %d", s.GetName(), r))
		}
	}
	if len(active) < 2 {
		return nil
	}
	return active
}

// lines are the rows `sluice explain node` prints under "Cluster API".
func (f *clusterAPIFacts) lines() []string {
	if f.Error != "" {
		return []string{f.Error}
	}
	out := []string{fmt.Sprintf("Machine %s (MachineDeployment %s, MachineSet %s, phase %s)", f.Machine, orNone(f.MachineDeployment), orNone(f.MachineSet), orNone(f.Phase))}
	switch {
	case f.Deleting && f.Held:
		out = append(out, "Cluster API is deleting the Machine; sluice's pre-drain hook holds it while sluice drains the node")
	case f.Deleting:
		out = append(out, "Cluster API is deleting the Machine without sluice's hook on it (sluice released it, or it was deleted before sluice hooked it): Cluster API goes on, draining unless sluice did")
	case f.Held:
		out = append(out, "sluice's pre-drain hook is on the Machine: if Cluster API deletes it, sluice drains the node first")
	default:
		out = append(out, "no sluice pre-drain hook yet: a deletion now is drained by Cluster API itself")
	}
	if f.Drained != "" {
		out = append(out, "sluice's condition: "+f.Drained)
	}
	if len(f.RollingOut) > 0 {
		out = append(out, fmt.Sprintf("MachineDeployment %s is rolling out (%v): sluice does not remove its machines itself now, as Cluster API could take another one; the rollout replaces them, drained by sluice through its hook", f.MachineDeployment, f.RollingOut))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
