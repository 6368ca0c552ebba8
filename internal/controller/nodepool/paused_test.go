package nodepool

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// The controller stops a pool exactly when status and explain say it is
// paused: one meaning, an unreadable annotation included.
func TestPausedHasOneMeaning(t *testing.T) {
	paused := true
	for _, c := range []struct {
		annotation string
		spec       bool
		want       bool
	}{
		{"", false, false},
		{"false", false, false},
		{"true", false, true},
		{"yes", false, true}, // unreadable: protects, as the CLI says
		{"1h", false, true},
		{"", true, true},
	} {
		pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		if c.annotation != "" {
			pool.Annotations = map[string]string{contract.AnnotationDoNotDisrupt: c.annotation}
		}
		if c.spec {
			pool.Spec.Disruption = &v1alpha1.DisruptionSpec{Paused: paused}
		}
		if got := pausedBy(pool) != ""; got != c.want || disruption.PoolPaused(pool) != c.want {
			t.Errorf("annotation %q, spec paused %v: the controller pauses %v, status says %v; want %v",
				c.annotation, c.spec, got, disruption.PoolPaused(pool), c.want)
		}
	}
}
