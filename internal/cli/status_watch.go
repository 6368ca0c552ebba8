package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/poolstatus"
	"github.com/sluice-dev/sluice/internal/top"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// syncTimeout bounds the watches' first list: an API server that does not
// answer by then is an error, as a request that does not is.
const syncTimeout = 30 * time.Second

// watchLine is one line of `sluice status -w -o json`: a pool that appeared,
// changed or went, or the connection lost or back. Its field names are part
// of the CLI contract.
type watchLine struct {
	Time time.Time `json:"time"`
	// Event is initial (the pool as the watch began), added, changed,
	// deleted, connectionLost or connectionBack.
	Event   string           `json:"event"`
	Pool    string           `json:"pool,omitempty"`
	Changes []fieldChange    `json:"changes,omitempty"`
	Status  *poolstatus.Pool `json:"status,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// fieldChange is one field of a pool's status that changed.
type fieldChange struct {
	Field string `json:"field"`
	From  any    `json:"from"`
	To    any    `json:"to"`
}

// Watch events.
const (
	watchInitial        = "initial"
	watchAdded          = "added"
	watchChanged        = "changed"
	watchDeleted        = "deleted"
	watchConnectionLost = "connectionLost"
	watchConnectionBack = "connectionBack"
)

// runStatusWatch prints the status, then one line per change of a pool's
// status, until ctx ends. The pools come from watches (informers); it reads
// their caches again when they deliver a change, or when a pool's status
// changes by itself (a budget window, an expiry), and makes no other call.
func runStatusWatch(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, link *top.Link, names []string, format outputFormat, clk clock.WithTicker) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := top.NewWatch(kc, dyn, clk, top.Watched{}, link)
	w.Start(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, syncTimeout)
	err := w.WaitForSync(syncCtx)
	syncCancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s := w.Snapshot()
	prev, err := watchedPools(s, names, true)
	if err != nil {
		return err
	}
	pw := &watchPrinter{out: out, json: format.structured()}
	if err := pw.initial(s, prev); err != nil {
		return err
	}
	live := true
	// One timer, reset after each pass, wakes the loop when a pool's
	// status next changes by itself; a stale firing only costs a pass.
	timer := clk.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var wake <-chan time.Time
		timer.Stop()
		if d := nextChange(prev); d > 0 {
			timer.Reset(d)
			wake = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.Changed():
		case <-wake:
		}
		s = w.Snapshot()
		if s.Live() != live {
			live = s.Live()
			if err := pw.connection(s); err != nil {
				return err
			}
		}
		if !live {
			continue // the caches are as of the loss: nothing to compare
		}
		cur, _ := watchedPools(s, names, false)
		if err := pw.changes(s.Now, prev, cur); err != nil {
			return err
		}
		prev = cur
	}
}

// watchedPools summarizes the named pools (every pool when none is named)
// from the snapshot; strict refuses a name no pool has, as status does.
func watchedPools(s top.Snapshot, names []string, strict bool) (map[string]poolstatus.Pool, error) {
	chosen, err := choosePools(s.Pools, names, s.PoolsInstalled)
	if err != nil && strict {
		return nil, err
	}
	if err != nil {
		chosen = chosen[:0]
		for i := range s.Pools {
			if len(names) == 0 || slices.Contains(names, s.Pools[i].Name) {
				chosen = append(chosen, &s.Pools[i])
			}
		}
	}
	out := map[string]poolstatus.Pool{}
	for _, p := range poolstatus.Of(chosen, s.Nodes, s.Pools, s.Now) {
		out[p.Name] = p
	}
	return out, nil
}

// nextChange is the soonest a pool's status changes by itself.
func nextChange(pools map[string]poolstatus.Pool) time.Duration {
	var d time.Duration
	for _, p := range pools {
		if p.NextChange > 0 && (d == 0 || p.NextChange < d) {
			d = p.NextChange
		}
	}
	return d
}

// watchPrinter prints the lines of `status -w`, as text or JSON lines.
type watchPrinter struct {
	out  io.Writer
	json bool
}

func (pw *watchPrinter) initial(s top.Snapshot, pools map[string]poolstatus.Pool) error {
	names := sortedNames(pools)
	if !pw.json {
		report := statusReport{Time: s.Now, Pools: []poolstatus.Pool{}}
		for _, n := range names {
			report.Pools = append(report.Pools, pools[n])
		}
		if len(report.Pools) == 0 {
			fmt.Fprintln(pw.out, "No NodePools found; watching for them.")
		} else {
			writeStatus(pw.out, report, false)
		}
		fmt.Fprintf(pw.out, "\n%-9s %-20s %s\n", "TIME", "POOL", "CHANGE")
		return nil
	}
	for _, n := range names {
		p := pools[n]
		if err := pw.line(watchLine{Time: s.Now, Event: watchInitial, Pool: n, Status: &p}); err != nil {
			return err
		}
	}
	return nil
}

func (pw *watchPrinter) connection(s top.Snapshot) error {
	l := watchLine{Time: s.Now, Event: watchConnectionBack}
	text := "connection back; counts are live again"
	if !s.Live() {
		l.Event, l.Error = watchConnectionLost, s.LostError
		text = fmt.Sprintf("connection lost (%s); reconnecting. No change is printed until it is back", s.LostError)
	}
	if pw.json {
		return pw.line(l)
	}
	_, err := fmt.Fprintf(pw.out, "%-9s %-20s %s\n", s.Now.Local().Format(time.TimeOnly), "-", text)
	return err
}

// changes prints a line per pool that appeared, went, or whose status
// changed between prev and cur.
func (pw *watchPrinter) changes(now time.Time, prev, cur map[string]poolstatus.Pool) error {
	names := sortedNames(prev)
	for n := range cur {
		if _, ok := prev[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		before, had := prev[n]
		after, has := cur[n]
		l := watchLine{Time: now, Pool: n}
		switch {
		case !has:
			l.Event = watchDeleted
		case !had:
			l.Event, l.Status = watchAdded, &after
		default:
			l.Changes = poolChanges(before, after)
			if len(l.Changes) == 0 {
				continue
			}
			l.Event, l.Status = watchChanged, &after
		}
		if err := pw.line(l); err != nil {
			return err
		}
	}
	return nil
}

func (pw *watchPrinter) line(l watchLine) error {
	if pw.json {
		raw, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(pw.out, "%s\n", raw)
		return err
	}
	what := l.Event
	if l.Event == watchChanged {
		what = changesText(l.Changes)
	}
	if l.Event == watchAdded && l.Status != nil {
		what = fmt.Sprintf("added: %d nodes, %d disrupting", l.Status.Nodes, l.Status.Disrupting)
	}
	_, err := fmt.Fprintf(pw.out, "%-9s %-20s %s\n", l.Time.Local().Format(time.TimeOnly), l.Pool, what)
	return err
}

// poolChanges are the fields of a pool's status that differ, in the order
// status prints them; budgets per reason (allowed and limit).
func poolChanges(a, b poolstatus.Pool) []fieldChange {
	var out []fieldChange
	add := func(field string, from, to any) {
		if from != to {
			out = append(out, fieldChange{Field: field, From: from, To: to})
		}
	}
	add("nodes", a.Nodes, b.Nodes)
	add("disrupting", a.Disrupting, b.Disrupting)
	add("drifted", a.Drifted, b.Drifted)
	add("expired", a.Expired, b.Expired)
	add("expiringWithin24h", a.ExpiringSoon, b.ExpiringSoon)
	add("paused", a.Paused, b.Paused)
	add("ready", a.Ready, b.Ready)
	add("provider.ready", string(a.Provider.Ready), string(b.Provider.Ready))
	for _, r := range allReasons(a, b) {
		fa, fb := budgetOf(a, r), budgetOf(b, r)
		add("budgets."+string(r)+".allowed", fa.Allowed, fb.Allowed)
		add("budgets."+string(r)+".limit", fa.Limit, fb.Limit)
	}
	return out
}

func allReasons(a, b poolstatus.Pool) []v1alpha1.DisruptionReason {
	var out []v1alpha1.DisruptionReason
	for _, p := range []poolstatus.Pool{a, b} {
		for _, f := range p.Budgets {
			if !slices.Contains(out, f.Reason) {
				out = append(out, f.Reason)
			}
		}
	}
	return out
}

type budgetNumbers struct{ Allowed, Limit int }

func budgetOf(p poolstatus.Pool, r v1alpha1.DisruptionReason) budgetNumbers {
	for _, f := range p.Budgets {
		if f.Reason == r {
			return budgetNumbers{f.Allowed, f.Limit}
		}
	}
	return budgetNumbers{}
}

// changesText is the changes as one line: "disrupting 0 -> 1; allowed
// Drifted, Expired 2 -> 1", reasons whose budgets changed alike named
// together.
func changesText(changes []fieldChange) string {
	var parts []string
	type move struct {
		kind     string
		from, to any
	}
	grouped := map[move][]string{}
	var order []move
	for _, c := range changes {
		reason, kind, ok := budgetField(c.Field)
		if !ok {
			parts = append(parts, fmt.Sprintf("%s %v -> %v", c.Field, c.From, c.To))
			continue
		}
		m := move{kind, c.From, c.To}
		if _, seen := grouped[m]; !seen {
			order = append(order, m)
		}
		grouped[m] = append(grouped[m], reason)
	}
	for _, m := range order {
		parts = append(parts, fmt.Sprintf("%s %s %v -> %v", m.kind, strings.Join(grouped[m], ","), m.from, m.to))
	}
	return strings.Join(parts, "; ")
}

// budgetField splits "budgets.Drifted.allowed" into Drifted and allowed.
func budgetField(field string) (reason, kind string, ok bool) {
	rest, ok := strings.CutPrefix(field, "budgets.")
	if !ok {
		return "", "", false
	}
	reason, kind, ok = strings.Cut(rest, ".")
	return reason, kind, ok
}

func sortedNames(pools map[string]poolstatus.Pool) []string {
	out := make([]string, 0, len(pools))
	for n := range pools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// errNotATerminal is top's refusal of a stdout that is no terminal.
var errNotATerminal = errors.New("stdout is not a terminal: `sluice top` draws a full screen; for a line per change use `sluice status -w` (add -o json for scripts)")
