package maintenance_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// TestAPreemptedNodesDrainOutlivesTheNode: the controller keeps the drain of
// a preempted node as a timeline, and `sluice explain node --timeline` draws
// it once the cloud has taken the node: a lane for the node, a bar for every
// pod that was on it, the one only the deadline moved marked forced.
func TestAPreemptedNodesDrainOutlivesTheNode(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.load(t)
	s.addSpare(t)
	before, err := s.podsOnNode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	startController(t, s.env)

	notBefore := time.Now().Add(30 * time.Second).Truncate(time.Second)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-tl", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vmName(t, s)},
		EventStatus: "Scheduled", NotBefore: rfc1123(notBefore), EventSource: "Platform", DurationInSeconds: -1})
	s.drainedBefore(t, notBefore)

	var kept *timeline.Kept
	s.env.WaitFor(t, 30*time.Second, "the drain's timeline", func(ctx context.Context) (bool, error) {
		k, err := timeline.Load(ctx, s.env.Client, s.env.Namespace, s.node)
		if errors.Is(err, timeline.ErrNotFound) {
			return false, nil
		}
		kept = k
		return err == nil, err
	})
	tl := kept.Timeline
	if kept.Reason != "Maintenance" || !strings.Contains(tl.Title, "preempt-tl") || tl.Deadline == nil {
		t.Errorf("kept: reason %q, title %q, deadline %v; want the Maintenance drain of preempt-tl with its deadline", kept.Reason, tl.Title, tl.Deadline)
	}
	if len(tl.Lanes) != 1 || tl.Lanes[0].Node != s.node || tl.Lanes[0].Outcome != string(drain.NodeDrained) {
		t.Fatalf("lanes %+v; want one, %s, Drained", tl.Lanes, s.node)
	}
	bars := map[string]timeline.Bar{}
	for _, b := range tl.Lanes[0].Pods {
		bars[b.Pod] = b
	}
	for _, p := range before {
		b, ok := bars[p.Namespace+"/"+p.Name]
		switch {
		case !ok:
			t.Errorf("no bar for %s/%s", p.Namespace, p.Name)
		case b.Asked == nil || b.Gone == nil:
			t.Errorf("%s: asked %v, gone %v; want both", b.Pod, b.Asked, b.Gone)
		case strings.HasPrefix(p.Name, "checkout-") && (!b.Forced || b.Reason != string(drain.ReasonDeadlineForced)):
			t.Errorf("%s: forced %v (%s); want deleted at the deadline (its budget allows nothing)", b.Pod, b.Forced, b.Reason)
		}
	}

	// The cloud takes the node; its drain is still there to draw.
	if err := s.env.Client.CoreV1().Nodes().Delete(t.Context(), s.node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "preempted.html")
	cmd := cli.NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"explain", "node", s.node, "--timeline", page, "--controller-namespace", s.env.Namespace, "--kubeconfig", s.env.Sandbox.Kubeconfig()})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("sluice explain node %s --timeline: %v\n%s", s.node, err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "no longer exists") || !strings.Contains(errOut.String(), "timeline: "+page) {
		t.Errorf("explain said %q; want that the node is gone and where its timeline went", errOut.String())
	}
	html, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(html), `"node":"`+s.node+`"`) || !strings.Contains(string(html), "preempt-tl") {
		t.Errorf("the page (%v) does not hold the node's lane and the event", err)
	}
}

// TestTimelinesAreReplacedAndPrunedByAge: a node's next drain replaces its
// timeline, and the pruning deletes only those past the retention.
func TestTimelinesAreReplacedAndPrunedByAge(t *testing.T) {
	env := sandboxtest.New(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	store := timeline.NewStore(env.Client, env.Namespace, time.Hour, clk, nil)
	ctx := t.Context()
	save := func(node, title string) {
		t.Helper()
		if err := store.Save(ctx, node, "Expired", timeline.Timeline{Title: title, Lanes: []timeline.Lane{{Node: node}}}); err != nil {
			t.Fatal(err)
		}
	}
	save("old", "first drain of old")
	clk.Step(40 * time.Minute)
	save("old", "second drain of old")
	save("gone", "drain of gone")
	clk.Step(30 * time.Minute) // old and gone ended 30 min ago
	save("new", "drain of new")

	k, err := timeline.Load(ctx, env.Client, env.Namespace, "old")
	if err != nil || k.Timeline.Title != "second drain of old" || k.Reason != "Expired" || !k.Ended.Equal(clk.Now().Add(-30*time.Minute)) {
		t.Fatalf("old: %+v, %v; want its second drain, ended 30 min ago", k, err)
	}
	if n, err := store.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) within the retention; want none", n, err)
	}
	clk.Step(31 * time.Minute) // old and gone: 61 min; new: 31 min
	if n, err := store.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v); want old and gone", n, err)
	}
	for _, node := range []string{"old", "gone"} {
		if _, err := timeline.Load(ctx, env.Client, env.Namespace, node); !errors.Is(err, timeline.ErrNotFound) {
			t.Errorf("%s after pruning: %v; want not found", node, err)
		}
	}
	if _, err := timeline.Load(ctx, env.Client, env.Namespace, "new"); err != nil {
		t.Errorf("new after pruning: %v; want kept", err)
	}
}
