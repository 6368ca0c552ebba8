package agent

// TestMetadataFaultsNeverMoveTheNode runs against the sandbox's API server:
// the agents write their reports through it, and a watch shows every write,
// so a report that drops an event for a single write cannot slip between two
// reads.

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// faultPhase is how long each fault lasts; the faults cycle twice.
const faultPhase = 2500 * time.Millisecond

// TestMetadataFaultsNeverMoveTheNode gives each of three nodes an agent
// reading one cloud's emulator, which announces events sluice drains for,
// then cycles the emulators through every fault for 20 s: slow answers,
// server errors, truncated answers, events that flap. The node's report
// must hold the announced events, no more and no fewer, in every write the
// API server sees: a bad answer never ends an event (the controller would
// uncordon the node) nor makes one up (it would drain it).
func TestMetadataFaultsNeverMoveTheNode(t *testing.T) {
	env := sandboxtest.New(t)
	pool := fixture.AKSPool(sandboxtest.UniqueName("imds"), len(clouds))
	nodes := env.CreateNodes(t, pool)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The agents write with the test's own client: their privilege is
	// TestLeastPrivilege's business, their reports this test's.
	machines := map[string]machine{}
	for i, cloud := range clouds {
		m := cloud.start(t)
		node := nodes[i].Name
		machines[node] = m
		a := New(env.Client, slog.New(slog.DiscardHandler).With("cloud", cloud.source),
			Config{Node: node, Source: cloud.source, Watcher: m.watcher})
		actx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.Run(actx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("agent of %s: %v", node, err)
			}
		})
	}

	// Every node reports its events once before any fault.
	want := map[string]string{}
	env.WaitFor(t, 30*time.Second, "every node's first report", func(ctx context.Context) (bool, error) {
		for node, m := range machines {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			r, ok, err := maintenance.ReportOf(n)
			if !ok || err != nil || len(r.Events) != m.live {
				return false, nil
			}
			want[node] = ids(r.Events)
		}
		return true, nil
	})

	list, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(pool.Selector()).String()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := env.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(pool.Selector()).String(), ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := make(chan int, 1)
	go func() { writes <- checkReports(t, w, want) }()

	for round := range 2 {
		for _, f := range faultCases {
			t.Logf("round %d: %s", round+1, f.name)
			for _, m := range machines {
				m.server.SetFault(f.fault)
			}
			select {
			case <-ctx.Done():
				t.Fatal("out of time")
			case <-time.After(faultPhase):
			}
		}
	}
	for _, m := range machines {
		m.server.SetFault(maintenance.Fault{})
	}
	// A slow answer still in flight ends within its delay; give each agent
	// time to read well and write again if it would.
	time.Sleep(2 * slowAnswer)
	w.Stop()
	if n := <-writes; n == 0 {
		t.Logf("no report was written during the faults (every one equal to the last)")
	}
	for node := range machines {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, err := maintenance.ReportOf(n); err != nil || ids(r.Events) != want[node] {
			t.Errorf("node %s after the faults: report %+v, %v; want events %s", node, r, err, want[node])
		}
	}
}

// checkReports checks every write the watch shows until it stops, and
// counts them.
func checkReports(t *testing.T, w watch.Interface, want map[string]string) int {
	writes := 0
	for ev := range w.ResultChan() {
		n, ok := ev.Object.(*corev1.Node)
		if !ok || want[n.Name] == "" {
			continue
		}
		writes++
		r, found, err := maintenance.ReportOf(n)
		if !found || err != nil || ids(r.Events) != want[n.Name] {
			t.Errorf("node %s written with report %+v (%v); want events %s", n.Name, r, err, want[n.Name])
		}
	}
	return writes
}
