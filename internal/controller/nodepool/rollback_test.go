package nodepool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// After a rollback, this controller meets a record a newer sluice wrote: it
// leaves that node alone (the record is neither rewritten nor acted on, a
// deletion of the node waits), says why on the node, and still counts the
// node against the budget, so the drift it starts elsewhere waits for it.
// Once the record goes, the node is this controller's again.
func TestARecordFromANewerSluiceIsLeftAlone(t *testing.T) {
	s := newScene(t, 3, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "1"}}
	})
	s.workload(t, 3, "1")
	nodes := s.waitNodes(t, 3, time.Minute)
	held := nodes[0]
	newer := fmt.Sprintf(`{"v":%d,"reason":"Drifted","phase":"Launching","since":%q}`,
		disruption.RecordVersion+1, time.Now().UTC().Format(time.RFC3339))
	s.annotateNode(t, held, contract.AnnotationDisruption, newer)
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })

	said := func(node string) bool {
		return slices.ContainsFunc(s.nodeEvents(t, node), func(e string) bool {
			return strings.HasPrefix(e, disruption.EventRecordFromNewerVersion+": ") && strings.Contains(e, "roll sluice forward")
		})
	}
	s.env.WaitFor(t, 30*time.Second, "the reason on "+held, func(context.Context) (bool, error) { return said(held), nil })
	untouched := func(ctx context.Context) bool {
		list, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range list {
			_, marked := n.Annotations[contract.AnnotationDisruption]
			switch {
			case n.Name == held && n.Annotations[contract.AnnotationDisruption] != newer:
				t.Logf("%s's record became %q", held, n.Annotations[contract.AnnotationDisruption])
				return false
			case n.Name != held && (marked || n.Spec.Unschedulable):
				t.Logf("%s disrupted while the budget of one was %s's", n.Name, held)
				return false
			}
		}
		return true
	}
	s.holdsFor(t, 5*time.Second, "the record kept and the budget spent on "+held, untouched)

	// A person deletes the node, with budget to spare: the drain waits for
	// the newer sluice too, and its record is not rewritten.
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "10"}} })
	if err := s.env.Client.CoreV1().Nodes().Delete(t.Context(), held, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.holdsFor(t, 5*time.Second, held+" kept, not drained, its record as it was", func(ctx context.Context) bool {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: held}, n); err != nil {
			t.Logf("%s: %v", held, err)
			return false
		}
		return n.Annotations[contract.AnnotationDisruption] == newer && !n.Spec.Unschedulable
	})

	// The record removed (kubectl annotate node N sluice.dev/disruption-):
	// the node is drained and goes, and the drift goes on.
	if _, err := s.env.Client.CoreV1().Nodes().Patch(t.Context(), held, "application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, contract.AnnotationDisruption)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 90*time.Second, held+" gone", func(ctx context.Context) (bool, error) {
		err := s.kube.Get(ctx, client.ObjectKey{Name: held}, &corev1.Node{})
		return err != nil && client.IgnoreNotFound(err) == nil, nil
	})
}
