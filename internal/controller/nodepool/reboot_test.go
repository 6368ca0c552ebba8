package nodepool_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/alerts/promtest"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Nodes whose OS asked for a reboot are rebooted in place: not while the
// pool's reboot window is closed, not while Prometheus has an alert that
// blocks, never the node a blocking pod runs on, and, once free to go, as
// many at once as the budget for RebootRequired allows (2 of 6, not kured's
// one at a time). Each comes back on a new boot, uncordoned, its sentinel
// gone.
func TestRebootsKeepToWindowsBudgetsAndBlockers(t *testing.T) {
	prom := promtest.New(t)
	s := newScene(t, 6, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "2", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonRebootRequired}}}
		p.Spec.Reboot = &v1alpha1.RebootSpec{
			// Closed now: it opens on New Year's Day only.
			Windows:              []v1alpha1.RebootWindow{{Schedule: "0 0 1 1 *", Duration: metav1.Duration{Duration: time.Hour}}},
			BlockingPodSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"reboot-blocker": "true"}}},
			Prometheus:           &v1alpha1.PrometheusAlerts{URL: prom.URL},
		}
	})
	nodes := s.waitNodes(t, 6, time.Minute)
	s.workload(t, 6, "4")
	held := nodes[5]
	s.env.Create(t, fixture.Pod(s.env.Namespace, "backup", fixture.OnNode(held), fixture.Label("reboot-blocker", "true")))
	asked := time.Now().UTC().Format(time.RFC3339)
	for _, n := range nodes {
		s.patchAnnotations(t, n, map[string]any{contract.AnnotationRebootRequired: asked})
	}

	// Watch every node state from now on: how many are being rebooted at
	// once, and which ever were.
	var (
		mu       sync.Mutex
		now      = map[string]bool{}
		most     int
		rebooted = map[string]bool{}
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.eachNodeChange(ctx, t, func(n *corev1.Node) {
		r, err := disruption.RecordOf(n)
		mu.Lock()
		defer mu.Unlock()
		now[n.Name] = err == nil && r != nil && r.Reason == v1alpha1.ReasonRebootRequired
		if now[n.Name] {
			rebooted[n.Name] = true
		}
		count := 0
		for _, b := range now {
			if b {
				count++
			}
		}
		most = max(most, count)
	})
	none := func(context.Context) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(rebooted) == 0
	}
	s.start(t)
	// No alert fires yet: only the window holds the reboots.
	s.holdsFor(t, 15*time.Second, "no reboot while the window is closed", none)

	prom.SetAlerts(promtest.Alert{Labels: map[string]string{"alertname": "DatabaseReplicationLag"}, State: promtest.StateFiring, ActiveAt: time.Now()})
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Reboot.Windows = nil })
	s.holdsFor(t, 15*time.Second, "no reboot while an alert blocks", none)
	if prom.Requests() == 0 {
		t.Fatal("the controller never asked Prometheus: the alert held nothing")
	}
	events := s.nodeEvents(t, nodes[0])
	if !slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "RebootHeld: ") && strings.Contains(e, "DatabaseReplicationLag")
	}) {
		t.Errorf("%s's events %v: want RebootHeld naming the alert", nodes[0], events)
	}

	prom.SetAlerts()
	s.env.WaitFor(t, 4*time.Minute, "five nodes rebooted and back", func(ctx context.Context) (bool, error) {
		list, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		back := 0
		for _, n := range list {
			_, asks := n.Annotations[contract.AnnotationRebootRequired]
			_, recorded := n.Annotations[contract.AnnotationDisruption]
			if n.Name != held && !asks && !recorded && !n.Spec.Unschedulable && ready(n) && n.Status.NodeInfo.BootID != "" {
				back++
			}
		}
		return back == 5, nil
	})
	// Back means back: no pass that read a step the controller had already
	// left drains (and cordons) a node again.
	s.holdsFor(t, 10*time.Second, "every rebooted node stays in service", func(ctx context.Context) bool {
		list, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range list {
			if n.Name != held && (n.Spec.Unschedulable || n.Annotations[contract.AnnotationDisruption] != "") {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if rebooted[held] {
		t.Errorf("%s was rebooted with a blocking pod on it", held)
	}
	if most > 2 {
		t.Errorf("%d nodes were rebooting at once; the budget for RebootRequired allows 2", most)
	}
	if most < 2 {
		t.Errorf("at most %d node rebooting at once: the budget allows 2 (one at a time is kured's pace, not ours)", most)
	}
	if !slices.ContainsFunc(s.nodeEvents(t, held), func(e string) bool { return strings.HasPrefix(e, "RebootHeld: ") && strings.Contains(e, "backup") }) {
		t.Errorf("%s's events %v: want RebootHeld naming the blocking pod", held, s.nodeEvents(t, held))
	}
}
