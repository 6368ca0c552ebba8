package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// TestPlanReboots: four nodes asked for a reboot, the budget lets two go at
// once, one is held by a blocking pod: two rounds for three nodes, the
// held one named with its pod, in text and in JSON.
func TestPlanReboots(t *testing.T) {
	web := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "50%"}}},
			Reboot:       &v1alpha1.RebootSpec{BlockingPodSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "backup"}}}},
		},
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{v1alpha1.NodePoolResource: "NodePoolList"}, web)
	var objs []runtime.Object
	for i := range 4 {
		n := testNode(fmt.Sprintf("web-%d", i), "web", "", now.Add(-time.Hour))
		n.Annotations = map[string]string{contract.AnnotationRebootRequired: now.Add(-time.Duration(10-i) * time.Minute).Format(time.RFC3339)}
		objs = append(objs, n)
	}
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "backup", Labels: map[string]string{"app": "backup"}},
		Spec: corev1.PodSpec{NodeName: "web-3"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	kc := fake.NewClientset(objs...)

	var out bytes.Buffer
	if err := runPlanReboots(context.Background(), &out, kc, dyn, nil, outputText, now); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"NodePool web: 4 node(s) asked for a reboot; 2 at a time",
		"  1      ", "web-0,web-1", "web-2",
		"web-3  BlockingPod: pod ops/backup matches blockingPodSelectors[0]",
		"one node at a time, as kured goes",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("plan reboots does not show %q:\n%s", s, out.String())
		}
	}
	out.Reset()
	if err := runPlanReboots(context.Background(), &out, kc, dyn, []string{"web"}, outputJSON, now); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Pool   string `json:"pool"`
		Rounds []struct {
			Nodes []string `json:"nodes"`
		} `json:"rounds"`
		Held []struct{ Node, Reason string } `json:"held"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	if len(got) != 1 || len(got[0].Rounds) != 2 || len(got[0].Held) != 1 || got[0].Held[0].Node != "web-3" {
		t.Fatalf("plan = %+v; want two rounds and web-3 held", got)
	}
}
