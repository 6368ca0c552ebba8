package disruption_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestExpiry(t *testing.T) {
	after := func(d string) *v1alpha1.DisruptionSpec { return &v1alpha1.DisruptionSpec{ExpireAfter: d} }
	for _, tc := range []struct {
		name        string
		spec        *v1alpha1.DisruptionSpec
		node        []nodeOpt
		now         time.Time
		at          time.Time
		expired, ok bool
	}{
		{"no disruption settings", nil, nil, t0.Add(1000 * time.Hour), time.Time{}, false, false},
		{"expireAfter unset", after(""), nil, t0.Add(1000 * time.Hour), time.Time{}, false, false},
		{"Never", after(v1alpha1.Never), nil, t0.Add(1000 * time.Hour), time.Time{}, false, false},
		{"unreadable", after("a month"), nil, t0.Add(1000 * time.Hour), time.Time{}, false, false},
		{"before", after("720h"), nil, t0.Add(719 * time.Hour), t0.Add(720 * time.Hour), false, true},
		{"at the instant", after("720h"), nil, t0.Add(720 * time.Hour), t0.Add(720 * time.Hour), true, true},
		{"after", after("720h"), nil, t0.Add(800 * time.Hour), t0.Add(720 * time.Hour), true, true},
		{"counted from the node's creation", after("1h30m"), []nodeOpt{created(t0.Add(-time.Hour))}, t0, t0.Add(30 * time.Minute), false, true},
		{"no creation time", after("1h"), []nodeOpt{created(time.Time{})}, t0, time.Time{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, expired, ok := disruption.Expiry(node("n1", tc.node...), tc.spec, tc.now)
			if !at.Equal(tc.at) || expired != tc.expired || ok != tc.ok {
				t.Errorf("Expiry = %v, %v, %v; want %v, %v, %v", at, expired, ok, tc.at, tc.expired, tc.ok)
			}
		})
	}
}
