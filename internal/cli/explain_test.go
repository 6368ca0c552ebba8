package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestExplainTarget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the node, or a part of the error
		ok   bool
	}{
		{args: []string{"node", "n1"}, want: "n1", ok: true},
		{args: nil, want: "sluice explain node NODE"},
		{args: []string{"n1"}, want: `cannot explain "n1": sluice explains nodes`},
		{args: []string{"pod", "web"}, want: `cannot explain "pod"`},
		{args: []string{"node"}, want: "needs a node name"},
		{args: []string{"node", "n1", "n2"}, want: "one node at a time; got 2: n1, n2"},
	} {
		got, err := explainTarget(tc.args)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("explainTarget(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("explainTarget(%q) = %q, %v; want an error saying %q", tc.args, got, err, tc.want)
		}
	}
}

// TestExplainArgumentsBeforeTheCluster: bad arguments are refused before any
// kubeconfig is read.
func TestExplainArgumentsBeforeTheCluster(t *testing.T) {
	cmd := NewRootCommand()
	cmd.SetArgs([]string{"explain", "pod", "web", "--kubeconfig", "/nonexistent"})
	cmd.SetOut(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "sluice explains nodes") {
		t.Errorf("error %v", err)
	}
}

func TestExplainNodeNotFound(t *testing.T) {
	kc, dyn := cluster(t)
	err := runExplain(context.Background(), &bytes.Buffer{}, kc, dyn, "nope", nil, outputText, now)
	if err == nil || !strings.Contains(err.Error(), "node nope not found") || !strings.Contains(err.Error(), "kubectl get nodes") {
		t.Fatalf("error %v; want one naming the node and how to list nodes", err)
	}
	var coded exitCoder
	if errors.As(err, &coded) {
		t.Errorf("a missing node exits %d; want %d", coded.ExitCode(), ExitError)
	}
}

