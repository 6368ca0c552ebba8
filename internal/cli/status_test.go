package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// now is a Monday, 13:00 UTC.
var now = time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC)

// cluster is a small cluster without a controller: pool gpu (provider none)
// whose two nodes run an older image than its template, pool spot (kwok)
// whose drift budget is closed during office hours and whose provider last
// failed, and a node no pool selects; more pools may be added.
func cluster(t *testing.T, more ...runtime.Object) (*fake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	office := v1alpha1.Budget{Nodes: "0", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted},
		Schedule: ptr.To("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}
	gpu := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderNone},
			Template:     &v1alpha1.NodeTemplate{Image: "img-2"},
			Disruption:   &v1alpha1.DisruptionSpec{ExpireAfter: "720h"},
		},
	}
	spot := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "spot"},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "spot"}},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
			Template:     &v1alpha1.NodeTemplate{Labels: map[string]string{"pool": "spot"}, Image: "img-2"},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "50%"}, office}},
		},
		Status: v1alpha1.NodePoolStatus{Conditions: []metav1.Condition{{Type: "ProviderReady", Status: metav1.ConditionFalse,
			Reason: "QuotaExceeded", Message: "the account's quota is used up", LastTransitionTime: metav1.NewTime(now)}}},
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.NodePoolResource: "NodePoolList"}, append([]runtime.Object{gpu, spot}, more...)...)
	kc := fake.NewClientset(
		testNode("gpu-1", "gpu", "img-1", now.Add(-700*time.Hour)), // expires in 20h
		testNode("gpu-2", "gpu", "img-1", now.Add(-time.Hour)),
		testNode("spot-1", "spot", "img-1", now.Add(-time.Hour)),
		testNode("spot-2", "spot", "img-2", now.Add(-time.Hour)),
		testNode("lonely", "", "", now.Add(-time.Hour)),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", Annotations: map[string]string{"sluice.dev/do-not-disrupt": "true"}},
			Spec: corev1.PodSpec{NodeName: "spot-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "elsewhere", Annotations: map[string]string{"sluice.dev/do-not-disrupt": "true"}},
			Spec: corev1.PodSpec{NodeName: "gpu-2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	)
	return kc, dyn
}

// testNode is a Ready node of pool on the AKS image img, created at created.
func testNode(name, pool, img string, created time.Time) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if pool != "" {
		n.Labels["pool"] = pool
	}
	if img != "" {
		n.Labels["kubernetes.azure.com/node-image-version"] = img
	}
	return n
}

func TestStatusJSON(t *testing.T) {
	kc, dyn := cluster(t)
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, kc, dyn, nil, outputJSON, now); err != nil {
		t.Fatal(err)
	}
	var report statusReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("-o json printed no report: %v\n%s", err, out.String())
	}
	if len(report.Pools) != 2 || report.Pools[0].Name != "gpu" || report.Pools[1].Name != "spot" {
		t.Fatalf("pools %+v", report.Pools)
	}
	gpu, spot := report.Pools[0], report.Pools[1]
	if gpu.Nodes != 2 || gpu.Drifted != 2 || gpu.ExpiringSoon != 1 || gpu.Disrupting != 0 || gpu.Provider.Managed || gpu.Provider.Ready != "" || !gpu.Ready {
		t.Errorf("gpu %+v", gpu)
	}
	if spot.Nodes != 2 || spot.Drifted != 1 || spot.Provider.Ready != metav1.ConditionFalse || spot.Provider.Reason != "QuotaExceeded" {
		t.Errorf("spot %+v", spot)
	}
	byReason := map[v1alpha1.DisruptionReason]int{}
	for _, b := range spot.Budgets {
		byReason[b.Reason] = b.Allowed
	}
	if byReason[v1alpha1.ReasonDrifted] != 0 || byReason[v1alpha1.ReasonExpired] != 1 {
		t.Errorf("spot allows %v; want Drifted 0 (office hours), Expired 1 (50%% of 2)", byReason)
	}
	if spot.NextBudgetChange == nil || !spot.NextBudgetChange.Equal(time.Date(2026, 6, 1, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("spot's next budget change %v, want 17:00 when office hours end", spot.NextBudgetChange)
	}

	// The field names scripts rely on.
	var raw map[string]any
	_ = json.Unmarshal(out.Bytes(), &raw)
	pool := raw["pools"].([]any)[1].(map[string]any)
	for _, key := range []string{"name", "nodes", "disrupting", "drifted", "expired", "expiringWithin24h", "provider", "paused", "ready", "budgets", "nextBudgetChange"} {
		if _, ok := pool[key]; !ok {
			t.Errorf("pool JSON lacks %q: %v", key, pool)
		}
	}
	b := pool["budgets"].([]any)[2].(map[string]any)
	for _, key := range []string{"reason", "allowed", "limit", "disrupting", "binding", "nextChange"} {
		if _, ok := b[key]; !ok {
			t.Errorf("budget JSON lacks %q: %v", key, b)
		}
	}
}

