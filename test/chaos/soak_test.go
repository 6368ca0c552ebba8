package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/test/audit"
)

// SoakEnv names the variable that sets the soak's length (`make soak
// DURATION=30m` sets it); unset, TestSoak skips.
const SoakEnv = "SLUICE_SOAK_DURATION"

const (
	soakPoolNodes  = 100
	soakMaintNodes = 100
)

// TestSoak runs one controller for DURATION through the fault proxy on 200
// nodes: a pool of 100 that expires and drifts, 100 more that get a
// maintenance event every 10 s and a person's `sluice drain` every minute.
// It samples the controller's memory and goroutines every 15 s and passes
// when the auditor is clean and neither grows: the last third's median
// within 20 % (or 10 MiB, 10 goroutines) of the middle third's.
func TestSoak(t *testing.T) {
	v := os.Getenv(SoakEnv)
	if v == "" {
		t.Skipf("set %s (make soak DURATION=30m) to run the soak", SoakEnv)
	}
	duration, err := time.ParseDuration(v)
	if err != nil || duration < 3*time.Minute {
		t.Fatalf("%s=%q: give a duration of at least 3m", SoakEnv, v)
	}
	env := sandboxtest.New(t)
	seed := seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d, duration %s, load at start %s", seed, duration, loadavg())
	s := setSoak(t, env, max(2*time.Minute, duration/3))
	proxy := startProxy(t, env, seed)
	a, err := audit.Start(t.Context(), env.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	bin := sandboxtest.Sluice(t)
	metrics := freeAddress(t)
	f := newFleet(t, bin, controllerKubeconfig(t, env, proxy.URL(), proxy.CA()), env.Client, seed, []string{"soak"}, "--metrics-bind-address", metrics)

	d := &driver{s: s, a: a, bin: bin, rng: rng, busy: map[string]*busyNode{}}
	var samples []sample
	start := time.Now()
	end := start.Add(duration)
	drifted := false
	nextEvent, nextDrain, nextSample := start, start.Add(30*time.Second), start
	for now := time.Now(); now.Before(end); now = time.Now() {
		if now.After(nextSample) {
			if smp, err := scrapeSample(metrics, now.Sub(start)); err == nil {
				samples = append(samples, smp)
			}
			nextSample = nextSample.Add(15 * time.Second)
		}
		if now.After(nextEvent) {
			d.startEvent()
			nextEvent = nextEvent.Add(10 * time.Second)
		}
		if now.After(nextDrain) {
			d.startDrain()
			nextDrain = nextDrain.Add(time.Minute)
		}
		if !drifted && now.After(start.Add(duration/2)) {
			s.setImage("img-2")
			drifted = true
		}
		d.advance()
		time.Sleep(2 * time.Second)
	}
	// Let what is under way finish, with faults still on.
	s.waitUntil(f, time.Now().Add(10*time.Minute), "every maintenance event and drain finished", func(context.Context) (bool, error) {
		d.advance()
		return len(d.busy) == 0, nil
	})
	proxy.SetEnabled(false)
	sum := a.Finish()
	st := proxy.Stats()
	t.Logf("soak %s on %d nodes: %d maintenance events, %d person drains, %d drain failures; fault proxy: %s; load at end %s\nauditor:\n%s",
		duration, soakPoolNodes+soakMaintNodes, d.events, d.drains, d.failed, st, loadavg(), sum)
	t.Logf("memory and goroutines:\n%s", describeSamples(samples))
	if sum.Violations() > 0 {
		t.Errorf("the auditor found %d violations", sum.Violations())
	}
	if d.failed > 0 {
		t.Errorf("%d of %d person drains failed", d.failed, d.drains)
	}
	if why := growth(samples); why != "" {
		t.Error(why)
	}
	if denied := f.lines("forbidden"); len(denied) > 0 {
		t.Errorf("the controller was refused %d requests as forbidden:\n%s", len(denied), strings.Join(denied[:min(5, len(denied))], "\n"))
	}
}

// setSoak builds the 200 nodes and their workloads.
func setSoak(t *testing.T, env *sandboxtest.Env, expireAfter time.Duration) *scene {
	t.Helper()
	s := newPoolScene(t, env, "soak", soakPoolNodes, 3*time.Second, &v1alpha1.DisruptionSpec{
		ExpireAfter:            expireAfter.String(),
		Budgets:                []v1alpha1.Budget{{Nodes: "10%"}},
		TerminationGracePeriod: &metav1.Duration{Duration: 5 * time.Minute},
		ConsolidateAfter:       v1alpha1.Never,
	})
	for _, n := range env.CreateNodes(t, fixture.AKSPool(s.name+"m", soakMaintNodes, fixture.WithLabels(s.maintLabels))) {
		s.maint = append(s.maint, n.Name)
	}
	ns := env.Namespace
	env.Create(t,
		fixture.Deployment(ns, "web", 4*soakPoolNodes, fixture.NodeSelector(s.poolLabels), fixture.Requests("100m", "128Mi"), fixture.GracePeriod(10), fixture.ExitsAfter(2)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("10%")),
		fixture.Deployment(ns, "svc", 3*soakMaintNodes, fixture.NodeSelector(s.maintLabels), fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "svc", "svc", fixture.MinAvailable("80%")))
	env.WaitFor(t, 10*time.Minute, "the soak's pods Ready", func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range pods.Items {
			if sandboxtest.PodReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == 4*soakPoolNodes+3*soakMaintNodes, nil
	})
	env.WaitForPDB(t, "web", 4*soakPoolNodes)
	env.WaitForPDB(t, "svc", 3*soakMaintNodes)
	return s
}

// driver plays the cloud and the people on the maintenance nodes.
type driver struct {
	s                      *scene
	a                      *audit.Auditor
	bin                    string
	rng                    *rand.Rand
	busy                   map[string]*busyNode
	events, drains, failed int
}

type busyNode struct {
	since    time.Time
	drain    chan error // a person's sluice drain; nil for a maintenance event
	finished bool       // the event left the report, or the drain ended
}

// idle picks a maintenance node nothing is happening to.
func (d *driver) idle() (string, bool) {
	var free []string
	for _, n := range d.s.maint {
		if d.busy[n] == nil {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return "", false
	}
	return free[d.rng.IntN(len(free))], true
}

func (d *driver) startEvent() {
	node, ok := d.idle()
	if !ok {
		return
	}
	d.events++
	id := fmt.Sprintf("redeploy-%d", d.events)
	d.s.report(node, event(id, maintenance.TypeRedeploy, time.Now().Add(2*time.Minute)))
	d.busy[node] = &busyNode{since: time.Now()}
}

func (d *driver) startDrain() {
	node, ok := d.idle()
	if !ok {
		return
	}
	d.drains++
	done := make(chan error, 1)
	go func() {
		out, err := exec.Command(d.bin, "drain", node, "--kubeconfig", d.s.env.Sandbox.Kubeconfig(),
			"--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "5m").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("sluice drain %s: %w\n%s", node, err, out)
		}
		done <- err
	}()
	d.busy[node] = &busyNode{since: time.Now(), drain: done}
}

// advance moves each busy node on: an event ends once its node is drained
// and has been for 20 s; a drained node goes back to the person who
// uncordons it; a node is idle again once schedulable.
func (d *driver) advance() {
	ctx := d.s.t.Context()
	for node, b := range d.busy {
		switch {
		case b.drain != nil && !b.finished:
			select {
			case err := <-b.drain:
				if err != nil {
					d.failed++
					d.s.t.Log(err)
				}
				d.a.WillUncordon(node)
				d.s.patchNode(node, `{"spec":{"unschedulable":false}}`)
				b.finished = true
			default:
			}
		case b.drain == nil && !b.finished:
			if empty, _ := d.s.emptied(ctx, node); empty && time.Since(b.since) > 20*time.Second {
				d.s.report(node)
				b.finished = true
			}
		default:
			if ok, _ := d.s.schedulable(ctx, node); ok {
				delete(d.busy, node)
			}
		}
	}
}

// sample is one scrape of the controller's own metrics.
type sample struct {
	at         time.Duration
	heap, rss  float64 // MiB
	goroutines float64
}

func scrapeSample(addr string, at time.Duration) (sample, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	s := sample{at: at}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_memstats_heap_inuse_bytes":
			s.heap = v / (1 << 20)
		case "process_resident_memory_bytes":
			s.rss = v / (1 << 20)
		case "go_goroutines":
			s.goroutines = v
		}
	}
	return s, sc.Err()
}

