package registration

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// A new Node's pool: the one its provider labelled it with, else the pool
// of the node whose record names it, else the one whose selector matches.
func TestPoolOf(t *testing.T) {
	pool := func(name, team string) v1alpha1.NodePool {
		return v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.NodePoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": team}}}}
	}
	pools := []v1alpha1.NodePool{pool("web", "web"), pool("batch", "batch")}
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
	}
	tests := []struct {
		name     string
		n        *corev1.Node
		replaced *corev1.Node
		want     string
	}{
		{"the provider's label first", node(map[string]string{contract.LabelNodePool: "batch", "team": "web"}), nil, "batch"},
		{"a label naming no pool falls through", node(map[string]string{contract.LabelNodePool: "gone", "team": "web"}), nil, "web"},
		{"the replaced node's pool before the selector", node(map[string]string{"team": "web"}), node(map[string]string{"team": "batch"}), "batch"},
		{"the selector", node(map[string]string{"team": "web"}), nil, "web"},
		{"none", node(map[string]string{"team": "db"}), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if p := poolOf(tt.n, tt.replaced, pools); p != nil {
				got = p.Name
			}
			if got != tt.want {
				t.Errorf("poolOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// A node with a record is indexed by its replacement's machine name and
// providerID (Azure's in one case), so a Node that joined untainted is
// known as a replacement.
func TestReplacementKeys(t *testing.T) {
	rec := disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Replacement: "web-a1b2c",
		ReplacementProviderID: "azure:///subscriptions/X/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/s/virtualMachines/3"}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", Annotations: map[string]string{contract.AnnotationDisruption: rec.String()}}}
	want := []string{"machine/web-a1b2c", "id/azure:///subscriptions/x/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/s/virtualmachines/3"}
	if got := replacementKeys(n); !slices.Equal(got, want) {
		t.Errorf("replacementKeys = %v, want %v", got, want)
	}
	if got := replacementKeys(&corev1.Node{}); got != nil {
		t.Errorf("a node without a record: %v, want none", got)
	}
}