func TestStatusText(t *testing.T) {
	kc, dyn := cluster(t)
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, kc, dyn, []string{"spot"}, outputText, now); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"NAME  PROVIDER",
		"spot  kwok (NotReady: QuotaExceeded)  2      0           1        0        0             no      True",
		"provider kwok: ProviderReady False (QuotaExceeded): the account's quota is used up",
		`budgets now (next change at 2026-06-01T17:00:00Z, in 4h: the window of nodes 0 for [Drifted] during "0 9 * * mon-fri" for 8h0m0s closes):`,
		`Drifted         0 of 0   nodes 0 for [Drifted] during "0 9 * * mon-fri" for 8h0m0s  1 allowed`,
		"Expired         1 of 1   nodes 50%                                                  1 allowed",
		"RebootRequired  1 of 1   nodes 50%                                                  1 allowed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status does not show %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "gpu") {
		t.Errorf("status spot shows another pool:\n%s", text)
	}
}

func TestStatusUnknownPool(t *testing.T) {
	kc, dyn := cluster(t)
	err := runStatus(context.Background(), &bytes.Buffer{}, kc, dyn, []string{"gpu", "nope"}, outputText, now)
	if err == nil || !strings.Contains(err.Error(), "node pool nope not found") || !strings.Contains(err.Error(), "kubectl get nodepools") {
		t.Errorf("error %v; want one naming the pool and how to list pools", err)
	}
}

func TestStatusWithoutTheCRD(t *testing.T) {
	kc, dyn := cluster(t)
	dyn.PrependReactor("list", "nodepools", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(v1alpha1.Resource("nodepools"), "")
	})
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, kc, dyn, nil, outputText, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the NodePool CRD is not installed") {
		t.Errorf("status without the CRD: %q", out.String())
	}
	out.Reset()
	if err := runStatus(context.Background(), &out, kc, dyn, nil, outputJSON, now); err != nil || !strings.Contains(out.String(), `"pools": []`) {
		t.Errorf("status -o json without the CRD: %v %q", err, out.String())
	}
}

// TestOutputFormats: text (the default), wide, json and yaml are known; any
// other is refused, naming them, before a command reads any kubeconfig.
func TestOutputFormats(t *testing.T) {
	for _, args := range [][]string{
		{"status", "-o", "xml", "--kubeconfig", "/nonexistent"},
		{"explain", "node", "n1", "-o", "xml", "--kubeconfig", "/nonexistent"},
		{"drain", "n1", "-o", "xml", "--kubeconfig", "/nonexistent"},
		{"version", "-o", "xml"},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := NewRootCommand()
			cmd.SetArgs(args)
			cmd.SetOut(&bytes.Buffer{})
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), `unknown --output "xml"`) || !strings.Contains(err.Error(), "text, wide, json or yaml") {
				t.Errorf("sluice %v: error %v; want one naming text, wide, json and yaml", args, err)
			}
		})
	}
}

// -o yaml is the JSON document's fields, as YAML; -o wide adds what the
// budgets allow now to the pools' table.
func TestStatusYAMLAndWide(t *testing.T) {
	kc, dyn := cluster(t)
	var j, y, w bytes.Buffer
	for _, run := range []struct {
		out    *bytes.Buffer
		format outputFormat
	}{{&j, outputJSON}, {&y, outputYAML}, {&w, outputWide}} {
		if err := runStatus(context.Background(), run.out, kc, dyn, nil, run.format, now); err != nil {
			t.Fatal(err)
		}
	}
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, y.String())
	}
	if !reflect.DeepEqual(fromJSON, fromYAML) || strings.HasPrefix(strings.TrimSpace(y.String()), "{") {
		t.Errorf("-o yaml is not the JSON document as YAML:\n%s", y.String())
	}
	for _, want := range []string{"READY  ALLOWED-NOW", "Drifted=0,Expired=1"} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("-o wide lacks %q:\n%s", want, w.String())
		}
	}
}
