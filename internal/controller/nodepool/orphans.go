package nodepool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Orphans are machines a provider made for a pool that nothing accounts for
// any more: no Node is theirs and no record names them, long after they
// should have registered. A record lost between asking for a machine and
// writing its name down (a crash, an etcd restore, a person clearing
// annotations) leaves one, and without this pass it would run, and be
// billed, for ever.
const (
	// orphansPerPass bounds the deletions of one pass: a mistake in what
	// counts as accounted for deletes a few machines, not a pool.
	orphansPerPass = 3
	// orphanPassMin and orphanPassMax bound how often a pool's machines
	// are listed (the registration timeout, within these).
	orphanPassMin = 10 * time.Second
	orphanPassMax = 5 * time.Minute
)

// EventOrphanDeleted and EventWouldDelete are the pool's Events for an
// orphan deleted, and one a dry run would delete.
const (
	EventOrphanDeleted = "OrphanDeleted"
	EventWouldDelete   = "WouldDelete"
)

// orphanPasses remembers when each pool's machines were last listed.
type orphanPasses struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due says whether the pool's next pass may run at now, and notes it as run.
// The first pass comes one period after the controller first sees the pool,
// not at its start, where every pool's listing would add to the start's
// load; an orphan waits a registration timeout to be one anyway.
func (o *orphanPasses) due(pool string, every time.Duration, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = map[string]time.Time{}
	}
	at, ok := o.last[pool]
	if !ok {
		o.last[pool] = now
		return false
	}
	if now.Sub(at) < every {
		return false
	}
	o.last[pool] = now
	return true
}

// forget drops a deleted pool.
func (o *orphanPasses) forget(pool string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, pool)
}

// orphanEvery is how often a pool's machines are listed: every registration
// timeout, within orphanPassMin and orphanPassMax.
func (c *Controller) orphanEvery() time.Duration {
	return min(max(c.opts.RegistrationTimeout, orphanPassMin), orphanPassMax)
}

// collectOrphans lists the pool's machines, at most every orphanEvery, and
// deletes (under DryRun: reports) up to orphansPerPass of those nothing
// accounts for: not deleting already, older than the registration timeout,
// with no Node (by machine name or providerID) and named by no record on
// any node (nodes: the cluster's). It returns when the next pass is due.
func (c *Controller) collectOrphans(ctx context.Context, pool *v1alpha1.NodePool, nodes []*corev1.Node, now time.Time) (time.Duration, error) {
	every := c.orphanEvery()
	if !c.orphans.due(pool.Name, every, now) {
		return every, nil
	}
	machines, err := c.machines.ListMachines(ctx, pool)
	if err != nil {
		return every, fmt.Errorf("listing the machines of pool %s: %w", pool.Name, err)
	}
	named := map[string]bool{}
	for _, n := range nodes {
		r, err := disruption.RecordOf(n)
		if err != nil {
			// A record this controller cannot read (or a newer sluice
			// wrote) may name a machine: none is an orphan until it can.
			c.opts.Log.Info("orphaned machines not collected: a record cannot be read", "pool", pool.Name, "node", n.Name, "err", err)
			return every, nil
		}
		if r != nil && r.Replacement != "" {
			named[r.Replacement] = true
		}
	}
	var orphans []*provider.Machine
	for _, m := range machines {
		if m.State == provider.StateDeleting || named[m.Name] || now.Sub(m.Created) < c.opts.RegistrationTimeout {
			continue
		}
		has, err := c.hasNode(ctx, m)
		if err != nil {
			return every, err
		}
		if !has {
			orphans = append(orphans, m)
		}
	}
	slices.SortFunc(orphans, func(a, b *provider.Machine) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name))
	})
	var errs []error
	for _, m := range orphans[:min(len(orphans), orphansPerPass)] {
		why := fmt.Sprintf("machine %s (%s, made %s ago) has no Node and no record names it", m.Name, cmp.Or(m.ProviderID, "no providerID yet"), now.Sub(m.Created).Round(time.Second))
		if c.opts.DryRun {
			c.event(pool, corev1.EventTypeNormal, EventWouldDelete, "dry run: would delete orphaned "+why)
			continue
		}
		if err := c.machines.DeleteMachine(ctx, pool, m.Name); err != nil {
			errs = append(errs, fmt.Errorf("deleting orphaned machine %s: %w", m.Name, err))
			continue
		}
		c.opts.Metrics.orphanDeleted(pool.Name)
		c.opts.Log.Info("orphaned machine deleted", "nodepool", pool.Name, "machine", m.Name, "providerID", m.ProviderID, "created", m.Created)
		c.event(pool, corev1.EventTypeWarning, EventOrphanDeleted, "deleted orphaned "+why)
	}
	if len(errs) > 0 {
		return every, fmt.Errorf("%d of %d orphaned machines: %w", len(errs), len(orphans), errs[0])
	}
	return every, nil
}

// hasNode says whether the cache holds the machine's Node.
func (c *Controller) hasNode(ctx context.Context, m *provider.Machine) (bool, error) {
	for _, name := range []string{m.Name, m.NodeName} {
		if name == "" {
			continue
		}
		n, err := c.nodeBy(ctx, indexMachine, name)
		if n != nil || err != nil {
			return n != nil, err
		}
	}
	if m.ProviderID == "" {
		return false, nil
	}
	n, err := c.nodeBy(ctx, indexProviderID, provider.IDKey(m.ProviderID))
	return n != nil, err
}