// growth says how memory or goroutines grew from the middle third of the
// run to the last, "" when neither did.
func growth(samples []sample) string {
	if len(samples) < 9 {
		return fmt.Sprintf("only %d samples of the controller's metrics: too few to judge its memory", len(samples))
	}
	third := len(samples) / 3
	mid, last := samples[third:2*third], samples[2*third:]
	var why []string
	for _, m := range []struct {
		name  string
		pick  func(sample) float64
		slack float64
	}{{"heap in use (MiB)", func(s sample) float64 { return s.heap }, 10}, {"goroutines", func(s sample) float64 { return s.goroutines }, 10}} {
		a, b := median(mid, m.pick), median(last, m.pick)
		if b > a*1.2 && b-a > m.slack {
			why = append(why, fmt.Sprintf("%s grew from a median of %.1f in the middle third to %.1f in the last", m.name, a, b))
		}
	}
	return strings.Join(why, "; ")
}

func median(samples []sample, pick func(sample) float64) float64 {
	vs := make([]float64, 0, len(samples))
	for _, s := range samples {
		vs = append(vs, pick(s))
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// describeSamples is the first, middle and last thirds' medians and peaks.
func describeSamples(samples []sample) string {
	if len(samples) < 3 {
		return "too few samples"
	}
	third := len(samples) / 3
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %16s %16s %16s %8s\n", "", "heap in use MiB", "resident MiB", "goroutines", "samples")
	for i, part := range [][]sample{samples[:third], samples[third : 2*third], samples[2*third:]} {
		fmt.Fprintf(&b, "%-14s %16.1f %16.1f %16.0f %8d\n", []string{"first third", "middle third", "last third"}[i],
			median(part, func(s sample) float64 { return s.heap }), median(part, func(s sample) float64 { return s.rss }),
			median(part, func(s sample) float64 { return s.goroutines }), len(part))
	}
	peak := slices.MaxFunc(samples, func(a, b sample) int { return int(a.rss - b.rss) })
	fmt.Fprintf(&b, "peak resident %.1f MiB at %s", peak.rss, peak.at.Round(time.Second))
	return b.String()
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// loadavg is the machine's 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
