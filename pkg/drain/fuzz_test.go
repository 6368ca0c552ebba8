package drain

import (
	"strconv"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// FuzzRemedy asks for the fix of a PodDisruptionBudget that allows no
// eviction, whatever its minAvailable or maxUnavailable and however many
// pods it expects (the disruption controller's status, which a budget's
// author does not bound). Nothing may panic, and the numbers a fix names
// free a pod by the controller's own arithmetic: the percentage is the
// largest that allows an eviction with the pods expected, the replica
// count the fewest for the budget's percentage.
func FuzzRemedy(f *testing.F) {
	for _, seed := range []struct {
		minAvailable, maxUnavailable string
		expected                     int32
	}{
		{"3", "", 3}, {"90%", "", 3}, {"100%", "", 1}, {"50%", "", 2}, {"", "0", 4}, {"", "0%", 4}, {"", "", 2},
		{"0%", "", 0}, {"150%", "", 7}, {"-5%", "", 7}, {"%", "", 7}, {"2147483647", "", 2147483647}, {"99%", "", 1 << 30},
	} {
		f.Add(seed.minAvailable, seed.maxUnavailable, seed.expected)
	}
	allows := func(pct int, replicas int32) bool {
		v := intstr.FromString(strconv.Itoa(pct) + "%")
		desired, err := intstr.GetScaledValueFromIntOrPercent(&v, int(replicas), true)
		return err == nil && int(replicas)-desired >= 1
	}
	f.Fuzz(func(t *testing.T, minAvailable, maxUnavailable string, expected int32) {
		var spec policyv1.PodDisruptionBudgetSpec
		if minAvailable != "" {
			spec.MinAvailable = ptr.To(intstr.Parse(minAvailable))
		}
		if maxUnavailable != "" {
			spec.MaxUnavailable = ptr.To(intstr.Parse(maxUnavailable))
		}
		expected = max(expected, 0)
		if rule, fix := remedy(spec, expected, "web", "deployment web"); rule == "" || fix == "" {
			t.Fatalf("minAvailable %q, maxUnavailable %q, %d pods: rule %q, fix %q", minAvailable, maxUnavailable, expected, rule, fix)
		}
		if p, ok := percentAllowingOne(expected); ok != (expected > 1) || ok && (p < 0 || p >= 100 || !allows(int(p), expected) || allows(int(p)+1, expected)) {
			t.Fatalf("%d pods: lower to %d%% (%t), which is not the largest percentage that allows an eviction", expected, p, ok)
		}
		pct, isPct := percent(intstr.Parse(minAvailable))
		if !isPct || pct < 0 || pct > 100 {
			return // the API server refuses it
		}
		if r, ok := replicasAllowingOne(intstr.Parse(minAvailable)); ok != (pct < 100) || ok && (!allows(pct, r) || r > 1 && allows(pct, r-1)) {
			t.Fatalf("minAvailable %q: scale to %d (%t), which is not the fewest replicas that allow an eviction", minAvailable, r, ok)
		}
	})
}
