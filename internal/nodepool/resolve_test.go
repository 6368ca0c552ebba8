package nodepool

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pool makes a pool created minute minutes after epoch.
func pool(name string, minute int, sel metav1.LabelSelector) v1alpha1.NodePool {
	return v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(minute) * time.Minute))},
		Spec:       v1alpha1.NodePoolSpec{NodeSelector: sel},
	}
}

func labelsSel(kv ...string) metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return metav1.LabelSelector{MatchLabels: m}
}

func exprSel(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestFor(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "aks-spot-0", Labels: map[string]string{
		"agentpool": "spot", "kubernetes.io/os": "linux", "zone": "1",
	}}}
	tests := []struct {
		name          string
		pools         []v1alpha1.NodePool
		want          string // "" for no pool
		wantAmbiguous []string
		wantBadPools  []string
	}{
		{name: "no pools"},
		{name: "no pool matches", pools: []v1alpha1.NodePool{
			pool("system", 0, labelsSel("agentpool", "system")),
			pool("gpu", 1, exprSel("gpu", metav1.LabelSelectorOpExists)),
		}},
		{name: "one pool matches by labels", want: "spot", pools: []v1alpha1.NodePool{
			pool("system", 0, labelsSel("agentpool", "system")),
			pool("spot", 1, labelsSel("agentpool", "spot", "zone", "1")),
		}},
		{name: "every label must match", pools: []v1alpha1.NodePool{
			pool("spot-zone-2", 0, labelsSel("agentpool", "spot", "zone", "2")),
		}},
		{name: "one pool matches by expression", want: "linux", pools: []v1alpha1.NodePool{
			pool("windows", 0, exprSel("kubernetes.io/os", metav1.LabelSelectorOpIn, "windows")),
			pool("linux", 1, exprSel("kubernetes.io/os", metav1.LabelSelectorOpIn, "linux")),
		}},
		{name: "NotIn matches", want: "not-system", pools: []v1alpha1.NodePool{
			pool("not-system", 0, exprSel("agentpool", metav1.LabelSelectorOpNotIn, "system")),
		}},
		{name: "several match: the oldest wins", want: "old", wantAmbiguous: []string{"old", "middle", "new"}, pools: []v1alpha1.NodePool{
			pool("new", 9, labelsSel("agentpool", "spot")),
			pool("old", 1, exprSel("zone", metav1.LabelSelectorOpExists)),
			pool("middle", 5, labelsSel("kubernetes.io/os", "linux")),
		}},
		{name: "same age: the first name wins", want: "a", wantAmbiguous: []string{"a", "b"}, pools: []v1alpha1.NodePool{
			pool("b", 3, labelsSel("agentpool", "spot")),
			pool("a", 3, labelsSel("zone", "1")),
		}},
		{name: "an invalid selector is passed over", want: "spot", wantBadPools: []string{"typo"}, pools: []v1alpha1.NodePool{
			pool("typo", 0, exprSel("agentpool", "Equals", "spot")),
			pool("spot", 1, labelsSel("agentpool", "spot")),
		}},
		{name: "an empty selector claims no node", wantBadPools: []string{"everything"}, pools: []v1alpha1.NodePool{
			pool("everything", 0, metav1.LabelSelector{}),
		}},
		{name: "invalid and ambiguous together", want: "b", wantAmbiguous: []string{"b", "c"}, wantBadPools: []string{"a"}, pools: []v1alpha1.NodePool{
			pool("a", 0, exprSel("agentpool", metav1.LabelSelectorOpIn)), // In needs values
			pool("c", 2, labelsSel("agentpool", "spot")),
			pool("b", 1, labelsSel("agentpool", "spot")),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := For(node, tt.pools)
			switch {
			case tt.want == "" && got != nil:
				t.Errorf("For chose %s, want no pool", got.Name)
			case tt.want != "" && got == nil:
				t.Errorf("For chose no pool, want %s", tt.want)
			case tt.want != "" && got.Name != tt.want:
				t.Errorf("For chose %s, want %s", got.Name, tt.want)
			}
			if tt.wantAmbiguous == nil && tt.wantBadPools == nil && err != nil {
				t.Errorf("For: unexpected error %v", err)
			}
			var amb *AmbiguousError
			switch {
			case tt.wantAmbiguous == nil && errors.As(err, &amb):
				t.Errorf("For: unexpected %v", amb)
			case tt.wantAmbiguous != nil && !errors.As(err, &amb):
				t.Errorf("For: error %v, want an *AmbiguousError", err)
			case tt.wantAmbiguous != nil && (amb.Node != node.Name || !slices.Equal(amb.Pools, tt.wantAmbiguous)):
				t.Errorf("AmbiguousError{Node: %s, Pools: %v}, want {%s, %v}", amb.Node, amb.Pools, node.Name, tt.wantAmbiguous)
			}
			if bad := badPools(err); !slices.Equal(bad, tt.wantBadPools) {
				t.Errorf("SelectorErrors for %v, want %v (error: %v)", bad, tt.wantBadPools, err)
			}
		})
	}
}

// The chosen pool is the caller's own element, not a copy.
func TestForPointsIntoPools(t *testing.T) {
	pools := []v1alpha1.NodePool{pool("spot", 0, labelsSel("agentpool", "spot"))}
	got, _ := For(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"agentpool": "spot"}}}, pools)
	if got != &pools[0] {
		t.Errorf("For returned %p, want &pools[0] = %p", got, &pools[0])
	}
}

func TestAmbiguousErrorMessage(t *testing.T) {
	err := &AmbiguousError{Node: "n1", Pools: []string{"old", "new"}}
	want := "node n1 is selected by 2 node pools (old, new); it follows the oldest, old: make their nodeSelectors disjoint"
	if err.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", err.Error(), want)
	}
}

// badPools lists the pools of the *SelectorErrors in err, which For joins.
func badPools(err error) []string {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return nil
	}
	var out []string
	for _, e := range joined.Unwrap() {
		if se := (*SelectorError)(nil); errors.As(e, &se) {
			out = append(out, se.Pool)
		}
	}
	return out
}
