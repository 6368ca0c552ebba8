package cli

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// The default report names only the pods worth a look; -o wide lists every
// pod with its grace period and how long it took to go.
func TestDrainReportWide(t *testing.T) {
	r := &drain.Report{Nodes: []drain.NodeReport{{Name: "n1", Outcome: drain.NodeBlocked, Seconds: 4.2, Pods: []drain.PodReport{
		{Namespace: "shop", Name: "web-1", Outcome: drain.PodEvicted, GracePeriodSeconds: ptr.To[int64](30), GoneAfterSeconds: ptr.To(3.5)},
		{Namespace: "shop", Name: "db-0", Outcome: drain.PodBlocked, Reason: drain.ReasonPDBBlocked, PDB: "db", Message: "the budget allows 0 disruptions"},
	}}}}
	var text, wide bytes.Buffer
	writeReport(&text, r, false)
	writeReport(&wide, r, true)
	if strings.Contains(text.String(), "shop/web-1") || !strings.Contains(text.String(), "shop/db-0") {
		t.Errorf("text lists the evicted pod or lacks the blocked one:\n%s", text.String())
	}
	for _, want := range []string{"GRACE  GONE-AFTER", "shop/web-1  n1    Evicted  -           -    30s    3.5s", "shop/db-0   n1    Blocked  PDBBlocked  db   -      -"} {
		if !strings.Contains(wide.String(), want) {
			t.Errorf("-o wide lacks %q:\n%s", want, wide.String())
		}
	}
}
