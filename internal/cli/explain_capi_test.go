package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func capiObject(kind, name string, labels map[string]string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(clusterapi.Group + "/" + clusterapi.Version)
	u.SetKind(kind)
	u.SetNamespace("fleet")
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// explain names a cluster-api node's Machine, MachineSet and
// MachineDeployment, says whether sluice's hook holds it and what sluice's
// condition says, and notices a rollout (two MachineSets with replicas).
func TestExplainNamesTheMachine(t *testing.T) {
	md := map[string]string{clusterapi.LabelDeploymentName: "md-0"}
	m := capiObject("Machine", "md-0-new-x1", md, map[string]any{
		"spec": map[string]any{"providerID": "kwok://n1"},
		"status": map[string]any{"phase": "Deleting", "nodeRef": map[string]any{"name": "n1"},
			"conditions": []any{map[string]any{"type": contract.ConditionMachineDrained, "status": "False", "reason": "DrainBlocked", "message": "PodDisruptionBudget db"}}},
	})
	m.SetAnnotations(map[string]string{clusterapi.AnnotationPreDrainHook: "sluice"})
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "md-0-new", UID: "u"}})
	now := metav1.Now()
	m.SetDeletionTimestamp(&now)
	m.SetFinalizers([]string{"machine.cluster.x-k8s.io"})
	other := capiObject("Machine", "md-0-new-x2", md, map[string]any{"spec": map[string]any{"providerID": "kwok://n2"}})
	oldSet := capiObject("MachineSet", "md-0-old", md, map[string]any{"spec": map[string]any{"replicas": int64(2)}})
	newSet := capiObject("MachineSet", "md-0-new", md, map[string]any{"spec": map[string]any{"replicas": int64(1)}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		clusterapi.Machines: "MachineList", clusterapi.MachineSets: "MachineSetList",
	}, m, other, oldSet, newSet)
	pool := &v1alpha1.NodePool{Spec: v1alpha1.NodePoolSpec{Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderClusterAPI,
		ClusterAPI: &v1alpha1.ClusterAPIProviderSpec{Namespace: "fleet", MachineDeployment: "md-0"}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "kwok://n1"}}

	f := clusterAPIOf(context.Background(), dyn, pool, node)
	if f == nil || f.Machine != "fleet/md-0-new-x1" || f.MachineDeployment != "md-0" || f.MachineSet != "md-0-new" || !f.Held || !f.Deleting {
		t.Fatalf("clusterAPIOf = %+v; want Machine fleet/md-0-new-x1 of md-0-new and md-0, held, deleting", f)
	}
	text := strings.Join(f.lines(), "\n")
	for _, want := range []string{"Machine fleet/md-0-new-x1 (MachineDeployment md-0, MachineSet md-0-new", "pre-drain hook holds it",
		"DrainBlocked", "PodDisruptionBudget db", "rolling out", "md-0-old: 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain's Cluster API block lacks %q:\n%s", want, text)
		}
	}
	if clusterAPIOf(context.Background(), dyn, &v1alpha1.NodePool{}, node) != nil {
		t.Error("a pool of another provider got a Cluster API block")
	}
	stranger := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n9"}, Spec: corev1.NodeSpec{ProviderID: "kwok://n9"}}
	if f := clusterAPIOf(context.Background(), dyn, pool, stranger); f == nil || !strings.Contains(f.Error, "no Machine") {
		t.Errorf("a node no Machine names: %+v; want an error saying so", f)
	}
}
