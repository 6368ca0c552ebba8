package timeline

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// A pod refused for an hour is two steps, its first refusal and its latest,
// and the picture still says when it was first held and why it was last.
func TestRecorderKeepsTheFirstAndLatestRefusalOfAPod(t *testing.T) {
	r := &Recorder{}
	r.Observe(drain.Progress{Time: at(0), Node: "a", Kind: drain.ProgressNodeStarted})
	for i := range 720 {
		reason, msg := drain.ReasonPDBWaitingForPods, fmt.Sprintf("web allows 0 (try %d)", i)
		if i == 719 {
			reason = drain.ReasonPDBDeadlock
		}
		r.Observe(drain.Progress{Time: at(float64(1 + 5*i)), Node: "a", Kind: drain.ProgressBlocked, Pod: "ns/web-1", Reason: reason, Message: msg, PDB: "web"})
		r.Observe(drain.Progress{Time: at(float64(2 + 5*i)), Node: "a", Kind: drain.ProgressBlocked, Pod: "ns/web-2", Reason: drain.ReasonPDBWaitingForPods, PDB: "web"})
	}
	// The same pod name on another node is another pod.
	r.Observe(drain.Progress{Time: at(3600), Node: "b", Kind: drain.ProgressBlocked, Pod: "ns/web-1", Reason: drain.ReasonPDBWaitingForPods})
	r.Observe(drain.Progress{Time: at(3601), Node: "a", Kind: drain.ProgressEvicting, Pod: "ns/web-1", PDB: "web"})
	r.Observe(drain.Progress{Time: at(3605), Node: "a", Kind: drain.ProgressGone, Pod: "ns/web-1"})

	steps := r.Steps()
	if len(steps) != 1+2+2+1+2 {
		t.Fatalf("%d steps kept, want 8 (a start, two refusals per pod and node, the eviction, gone)", len(steps))
	}
	tl := FromDrain("d", steps, &drain.Report{StartedAt: t0, FinishedAt: at(3606)})
	var web1 *Bar
	for i, l := range tl.Lanes {
		for j, b := range l.Pods {
			if l.Node == "a" && b.Pod == "ns/web-1" {
				web1 = &tl.Lanes[i].Pods[j]
			}
		}
	}
	if web1 == nil {
		t.Fatalf("no bar for ns/web-1 on a: %+v", tl.Lanes)
	}
	if *web1.Blocked != 1 || web1.Reason != string(drain.ReasonPDBDeadlock) || web1.Message != "web allows 0 (try 719)" || *web1.Asked != 3601 || *web1.Gone != 3605 {
		t.Errorf("web-1: blocked %v reason %s %q asked %v gone %v; want first refused at 1 s, last reason PDBDeadlock (try 719), asked at 3601 s, gone at 3605 s",
			*web1.Blocked, web1.Reason, web1.Message, *web1.Asked, *web1.Gone)
	}
	if tl.Seconds != 3606 {
		t.Errorf("timeline spans %v s, want 3606", tl.Seconds)
	}
}
