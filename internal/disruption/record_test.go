package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// A record carries the version of the sluice that wrote it; one without a
// version (the first releases') reads as version 1; one from a newer sluice
// is refused as such, never half read.
func TestRecordVersions(t *testing.T) {
	since := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	node := func(raw string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{contract.AnnotationDisruption: raw}}}
	}
	written := disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: since}.String()
	for _, tc := range []struct {
		name, raw string
		newer     bool
		phase     disruption.Phase
	}{
		{name: "as this sluice writes it", raw: written, phase: disruption.PhaseLaunching},
		{name: "without a version", raw: `{"reason":"Drifted","phase":"Terminating","since":"2026-11-27T10:00:00Z"}`, phase: disruption.PhaseTerminating},
		{name: "a reboot's, version 2", raw: `{"v":2,"reason":"Unhealthy","phase":"Rebooting","since":"2026-11-27T10:00:00Z"}`, phase: disruption.PhaseRebooting},
		{name: "from a newer sluice", raw: `{"v":3,"reason":"Drifted","phase":"Launching","since":"2026-11-27T10:00:00Z"}`, newer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := disruption.RecordOf(node(tc.raw))
			if got := disruption.IsNewerRecord(err); got != tc.newer {
				t.Fatalf("RecordOf(%s): %v; newer %v, want %v", tc.raw, err, got, tc.newer)
			}
			if tc.newer {
				if r != nil {
					t.Errorf("a newer record read as %+v; want none", r)
				}
				return
			}
			if err != nil || r == nil || r.Phase != tc.phase || !r.Since.Equal(since) {
				t.Errorf("RecordOf(%s) = %+v, %v; want phase %s since %s", tc.raw, r, err, tc.phase, since)
			}
			if r != nil && r.Version > disruption.RecordVersion {
				t.Errorf("version %d read; this sluice writes %d", r.Version, disruption.RecordVersion)
			}
		})
	}
	// Only what an older sluice would misread is stamped with the newer
	// version: a rollback still finishes every other record.
	if r, _ := disruption.RecordOf(node(written)); r == nil || r.Version != 1 {
		t.Errorf("String() wrote %s; want a replacement's record stamped with version 1", written)
	}
	rebooting := disruption.Record{Reason: v1alpha1.ReasonUnhealthy, Phase: disruption.PhaseRebooting, Since: since}.String()
	if r, _ := disruption.RecordOf(node(rebooting)); r == nil || r.Version != 2 {
		t.Errorf("String() wrote %s; want a reboot's record stamped with version 2, which a version-1 sluice refuses", rebooting)
	}
}