func TestExplainText(t *testing.T) {
	kc, dyn := cluster(t)
	for _, tc := range []struct {
		node string
		says []string
	}{
		{node: "gpu-1", says: []string{
			"Node:        gpu-1",
			"Pool:        gpu (provider none, not managed: sluice only reports the nodes it would replace)",
			"Drift:       image: want img-2, node has img-1",
			"Expiry:      at 2026-06-02T09:00:00Z, in 20h",
			"Budget:      Drifted: 1 of 1 allowed now (budget nodes 10%; 0 out of service)",
			"\nVerdict: would be replaced (Drifted: image: want img-2, node has img-1), but reported only",
			"Consolidate: not consolidated (Disabled): pool gpu has no provider sluice runs",
		}},
		{node: "spot-1", says: []string{
			"ProviderReady False (QuotaExceeded): the account's quota is used up",
			"Protection:  pod shop/db is annotated sluice.dev/do-not-disrupt=true",
			`the window of nodes 0 for [Drifted] during "0 9 * * mon-fri" for 8h0m0s closes at 2026-06-01T17:00:00Z, in 4h (then 1 allowed)`,
			"\nVerdict: protected: pod shop/db",
			"Consolidate: not consolidated (DoNotDisrupt): pod shop/db is annotated sluice.dev/do-not-disrupt=true",
		}},
		{node: "spot-2", says: []string{"Drift:       none", "Verdict: not a candidate: matches its template and never expires"}},
		{node: "lonely", says: []string{"Pool:        no pool: defaults only", "Verdict: no pool: defaults only"}},
	} {
		t.Run(tc.node, func(t *testing.T) {
			var out bytes.Buffer
			if err := runExplain(context.Background(), &out, kc, dyn, tc.node, nil, outputText, now); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("explain does not show %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestExplainJSON(t *testing.T) {
	kc, dyn := cluster(t)
	explain := func(node string) (disruption.Explanation, map[string]any) {
		t.Helper()
		var out bytes.Buffer
		if err := runExplain(context.Background(), &out, kc, dyn, node, nil, outputJSON, now); err != nil {
			t.Fatal(err)
		}
		var e disruption.Explanation
		var raw map[string]any
		if err := json.Unmarshal(out.Bytes(), &e); err != nil {
			t.Fatalf("-o json: %v\n%s", err, out.String())
		}
		_ = json.Unmarshal(out.Bytes(), &raw)
		return e, raw
	}
	e, raw := explain("gpu-1")
	if e.Verdict.Code != disruption.VerdictReportedOnly || e.Candidate != v1alpha1.ReasonDrifted || len(e.Differences) != 1 || e.Differences[0].Field != "image" {
		t.Errorf("gpu-1: %+v", e)
	}
	for _, key := range []string{"node", "pool", "cordoned", "differences", "expiry", "candidate", "budget", "verdict"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if e, raw := explain("lonely"); e.Verdict.Code != disruption.VerdictNoPool || raw["pool"] != nil {
		t.Errorf("lonely: %+v", e)
	}
}

// TestExplainSaysWhenPoolsOverlap: a node two pools select follows the
// oldest, and explain says so.
func TestExplainSaysWhenPoolsOverlap(t *testing.T) {
	twin := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-twin", CreationTimestamp: metav1.NewTime(now.Add(time.Hour))},
		Spec:       v1alpha1.NodePoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}},
	}
	kc, dyn := cluster(t, twin)
	var out bytes.Buffer
	if err := runExplain(context.Background(), &out, kc, dyn, "gpu-1", nil, outputText, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "node gpu-1 is selected by 2 node pools (gpu, gpu-twin); it follows the oldest, gpu") {
		t.Errorf("explain does not say the pools overlap:\n%s", out.String())
	}
}

// --timeline is checked before the cluster is read, and a drain the
// controller did not keep is said so, naming where it looked.
func TestExplainTimelineRefusals(t *testing.T) {
	cmd := NewRootCommand()
	cmd.SetArgs([]string{"explain", "node", "n1", "--timeline", "drain.txt", "--kubeconfig", "/nonexistent"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "name a .html file") {
		t.Errorf("--timeline drain.txt: %v; want a refusal before the cluster", err)
	}

	kc, _ := cluster(t)
	page := t.TempDir() + "/n.html"
	kept, loadErr := loadKept(context.Background(), kc, "sluice-system", "gpu-1")
	err := explainTimeline(&bytes.Buffer{}, kept, loadErr, "sluice-system", "gpu-1", page, false)
	if err == nil || !strings.Contains(err.Error(), "no ConfigMap sluice-system/sluice-timeline-gpu-1") || !strings.Contains(err.Error(), "sluice drain --timeline") {
		t.Errorf("no kept timeline: %v; want where it looked and how a CLI drain draws its own", err)
	}
	kept, loadErr = loadKept(context.Background(), kc, "sluice-system", "nope")
	err = explainTimeline(&bytes.Buffer{}, kept, loadErr, "sluice-system", "nope", page, true)
	if err == nil || !strings.Contains(err.Error(), "node nope not found, and the controller keeps no drain of it in namespace sluice-system") {
		t.Errorf("a missing node without a timeline: %v", err)
	}
	if _, statErr := os.Stat(page); !os.IsNotExist(statErr) {
		t.Errorf("a page was written without a timeline: %v", statErr)
	}
}

// A drain the controller kept shows in the explanation, text and JSON, with
// how to draw it; the page is written from it.
func TestExplainNamesTheLastDrainKept(t *testing.T) {
	kc, dyn := cluster(t)
	ended := now.Add(-10 * time.Minute)
	store := timeline.NewStore(kc, "sluice-system", time.Hour, clocktesting.NewFakeClock(ended), nil)
	tl := timeline.Timeline{Title: "drain", Lanes: []timeline.Lane{{Node: "gpu-1", Outcome: "Drained", Pods: []timeline.Bar{{Pod: "ns/a"}, {Pod: "ns/b"}}}}}
	if err := store.Save(context.Background(), "gpu-1", "Expired", tl); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	kept, err := loadKept(context.Background(), kc, "sluice-system", "gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := runExplain(context.Background(), &out, kc, dyn, "gpu-1", lastDrainOf(kept, "gpu-1"), outputText, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Last drain:") || !strings.Contains(out.String(), "Expired, Drained (2 pods), ended") ||
		!strings.Contains(out.String(), "sluice explain node gpu-1 --timeline FILE.html") {
		t.Errorf("the explanation does not name the last drain:\n%s", out.String())
	}
	out.Reset()
	if err := runExplain(context.Background(), &out, kc, dyn, "gpu-1", lastDrainOf(kept, "gpu-1"), outputJSON, now); err != nil {
		t.Fatal(err)
	}
	var got struct {
		LastDrain *lastDrain `json:"lastDrain"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.LastDrain == nil || got.LastDrain.Reason != "Expired" || got.LastDrain.Pods != 2 || !got.LastDrain.Ended.Equal(ended.Truncate(time.Second)) {
		t.Errorf("-o json lastDrain %+v (%v)", got.LastDrain, err)
	}
	// Another namespace keeps nothing of it: no row.
	elsewhere, err := loadKept(context.Background(), kc, "elsewhere", "gpu-1")
	if !errors.Is(err, timeline.ErrNotFound) || elsewhere != nil {
		t.Fatalf("a namespace that keeps nothing: %v, %v", elsewhere, err)
	}
	out.Reset()
	if err := runExplain(context.Background(), &out, kc, dyn, "gpu-1", lastDrainOf(elsewhere, "gpu-1"), outputText, now); err != nil || strings.Contains(out.String(), "Last drain") {
		t.Errorf("with nothing kept: %v\n%s", err, out.String())
	}
	page := t.TempDir() + "/gpu-1.html"
	var errOut bytes.Buffer
	if err := explainTimeline(&errOut, kept, nil, "sluice-system", "gpu-1", page, false); err != nil || !strings.Contains(errOut.String(), "the Expired drain of gpu-1") {
		t.Errorf("explainTimeline: %v, said %q", err, errOut.String())
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), `"pod":"ns/b"`) {
		t.Errorf("the page (%v) does not hold the kept drain", err)
	}
}
