package budget_test

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func ExampleAllowed() {
	schedule, zone := "0 9 * * mon-fri", "Europe/Berlin"
	budgets := []v1alpha1.Budget{
		{Nodes: "20%"},
		// No drift replacements during office hours in Berlin.
		{Nodes: "0", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted},
			Schedule: &schedule, TimeZone: &zone, Duration: &metav1.Duration{Duration: 8 * time.Hour}},
	}
	if err := budget.Validate(budgets); err != nil {
		fmt.Println(err)
		return
	}
	monday := time.Date(2026, time.June, 1, 10, 0, 0, 0, time.UTC) // noon in Berlin
	for _, r := range []v1alpha1.DisruptionReason{v1alpha1.ReasonExpired, v1alpha1.ReasonDrifted} {
		a, err := budget.Allowed(budgets, 12, 1, r, monday)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d more (%v)\n", r, a.Nodes, a.Budget)
	}
	next, _, _ := budget.NextChange(budgets, monday)
	fmt.Println("until", next.Format(time.RFC3339))
	// Output:
	// Expired: 2 more (nodes 20%)
	// Drifted: 0 more (nodes 0 for [Drifted] during "0 9 * * mon-fri" for 8h0m0s (Europe/Berlin))
	// until 2026-06-01T15:00:00Z
}
