package drain

import (
	"fmt"
	"strconv"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// remedy names a budget's rule and the change that lets it allow one
// eviction, for a budget expecting `expected` pods that allows none.
//
// The numbers come from the disruption controller's own arithmetic
// (k8s.io/kubernetes pkg/controller/disruption, getExpectedPodCount): a
// percentage is scaled by the expected pods and rounded up, minAvailable is
// the desired healthy count, maxUnavailable is subtracted from the expected
// pods, and an eviction is allowed when healthy pods exceed desired ones.
// Because percentages round up, "one more replica" is not always enough:
// minAvailable 90% needs 10 replicas before it lets one go.
func remedy(spec policyv1.PodDisruptionBudgetSpec, expected int32, budget, workload string) (rule, fix string) {
	switch {
	case spec.MaxUnavailable != nil:
		rule = "maxUnavailable " + spec.MaxUnavailable.String()
		fix = fmt.Sprintf("raise maxUnavailable on PodDisruptionBudget %s to at least 1", budget)
		if _, ok := percent(*spec.MaxUnavailable); ok {
			fix += ", or to any percentage above 0% (it rounds up to a whole pod)"
		}
		return rule, fix
	case spec.MinAvailable == nil:
		return "no minAvailable or maxUnavailable", fmt.Sprintf("give PodDisruptionBudget %s a maxUnavailable of at least 1", budget)
	}
	rule = "minAvailable " + spec.MinAvailable.String()
	pct, isPct := percent(*spec.MinAvailable)
	if !isPct {
		n := spec.MinAvailable.IntValue()
		return rule, fmt.Sprintf("scale %s to %d, or lower minAvailable on PodDisruptionBudget %s to %d", workload, n+1, budget, max(expected-1, 0))
	}
	scaleTo, canScale := replicasAllowingOne(*spec.MinAvailable)
	lowerTo, canLower := percentAllowingOne(expected)
	lower := fmt.Sprintf("lower minAvailable on PodDisruptionBudget %s to %d%%", budget, lowerTo)
	noPercent := fmt.Sprintf("with %d pod no minAvailable percentage above 0%% allows an eviction", expected)
	noScale := fmt.Sprintf("at %d%% no number of replicas allows an eviction", pct)
	switch {
	case canScale && canLower:
		return rule, fmt.Sprintf("scale %s to %d, or %s", workload, scaleTo, lower)
	case canScale:
		return rule, fmt.Sprintf("scale %s to %d (%s)", workload, scaleTo, noPercent)
	case canLower:
		return rule, fmt.Sprintf("%s (%s)", lower, noScale)
	}
	// 100% of a single pod: only two changes together free it.
	both, _ := percentAllowingOne(2)
	return rule, fmt.Sprintf("%s, and with %d pod no percentage above 0%% does: scale %s to 2 and lower minAvailable on PodDisruptionBudget %s to %d%%, or use maxUnavailable 1 instead",
		noScale, expected, workload, budget, both)
}

// replicasAllowingOne is the fewest replicas at which a percentage
// minAvailable allows an eviction: the smallest R with R - ceil(pct×R) >= 1.
// At 100% there is none.
func replicasAllowingOne(minAvailable intstr.IntOrString) (int32, bool) {
	// Below 100%, R×(100-pct)/100 >= 1 holds by R = 100, and adding a
	// replica raises the rounded-up minimum by at most one, so the first R
	// found is the answer.
	for r := 1; r <= 101; r++ {
		desired, err := intstr.GetScaledValueFromIntOrPercent(&minAvailable, r, true)
		if err != nil {
			return 0, false
		}
		if r-desired >= 1 {
			return int32(r), true
		}
	}
	return 0, false
}

// percentAllowingOne is the largest minAvailable percentage that allows an
// eviction with `expected` pods: ceil(p×E/100) <= E-1 holds up to
// p = floor((E-1)×100/E). With one pod only 0% does, which is no budget.
func percentAllowingOne(expected int32) (int32, bool) {
	if expected < 2 {
		return 0, false
	}
	// floor((E-1)×100/E) = 100 - ceil(100/E) = 99 - floor(99/E), which,
	// unlike (E-1)×100, cannot overflow int32 however many pods there are.
	return 99 - 99/expected, true
}

// percent reads a "NN%" value.
func percent(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || !strings.HasSuffix(v.StrVal, "%") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n, err == nil
}
