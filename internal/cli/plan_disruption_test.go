package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// TestPlanDisruption: sluice plan prints the controller's own pass, method
// by method in the list's order, within the budgets: in a pool with room
// for three disruptions, two drifted nodes and two expired ones older than
// them, both drifted ones come first (Drifted precedes Expired, whatever
// the age), then the oldest expired one, and the last waits for the budget;
// a pool without a provider has no commands.
func TestPlanDisruption(t *testing.T) {
	web := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
			Template:     &v1alpha1.NodeTemplate{Labels: map[string]string{"pool": "web"}, Image: "img-2"},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "3"}}, ExpireAfter: "24h", ConsolidateAfter: v1alpha1.Never},
		},
	}
	none := web.DeepCopy()
	none.Name, none.Spec.Provider.Name = "bare", v1alpha1.ProviderNone
	none.Spec.NodeSelector.MatchLabels = map[string]string{"pool": "bare"}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.NodePoolResource: "NodePoolList"}, web, none)
	kc := fake.NewClientset(
		testNode("web-drifted", "web", "img-1", now.Add(-2*time.Hour)),
		testNode("web-expired", "web", "img-2", now.Add(-48*time.Hour)),
		testNode("web-drifted-too", "web", "img-1", now.Add(-time.Hour)),
		testNode("web-expired-too", "web", "img-2", now.Add(-30*time.Hour)),
		testNode("web-fine", "web", "img-2", now.Add(-time.Hour)),
		testNode("bare-drifted", "bare", "img-1", now.Add(-time.Hour)),
	)

	var out bytes.Buffer
	if err := runPlanDisruption(context.Background(), &out, kc, dyn, nil, outputJSON, now); err != nil {
		t.Fatal(err)
	}
	var plans []poolPlan
	if err := json.Unmarshal(out.Bytes(), &plans); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	got := map[string][]string{}
	for _, p := range plans {
		got[p.Pool] = nil
		for _, c := range p.Commands {
			got[p.Pool] = append(got[p.Pool], string(c.Method)+" "+c.Object)
		}
	}
	if w := []string{"Drifted web-drifted", "Drifted web-drifted-too", "Expired web-expired"}; strings.Join(got["web"], ",") != strings.Join(w, ",") {
		t.Errorf("web's commands %v; want %v", got["web"], w)
	}
	if c, ok := got["bare"]; !ok || len(c) != 0 {
		t.Errorf("bare's commands %v (listed %v); want none", c, ok)
	}

	out.Reset()
	if err := runPlanDisruption(context.Background(), &out, kc, dyn, []string{"web"}, outputText, now); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"The methods, in order: Unhealthy, Upgrade, Drifted, Expired, RebootRequired, Empty, Underutilized",
		"1.  Drifted  web-drifted      replace the node, replacement first: drifted from the pool's template: image: want img-2, node has img-1",
		"3.  Expired  web-expired      replace the node, replacement first: expired at",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("plan does not show %q:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "web-expired-too") {
		t.Errorf("plan shows a fourth node beyond the budget of 3:\n%s", out.String())
	}
}
