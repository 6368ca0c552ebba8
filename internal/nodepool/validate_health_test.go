package nodepool

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// What the CRD cannot refuse in spec.repair and spec.reboot makes the pool
// invalid, naming the field, instead of stopping its reboots silently.
func TestHealthSettingsTheAPIServerCannotJudge(t *testing.T) {
	zone := "Mars/Olympus_Mons"
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.NodePool)
		want string
	}{
		{"a window in a time zone that does not exist", func(p *v1alpha1.NodePool) {
			p.Spec.Reboot = &v1alpha1.RebootSpec{Windows: []v1alpha1.RebootWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: &zone}}}
		}, "spec.reboot.windows"},
		{"a schedule that does not parse", func(p *v1alpha1.NodePool) {
			p.Spec.Reboot = &v1alpha1.RebootSpec{Windows: []v1alpha1.RebootWindow{{Schedule: "0 25 * * *", Duration: metav1.Duration{Duration: time.Hour}}}}
		}, "spec.reboot.windows"},
		{"a selector that does not parse", func(p *v1alpha1.NodePool) {
			p.Spec.Reboot = &v1alpha1.RebootSpec{BlockingPodSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}}
		}, "spec.reboot.blockingPodSelectors[0]"},
		{"an alert filter that does not compile", func(p *v1alpha1.NodePool) {
			p.Spec.Reboot = &v1alpha1.RebootSpec{Prometheus: &v1alpha1.PrometheusAlerts{URL: "http://prometheus:9090", AlertFilterRegexp: "(Watchdog"}}
		}, "spec.reboot.prometheus.alertFilterRegexp"},
		{"a Prometheus URL with credentials", func(p *v1alpha1.NodePool) {
			p.Spec.Reboot = &v1alpha1.RebootSpec{Prometheus: &v1alpha1.PrometheusAlerts{URL: "http://admin:secret@prometheus:9090"}}
		}, "spec.reboot.prometheus.url"},
		{"a breaker that is not a number", func(p *v1alpha1.NodePool) {
			p.Spec.Repair = &v1alpha1.RepairSpec{MaxUnhealthy: "many"}
		}, "spec.repair.maxUnhealthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.NodePoolSpec{
				NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}},
				Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok}}}
			if p := Validate(pool, 3); p != nil {
				t.Fatalf("the pool before the edit: %v", p)
			}
			tc.edit(pool)
			p := Validate(pool, 3)
			if p == nil || p.Reason != ReasonInvalidHealth || !strings.Contains(p.Message, tc.want) {
				t.Fatalf("problem %+v: want %s naming %s", p, ReasonInvalidHealth, tc.want)
			}
			if strings.Contains(p.Message, "secret") {
				t.Fatalf("problem %q shows the URL's password", p.Message)
			}
		})
	}
}
