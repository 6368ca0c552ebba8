package nodepool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/alerts"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// alertsRecheck is how long one reading of a pool's Prometheus alerts is
// trusted, and how often a reboot they hold is looked at again.
const alertsRecheck = 30 * time.Second

// alertReading is the last answer of a pool's Prometheus server.
type alertReading struct {
	// of is the settings it was read with: an edit of the pool's
	// prometheus settings reads again at once.
	of    v1alpha1.PrometheusAlerts
	at    time.Time
	names []string
	err   error
}

// rebootRequired is the RebootRequired method's pass: the members whose OS
// asked for a reboot (the agent's sentinel), longest waiting first, are
// drained and rebooted in place (replaced where the provider cannot reboot),
// within the budgets for RebootRequired and what the earlier methods left,
// inside the pool's reboot windows, unless protected (do-not-disrupt), a
// blocking pod runs on the node, or Prometheus has alerts that block.
func (c *Controller) rebootRequired(ctx context.Context, pool *v1alpha1.NodePool, v *view, l *ledger, now time.Time) (time.Duration, error) {
	waiting := disruption.RebootWaiting(v.Nodes, v.Replacements, now)
	oldest := time.Duration(0)
	if len(waiting) > 0 {
		oldest = now.Sub(waiting[0].Since)
	}
	c.opts.Metrics.rebootWaiting(pool.Name, oldest)
	spec := pool.Spec.Reboot
	if spec == nil || len(waiting) == 0 {
		return 0, nil
	}
	open, next, err := rebootWindowOpen(spec, now)
	if err != nil {
		return 0, err
	}
	if !open {
		return next, nil
	}
	// A plan (sluice plan, run by a person) does not reach the cluster's
	// Prometheus from where it runs: it says what it would do if no alert
	// blocks.
	if why := c.blockingAlerts(ctx, pool, now); why != "" && c.planned == nil {
		for _, w := range waiting {
			c.holdReboot(w.Node, why)
		}
		return alertsRecheck, nil
	}
	var (
		wait time.Duration
		errs []error
	)
	for _, w := range waiting {
		n := w.Node
		ok, until, err := c.eligible(pool, v, n, now)
		wait = sooner(wait, until)
		errs = appendErr(errs, err)
		if !ok {
			continue
		}
		if why, err := c.blockingPod(spec, v, n); err != nil || why != "" {
			errs = appendErr(errs, err)
			if why != "" {
				c.holdReboot(n, why)
				wait = sooner(wait, alertsRecheck)
			}
			continue
		}
		a, err := v.AllowedAfter(v1alpha1.ReasonRebootRequired, l.disrupting-v.Disrupting, now)
		if err != nil {
			return wait, err
		}
		if a.Nodes < 1 {
			break
		}
		why := "its OS asked for a reboot at " + w.Since.UTC().Format(time.RFC3339)
		replaced, err := c.rebootOne(ctx, pool, v, l, n, why, now)
		if errors.Is(err, errNoRoom) {
			l.halted = true
			break
		}
		stop, skip, err := chosenOutcome(err)
		errs = appendErr(errs, err)
		if stop {
			l.halted = true
			break
		}
		if skip {
			continue
		}
		v.Unseen = append(v.Unseen, n.Name)
		l.disrupting++
		if replaced {
			l.pending++
		}
		wait = sooner(wait, launchingRecheck)
		c.mu.Lock()
		delete(c.rebootHeld, n.Name)
		c.mu.Unlock()
	}
	return wait, errors.Join(errs...)
}

// errNoRoom: a replacement would pass the pool's limits.
var errNoRoom = errors.New("no room in the pool's limits")

// rebootOne starts the node's reboot in place, or, where the provider cannot
// reboot, its replacement (a fresh node runs the patched image) within the
// pool's limits (errNoRoom when they leave none). replaced says which.
func (c *Controller) rebootOne(ctx context.Context, pool *v1alpha1.NodePool, v *view, l *ledger, n *corev1.Node, why string, now time.Time) (bool, error) {
	if c.machines.CanReboot(pool) {
		return false, c.startReboot(ctx, pool, n, v1alpha1.ReasonRebootRequired, why, now)
	}
	if over := overPoolLimits(pool, v, n, l.pending); over != "" {
		c.event(pool, corev1.EventTypeNormal, "LimitReached", fmt.Sprintf("sluice: RebootRequired nodes wait to be replaced: %s", over))
		return true, errNoRoom
	}
	return true, c.choose(ctx, pool, disruption.Candidate{Node: n, Reason: v1alpha1.ReasonRebootRequired,
		Why: why + "; the provider cannot reboot a machine in place, so it is replaced"}, now)
}

// rebootWindowOpen says whether a reboot may start now, and otherwise how
// long until the next window opens (zero when none will).
func rebootWindowOpen(spec *v1alpha1.RebootSpec, now time.Time) (bool, time.Duration, error) {
	open, at, err := disruption.RebootWindowOpen(spec, now)
	if err != nil || open || at.IsZero() {
		return open, 0, err
	}
	return false, at.Sub(now) + time.Second, nil
}

// blockingPod names the pod on the node that holds its reboot
// (disruption.BlockingPod), "" when none does.
func (c *Controller) blockingPod(spec *v1alpha1.RebootSpec, v *view, n *corev1.Node) (string, error) {
	if len(spec.BlockingPodSelectors) == 0 {
		return "", nil
	}
	pods, err := v.podsOn(n.Name)
	if err != nil {
		return "", err
	}
	return disruption.BlockingPod(spec, pods)
}

// blockingAlerts says why the pool's Prometheus holds its reboots, "" when
// it does not: alerts that block, or a server that did not answer (which
// holds them too: not knowing is not all clear).
func (c *Controller) blockingAlerts(ctx context.Context, pool *v1alpha1.NodePool, now time.Time) string {
	p := pool.Spec.Reboot.Prometheus
	if p == nil || c.planned != nil {
		return ""
	}
	c.mu.Lock()
	r, ok := c.alerts[pool.Name]
	c.mu.Unlock()
	if !ok || r.of != *p || now.Sub(r.at) >= alertsRecheck {
		r = alertReading{of: *p, at: now}
		checker := &alerts.Checker{URL: p.URL, MatchOnly: p.AlertFilterMatchOnly, FiringOnly: p.FiringOnly}
		if p.AlertFilterRegexp != "" {
			re, err := regexp.Compile(p.AlertFilterRegexp)
			if err != nil {
				return "spec.reboot.prometheus.alertFilterRegexp does not compile: " + err.Error()
			}
			checker.Filter = re
		}
		r.names, r.err = checker.Blocking(ctx)
		c.mu.Lock()
		c.alerts[pool.Name] = r
		c.mu.Unlock()
	}
	switch {
	case r.err != nil:
		return "Prometheus did not answer, so its alerts cannot be known: " + r.err.Error()
	case len(r.names) > 0:
		return "Prometheus at " + p.URL + " has alerts that block reboots: " + strings.Join(r.names, ", ")
	}
	return ""
}

// holdReboot says on the node why its reboot waits, once for each reason
// (a pass every few seconds would repeat it).
func (c *Controller) holdReboot(n *corev1.Node, why string) {
	c.mu.Lock()
	said := c.rebootHeld[n.Name] == why
	c.rebootHeld[n.Name] = why
	c.mu.Unlock()
	if !said {
		c.event(n, corev1.EventTypeNormal, "RebootHeld", "sluice: the node's reboot waits: "+why)
	}
}
