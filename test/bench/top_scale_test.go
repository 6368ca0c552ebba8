package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/top"
)

// topWidth is the terminal the measured screens are laid out for.
const topWidth = 160

// topSeenWithin is how long one change may take to reach the screen before
// the measurement gives up on it (and counts it at this time).
const topSeenWithin = 10 * time.Second

// topResult is what `sluice top`'s view cost on a cluster: the time from a
// change's write being answered to the first screen showing it, what each
// screen cost, and the requests its clients sent.
type topResult struct {
	synced  time.Duration
	seen    []time.Duration // sorted
	missed  int             // changes not on the screen within topSeenWithin
	screens []time.Duration // Snapshot + Build + Lines, sorted
	lines   int
	// requests are by verb and resource (LIST and WATCH told apart);
	// other counts those that are neither a list nor a watch.
	requests map[requestKind]int64
	other    int64
}

// measureTop runs `sluice top`'s own Watch, Build and Lines (internal/top,
// as the command's Bubble Tea app runs them: a screen after every change the
// watches deliver) against cfg's cluster, cordons each of nodes and then
// uncordons them, one at a time, and times each change from the write's
// answer to the first screen whose row for the node says it. Its clients'
// requests are counted by verb and resource at their transport, which is
// where "no API load beyond its watches" is decided.
func measureTop(ctx context.Context, b *testing.B, cfg *rest.Config, writer kubernetes.Interface, nodes []string) topResult {
	b.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	counted := newRequestTally()
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	link := top.NewLink(clock.RealClock{})
	cfg.Wrap(link.Wrap)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			counted.add(requestKindOf(req.Method, req.URL), 1)
			return rt.RoundTrip(req)
		})
	})
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	w := top.NewWatch(kc, dyn, clock.RealClock{}, top.Watched{Pods: true, Events: true}, link)
	w.Start(ctx)
	syncCtx, syncDone := context.WithTimeout(ctx, 5*time.Minute)
	defer syncDone()
	if err := w.WaitForSync(syncCtx); err != nil {
		b.Fatalf("sluice top's watches: %v", err)
	}
	r := topResult{synced: time.Since(start)}

	// The screen loop: what the app does on every change.
	var mu sync.Mutex
	// pending is the change being waited for; the screen loop sends the
	// moment a screen showed it (which may come before the write's answer
	// is read, so it is set before the write).
	var pending struct {
		node string
		want top.State
		seen chan time.Time
	}
	screens := make(chan struct{})
	go func() {
		defer close(screens)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Changed():
			}
			t0 := time.Now()
			lines := top.Lines(top.Build(w.Snapshot()), topWidth, "")
			took := time.Since(t0)
			done := time.Now()
			mu.Lock()
			r.screens = append(r.screens, took)
			r.lines = len(lines)
			if pending.seen != nil && showsState(lines, pending.node, pending.want) {
				pending.seen <- done
				pending.seen = nil
			}
			mu.Unlock()
		}
	}()

	change := func(node string, cordon bool, want top.State) {
		seen := make(chan time.Time, 1)
		patch := `{"spec":{"unschedulable":null}}`
		if cordon {
			patch = `{"spec":{"unschedulable":true}}`
		}
		mu.Lock()
		pending.node, pending.want, pending.seen = node, want, seen
		mu.Unlock()
		if _, err := writer.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatalf("changing %s for sluice top: %v", node, err)
		}
		written := time.Now()
		select {
		case at := <-seen:
			r.seen = append(r.seen, max(at.Sub(written), 0))
		case <-time.After(topSeenWithin):
			mu.Lock()
			pending.seen = nil
			mu.Unlock()
			r.missed++
			r.seen = append(r.seen, topSeenWithin)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range nodes {
		change(n, true, top.StateCordoned)
	}
	for _, n := range nodes {
		change(n, false, top.StateServing)
	}
	cancel()
	<-screens
	slices.Sort(r.seen)
	slices.Sort(r.screens)
	r.requests = counted.byKind()
	for k, n := range r.requests {
		if k.verb != "LIST" && k.verb != "WATCH" {
			r.other += n
		}
	}
	return r
}

// showsState says whether the screen has node's row in state want.
func showsState(lines []top.Line, node string, want top.State) bool {
	for _, l := range lines {
		if l.Node == node && strings.Contains(l.Text, " "+string(want)+" ") {
			return true
		}
	}
	return false
}

// requestsLine lays the requests out, most first.
func (r topResult) requestsLine() string {
	keys := make([]requestKind, 0, len(r.requests))
	for k := range r.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b requestKind) int {
		if r.requests[a] != r.requests[b] {
			return int(r.requests[b] - r.requests[a])
		}
		return strings.Compare(a.String(), b.String())
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.requests[k]))
	}
	return strings.Join(parts, ", ")
}

// topChanges is how many nodes measureTop cordons and uncordons.
const topChanges = 20

// printTop prints what `sluice top` cost on the sandbox and judges it.
func printTop(sc *scorecard, r topResult, nodes, pods int) {
	p50, p99, s50, s99 := "none", "none", "none", "none"
	if len(r.seen) > 0 {
		p50, p99 = nearestRank(r.seen, 0.5).Round(time.Millisecond).String(), nearestRank(r.seen, 0.99).Round(time.Millisecond).String()
	}
	if len(r.screens) > 0 {
		s50, s99 = nearestRank(r.screens, 0.5).Round(time.Millisecond).String(), nearestRank(r.screens, 0.99).Round(time.Millisecond).String()
	}
	printTable(fmt.Sprintf("# sluice top on the same sandbox (%d nodes, %d pods, before the controller starts): its Watch, Build and Lines at %d columns; %d nodes cordoned then uncordoned, one at a time",
		nodes, pods, topWidth, len(r.seen)/2), [][]string{
		{"figure", "sluice top", "target"},
		{"change written -> on the screen, p50 / p99", fmt.Sprintf("%s / %s (%d changes, %d not shown within %s)", p50, p99, len(r.seen), r.missed, topSeenWithin), "p99 " + sc.want(topRender)},
		{"one screen (Snapshot + Build + Lines), p50 / p99", fmt.Sprintf("%s / %s (%d screens, %d lines)", s50, s99, len(r.screens), r.lines), ""},
		{"watches' first list, start -> synced", r.synced.Round(10 * time.Millisecond).String(), ""},
		{"its requests, by verb and resource", r.requestsLine(), ""},
		{"  of which neither a LIST nor a WATCH", fmt.Sprintf("%d", r.other), sc.want(topRequests)},
	})
	if len(r.seen) > 0 {
		sc.add(topRender, nearestRank(r.seen, 0.99).Seconds())
	}
	sc.add(topRequests, float64(r.other))
}
