package alerts_test

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/sluice-dev/sluice/internal/alerts"
	"github.com/sluice-dev/sluice/internal/alerts/promtest"
)

func ExampleChecker_Blocking() {
	prom := promtest.Start()
	defer prom.Close()
	since := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	prom.SetAlerts(
		promtest.Alert{Labels: map[string]string{"alertname": "RebootRequired"}, State: promtest.StateFiring, ActiveAt: since, Value: 1},
		promtest.Alert{Labels: map[string]string{"alertname": "etcdNoLeader"}, State: promtest.StatePending, ActiveAt: since, Value: 1},
	)

	// kured's advice: ignore the alert that says a reboot is due, or it
	// would hold itself forever.
	c := &alerts.Checker{URL: prom.URL, Filter: regexp.MustCompile("^RebootRequired$")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	names, err := c.Blocking(ctx)
	if err != nil {
		fmt.Println("hold the reboot:", err)
		return
	}
	fmt.Println("held by", names)

	prom.Unavailable()
	if _, err := c.Blocking(ctx); err != nil {
		fmt.Println("hold the reboot: Prometheus did not answer")
	}
	// Output:
	// held by [etcdNoLeader]
	// hold the reboot: Prometheus did not answer
}
