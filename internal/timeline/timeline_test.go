package timeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/drain"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// A drain's steps become a lane per node and a bar per pod: refused, then
// asked, then gone; deleted at the deadline; never asked at all.
func TestFromDrainDrawsEveryPodOfEveryNode(t *testing.T) {
	deadline := at(30)
	steps := []drain.Progress{
		{Time: at(0), Node: "b", Kind: drain.ProgressNodeStarted, Pods: 1},
		{Time: at(0.1), Node: "a", Kind: drain.ProgressNodeStarted, Pods: 3},
		{Time: at(0.2), Node: "a", Kind: drain.ProgressCordoned},
		{Time: at(0.5), Node: "a", Kind: drain.ProgressEvicting, Pod: "ns/web-1", PDB: "web"},
		{Time: at(0.6), Node: "a", Kind: drain.ProgressBlocked, Pod: "ns/web-2", Reason: drain.ReasonPDBWaitingForPods, Message: "web allows 0", PDB: "web"},
		{Time: at(3), Node: "a", Kind: drain.ProgressGone, Pod: "ns/web-1"},
		{Time: at(4), Node: "a", Kind: drain.ProgressEvicting, Pod: "ns/web-2", PDB: "web"},
		{Time: at(6), Node: "a", Kind: drain.ProgressGone, Pod: "ns/web-2"},
		{Time: at(26), Node: "b", Kind: drain.ProgressForced, Pod: "ns/db-0", Reason: drain.ReasonDeadlineForced, Message: "deleted despite"},
		{Time: at(28), Node: "b", Kind: drain.ProgressGone, Pod: "ns/db-0"},
		{Time: at(28.5), Node: "b", Kind: drain.ProgressNodeFinished, Message: "Drained"},
		{Time: at(7), Node: "a", Kind: drain.ProgressNodeFinished, Message: "Drained"},
	}
	report := &drain.Report{StartedAt: t0, FinishedAt: at(29), Deadline: &deadline, Nodes: []drain.NodeReport{
		{Name: "a", Outcome: drain.NodeDrained, Pods: []drain.PodReport{
			{Namespace: "ns", Name: "web-1", Outcome: drain.PodEvicted},
			{Namespace: "ns", Name: "web-2", Outcome: drain.PodEvicted},
			{Namespace: "kube-system", Name: "agent", Outcome: drain.PodSkipped, Reason: drain.ReasonDaemonSetPod},
		}},
		{Name: "b", Outcome: drain.NodeDrained, Pods: []drain.PodReport{
			{Namespace: "ns", Name: "db-0", Outcome: drain.PodDeleted, Reason: drain.ReasonDeadlineForced},
		}},
	}}
	tl := FromDrain("drain", steps, report)
	if tl.Seconds != 29 || tl.Deadline == nil || *tl.Deadline != 30 || len(tl.Lanes) != 2 {
		t.Fatalf("timeline %+v: want 29 s, a deadline at 30 s and 2 lanes", tl)
	}
	a, b := tl.Lanes[0], tl.Lanes[1]
	if a.Node != "a" || b.Node != "b" || a.Outcome != "Drained" || a.Cordoned == nil || *a.Cordoned != 0.2 || a.Started != 0.1 {
		t.Fatalf("lanes %+v, %+v", a, b)
	}
	if len(a.Pods) != 3 {
		t.Fatalf("lane a has %d bars, want 3: %+v", len(a.Pods), a.Pods)
	}
	web1, web2, agent := a.Pods[0], a.Pods[1], a.Pods[2]
	if web1.Pod != "ns/web-1" || *web1.Asked != 0.5 || *web1.Gone != 3 || web1.Blocked != nil {
		t.Errorf("web-1: %+v", web1)
	}
	if web2.Pod != "ns/web-2" || *web2.Blocked != 0.6 || *web2.Asked != 4 || *web2.Gone != 6 || web2.Reason != string(drain.ReasonPDBWaitingForPods) || web2.PDB != "web" {
		t.Errorf("web-2: %+v", web2)
	}
	if agent.Pod != "kube-system/agent" || agent.Asked != nil || agent.Outcome != string(drain.PodSkipped) || agent.Reason != string(drain.ReasonDaemonSetPod) {
		t.Errorf("agent: %+v", agent)
	}
	if db := b.Pods[0]; !db.Forced || *db.Asked != 26 || *db.Gone != 28 || db.Reason != string(drain.ReasonDeadlineForced) {
		t.Errorf("db-0: %+v", db)
	}
}

// Names come from the cluster: a pod's name must not be able to end the
// page's script.
func TestWriteKeepsNamesInsideTheData(t *testing.T) {
	tl := Timeline{Title: "drain <b>", Start: t0.Format(time.RFC3339), Seconds: 1,
		Lanes: []Lane{{Node: "n", Pods: []Bar{{Pod: "ns/</script><script>alert(1)</script>"}}}}}
	var buf bytes.Buffer
	if err := Write(&buf, tl); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Count(page, "</script>") != 2 || strings.Contains(page, "<b>") {
		t.Fatalf("a name escaped its place:\n%s", page)
	}
	start := strings.Index(page, `<script type="application/json" id="timeline-data">`)
	rest := page[start:]
	data := rest[strings.Index(rest, ">")+1 : strings.Index(rest, "</script>")]
	var back Timeline
	if err := json.Unmarshal([]byte(data), &back); err != nil {
		t.Fatalf("the embedded data does not read back: %v\n%s", err, data)
	}
	if back.Lanes[0].Pods[0].Pod != tl.Lanes[0].Pods[0].Pod {
		t.Errorf("pod name came back as %q", back.Lanes[0].Pods[0].Pod)
	}
}
