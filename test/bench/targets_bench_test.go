package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// figure names one target in benchTargets. Benchmarks refer to their
// targets by these constants, so a misspelt one does not compile.
type figure int

const (
	doctorThousandNodes figure = iota
	placeThirtyThousandPods
	consolidationPass
	deadlineGraceful
	drainSpeedup
	drainRequestsPerPod
	maintenanceCordon
	agentMemory
	scaleIdleReads
	scaleIdleWrites
	scaleIdleMemory
	scalePeakMemory
	scaleCordon
	spotCordoned
	spotDrained
	spotGraceful
	spotBudgets
	spotMemory
	spotPeakMemory
	driftRatio
	driftOut
	poolsPass
	poolsWrites
	upgradeRatio
	upgradeForecast
	upgradeScript
	upgradeForecastUnfitted
	upgradeBlockerNamed
	sideAboveMinimum
	sideCost
	sideConverge
	sideBound
	sideEvictions
	sideBeyondFewest
	sideFewest
	sideBroken
	rebootRatio
	rebootOut
	rebootVersusKured
	fleetHeap
	fleetRSS
	fleetPerPod
	fleetPass
	fleetConsolidateLargest
	fleetConsolidateAll
	fleetDoctor
	fleetStatus
	fleetIdleWrites
	driftScaleRatio
	driftScaleOut
	driftScaleSlot
	driftScaleIdleWrites
	driftScaleIdleReads
	driftScaleAudit
	topRender
	topRequests
	driftSideRatio
	driftSideVersus
	figures // how many there are; not a figure
)

// direction says which side of its threshold a figure must stay on. The
// zero value is neither, so an entry that forgets it fails TestTargetsTable.
type direction int

const (
	atMost direction = iota + 1
	atLeast
)

// benchTarget is one figure a benchmark promises.
type benchTarget struct {
	bench     string // the benchmark that measures it; its sub-benchmarks each judge it
	name      string // the figure, as its verdict line names it
	dir       direction
	threshold float64
	unit      string
	// tolerance is how far past the threshold, as a share of it, the figure
	// may go and still pass: the noise of the 2-core machine the benches run
	// on, which another engineer's control planes may share.
	tolerance float64
	// best is the best the figure could reach and why, where that is known.
	best string
}

// Tolerances: 15 % for times and for ratios of times, which the machine's
// load moves; 5 % for a process's memory, which moves with when its garbage
// collector last ran; none for counts of requests, writes and broken
// budgets, which the load does not change, and none for a memory limit past
// which the process is killed.
//
// Each entry names where the figure was promised before this table held it.
var benchTargets = [figures]benchTarget{
	// BenchmarkDoctor; docs/design/doctor.md presents it ("under 3 s").
	doctorThousandNodes: {bench: "BenchmarkDoctor", name: "doctor 1000 nodes/30000 pods",
		dir: atMost, threshold: 3, unit: "s", tolerance: 0.15},
	// BenchmarkSimulatePlacement; docs/design/simulate.md reports 1.6 s.
	placeThirtyThousandPods: {bench: "BenchmarkSimulatePlacement", name: "placement of 30000 pods onto 1000 nodes",
		dir: atMost, threshold: 2, unit: "s", tolerance: 0.15},
	// BenchmarkConsolidationPass; docs/consolidation.md reports 0.73 s.
	consolidationPass: {bench: "BenchmarkConsolidationPass", name: "consolidation pass over 1000 nodes/30000 pods",
		dir: atMost, threshold: 5, unit: "s", tolerance: 0.15},
	// BenchmarkDeadlineGracefulExits ("100% graceful with sluice"). Whether a
	// pod beats the deadline depends on timing: 5 % lets one pod of the 20 be
	// late.
	deadlineGraceful: {bench: "BenchmarkDeadlineGracefulExits", name: "sluice drain --deadline 30s: pods exiting gracefully",
		dir: atLeast, threshold: 100, unit: "%", tolerance: 0.05},
	// BenchmarkDrainTwentyNodes: first "sluice >= 5x faster, <= 3 requests
	// per evicted pod"; issue 38 raised both to ">= 10x kubectl's wall time
	// and <= 2 requests per evicted pod, quiet and loaded alike", once the
	// requests that grew with the drain's length were gone. Requests get
	// the tolerance of a time: a refused eviction is asked again, and how
	// many are refused depends on how soon replacements become Ready. The
	// bench prints the wall time beside its lower bound (drainBound) too,
	// not judged.
	drainSpeedup: {bench: "BenchmarkDrainTwentyNodes", name: "drain 20 nodes: kubectl's wall time over sluice's",
		dir: atLeast, threshold: 10, unit: "×", tolerance: 0.15},
	drainRequestsPerPod: {bench: "BenchmarkDrainTwentyNodes", name: "drain 20 nodes: sluice's API requests per evicted pod",
		dir: atMost, threshold: 2, unit: "requests", tolerance: 0.15,
		best: "a little over 1: the eviction, and per node a read, a list and a watch of its pods, the claim, the last check and the release"},
	// BenchmarkMaintenanceReaction ("cordoned in < 1.5s", for every node);
	// docs/design/maintenance.md: the poll interval plus ~40 ms.
	maintenanceCordon: {bench: "BenchmarkMaintenanceReaction", name: "maintenance event appears -> node cordoned, slowest of 10",
		dir: atMost, threshold: 1.5, unit: "s", tolerance: 0.15, best: "about 1s, the agent's poll interval: an event may appear just after a poll"},
	// BenchmarkMaintenanceReaction: the chart's memory limit for the agent
	// (charts/sluice/values.yaml).
	agentMemory: {bench: "BenchmarkMaintenanceReaction", name: "sluice agent resident memory",
		dir: atMost, threshold: 64, unit: "MiB"},
	// BenchmarkControllerAtScale; docs/maintenance.md reports 223 MiB at rest.
	scaleIdleReads: {bench: "BenchmarkControllerAtScale", name: "controller at scale: API reads while idle",
		dir: atMost, threshold: 1, unit: "reads/s"},
	scaleIdleWrites: {bench: "BenchmarkControllerAtScale", name: "controller at scale: API writes while idle",
		dir: atMost, threshold: 0, unit: "writes/min"},
	scaleIdleMemory: {bench: "BenchmarkControllerAtScale", name: "controller at scale: resident memory while idle",
		dir: atMost, threshold: 300, unit: "MiB", tolerance: 0.05},
	scalePeakMemory: {bench: "BenchmarkControllerAtScale", name: "controller at scale: peak resident memory",
		dir: atMost, threshold: 300, unit: "MiB", tolerance: 0.05},
	scaleCordon: {bench: "BenchmarkControllerAtScale", name: "controller at scale: Preempt report on the Node -> cordoned",
		dir: atMost, threshold: 1.5, unit: "s", tolerance: 0.15, best: "0s, the agent cordons in the write that reports the event"},
	// BenchmarkMassSpotEvent; docs/maintenance.md reports its last runs
	// (7 and 3 of 100 nodes drained in time, 238 of 3,101 pods graceful).
	// The agent cordons in the write that reports the event, so the load
	// does not move the first figure.
	spotCordoned: {bench: "BenchmarkMassSpotEvent", name: "mass spot: nodes cordoned within 2s of their agent's report",
		dir: atLeast, threshold: 100, unit: "%"},
	spotDrained: {bench: "BenchmarkMassSpotEvent", name: "mass spot: nodes drained before their deadline",
		dir: atLeast, threshold: 100, unit: "%", tolerance: 0.15,
		best: "the bare client's share on as many other nodes, printed beside (the sandbox's ceiling)"},
	spotGraceful: {bench: "BenchmarkMassSpotEvent", name: "mass spot: pods that left gracefully",
		dir: atLeast, threshold: 100, unit: "%", tolerance: 0.15,
		best: "the bare client's share of its pods, printed beside (the sandbox's ceiling)"},
	spotBudgets: {bench: "BenchmarkMassSpotEvent", name: "mass spot: budgets below desiredHealthy, not explained by DeadlineForced",
		dir: atMost, threshold: 0, unit: "budgets"},
	spotMemory: {bench: "BenchmarkMassSpotEvent", name: "mass spot: controller resident memory at the end",
		dir: atMost, threshold: 300, unit: "MiB", tolerance: 0.05},
	spotPeakMemory: {bench: "BenchmarkMassSpotEvent", name: "mass spot: controller peak resident memory",
		dir: atMost, threshold: 300, unit: "MiB", tolerance: 0.05},
	// BenchmarkPoolDrift ("<= 1.5x lower bound", "<= 20 (the budget)").
	driftRatio: {bench: "BenchmarkPoolDrift", name: "pool drift: wall time over its lower bound",
		dir: atMost, threshold: 1.5, unit: "×", tolerance: 0.15, best: "1×, ceil(100/20) batches, each a 5s boot and a 3s exit"},
	driftOut: {bench: "BenchmarkPoolDrift", name: "pool drift: old nodes out of service at once, most in any rollout",
		dir: atMost, threshold: 20, unit: "nodes"},
	// BenchmarkPoolsIdle ("< 1s", "0").
	poolsPass: {bench: "BenchmarkPoolsIdle", name: "pools idle: one evaluation pass over 20 pools of 50 nodes",
		dir: atMost, threshold: 1, unit: "s", tolerance: 0.15},
	poolsWrites: {bench: "BenchmarkPoolsIdle", name: "pools idle: API writes in a minute",
		dir: atMost, threshold: 0, unit: "writes"},
	// BenchmarkUpgrade ("<= 1.3x", "within ±25%", "sluice faster"); the
	// README and docs/upgrades.md report 0.98×, +10 % and 7.9×.
	upgradeRatio: {bench: "BenchmarkUpgrade", name: "upgrade: wall time over its lower bound",
		dir: atMost, threshold: 1.3, unit: "×", tolerance: 0.15,
		best: "about 1×, batches × (boot + slowest drain + soak), a little less where a drain overlaps the next boot"},
	upgradeForecast: {bench: "BenchmarkUpgrade", name: "upgrade: forecast error, either way",
		dir: atMost, threshold: 25, unit: "%", tolerance: 0.15, best: "0%"},
	upgradeScript: {bench: "BenchmarkUpgrade", name: "upgrade: a kubectl drain script's wall time over sluice's",
		dir: atLeast, threshold: 1, unit: "×", tolerance: 0.15},
	// BenchmarkUpgrade/blocking (issue 38: "±15 % on a shape the forecast
	// was not fitted on, naming the blocking node beforehand").
	upgradeForecastUnfitted: {bench: "BenchmarkUpgrade", name: "upgrade, a shape not fitted on (longer drains, two PDB waves, a blocking node): forecast error, either way",
		dir: atMost, threshold: 15, unit: "%", tolerance: 0.15, best: "0%"},
	upgradeBlockerNamed: {bench: "BenchmarkUpgrade", name: "upgrade, a shape not fitted on: runs where the nodes the forecast named as blocking were not those that blocked",
		dir: atMost, threshold: 0, unit: "runs"},
	// BenchmarkConsolidationVersusKarpenter ("sluice <= +5%, and <=
	// Karpenter's cost", "sluice < Karpenter" for time and evictions,
	// "sluice <= Karpenter" beyond the fewest, "the same on both", "0 for
	// sluice"); docs/consolidation.md reports the last runs. Which nodes
	// remain is not a matter of load: costs get no tolerance.
	sideAboveMinimum: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: sluice's cost above the bin-packing minimum",
		dir: atMost, threshold: 5, unit: "%", best: "0%, the minimum"},
	sideCost: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: sluice's cost over Karpenter's",
		dir: atMost, threshold: 1, unit: "×"},
	// "sluice < Karpenter": with the tolerance a tie passes.
	sideConverge: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: sluice's time to converge over Karpenter's",
		dir: atMost, threshold: 1, unit: "×", tolerance: 0.15},
	// Issue 38: "sluice ≤ 1.5× that bound" (the rounds the budget allows ×
	// (consolidateAfter + the slowest drain of a round)).
	sideBound: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: sluice's time to converge over its lower bound",
		dir: atMost, threshold: 1.5, unit: "×", tolerance: 0.15, best: "1×, the bound; about 1.2× with a 15 s validation delay longer than consolidateAfter"},
	// "sluice < Karpenter": at least one eviction fewer.
	sideEvictions: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: sluice's evictions minus Karpenter's",
		dir: atMost, threshold: -1, unit: "evictions"},
	sideBeyondFewest: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: evictions beyond the fewest possible, sluice's minus Karpenter's",
		dir: atMost, threshold: 0, unit: "evictions"},
	// Both sides start from one planned layout (sidelayout_bench_test.go).
	sideFewest: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: fewest possible evictions, difference between the sides",
		dir: atMost, threshold: 0, unit: "evictions"},
	sideBroken: {bench: "BenchmarkConsolidationVersusKarpenter", name: "side by side: PDB floors broken by sluice",
		dir: atMost, threshold: 0, unit: "budgets"},
	// BenchmarkReboots (issue 37: "wall vs its lower bound, and beside
	// kured's one-at-a-time pace"); docs/health.md reports the last run.
	rebootRatio: {bench: "BenchmarkReboots", name: "reboots: wall time over its lower bound",
		dir: atMost, threshold: 1.5, unit: "×", tolerance: 0.15, best: "1×, ceil(100/20) rounds, each a 5s exit and a 3s reboot"},
	rebootOut: {bench: "BenchmarkReboots", name: "reboots: nodes rebooting at once, most in any run",
		dir: atMost, threshold: 20, unit: "nodes"},
	rebootVersusKured: {bench: "BenchmarkReboots", name: "reboots: kured's one-at-a-time pace over sluice's wall time",
		dir: atLeast, threshold: 10, unit: "×", tolerance: 0.15, best: "20×, the budget's width, at the lower bound"},
	// BenchmarkFleet, judged at its largest size (5,000 nodes, 150,000 pods,
	// 100 pools by default); issue 38 set each of these.
	fleetHeap: {bench: "BenchmarkFleet", name: "fleet, largest size: controller heap in use, everything cached",
		dir: atMost, threshold: 1024, unit: "MiB", tolerance: 0.05},
	fleetRSS: {bench: "BenchmarkFleet", name: "fleet, largest size: controller resident memory",
		dir: atMost, threshold: 1024, unit: "MiB", tolerance: 0.05},
	fleetPerPod: {bench: "BenchmarkFleet", name: "fleet, largest size: controller heap per pod (all of it over the pods)",
		dir: atMost, threshold: 3, unit: "KiB", tolerance: 0.05},
	fleetPass: {bench: "BenchmarkFleet", name: "fleet, largest size: one evaluation pass of every pool, edit to every status written",
		dir: atMost, threshold: 1, unit: "s", tolerance: 0.15},
	fleetConsolidateLargest: {bench: "BenchmarkFleet", name: "fleet, largest size: consolidation pass over the largest pool",
		dir: atMost, threshold: 5, unit: "s", tolerance: 0.15},
	fleetConsolidateAll: {bench: "BenchmarkFleet", name: "fleet, largest size: consolidation pass over every pool",
		dir: atMost, threshold: 5, unit: "s", tolerance: 0.15},
	fleetDoctor: {bench: "BenchmarkFleet", name: "fleet, largest size: sluice doctor over the whole cluster",
		dir: atMost, threshold: 10, unit: "s", tolerance: 0.15},
	fleetStatus: {bench: "BenchmarkFleet", name: "fleet, largest size: sluice status",
		dir: atMost, threshold: 2, unit: "s", tolerance: 0.15},
	fleetIdleWrites: {bench: "BenchmarkFleet", name: "fleet, largest size: controller API writes in 20 s idle",
		dir: atMost, threshold: 0, unit: "writes", best: "0"},
	// BenchmarkDriftAtScale; issue 38 set each of these ("within 1.5× its
	// lower bound ... with the auditor clean", "p99 ≤ 1 s", "idle writes 0
	// and reads ≤ 1/s"); old nodes out at once is the budget, 10 % of
	// 1,000.
	driftScaleRatio: {bench: "BenchmarkDriftAtScale", name: "drift at scale: wall time over its lower bound",
		dir: atMost, threshold: 1.5, unit: "×", tolerance: 0.15,
		best: "1×, the larger of ceil(1000/100) rounds × (5s boot + 3s exit) and the pods to move over the sandbox's deletions a second"},
	driftScaleOut: {bench: "BenchmarkDriftAtScale", name: "drift at scale: old nodes out of service at once, most",
		dir: atMost, threshold: 100, unit: "nodes"},
	driftScaleSlot: {bench: "BenchmarkDriftAtScale", name: "drift at scale: slot freed -> next node marked, p99",
		dir: atMost, threshold: 1, unit: "s", tolerance: 0.15, best: "the controller's watch delay and one pool pass"},
	driftScaleIdleWrites: {bench: "BenchmarkDriftAtScale", name: "drift at scale: controller API writes in an idle minute",
		dir: atMost, threshold: 0, unit: "writes"},
	driftScaleIdleReads: {bench: "BenchmarkDriftAtScale", name: "drift at scale: controller API reads while idle",
		dir: atMost, threshold: 1, unit: "reads/s"},
	driftScaleAudit: {bench: "BenchmarkDriftAtScale", name: "drift at scale: promises the auditor saw broken",
		dir: atMost, threshold: 0, unit: "violations"},
	// Also on BenchmarkDriftAtScale's sandbox; issue 39 set both ("on the
	// 1,000-node sandbox it renders within 1 s of a change and adds no API
	// load beyond its watches").
	topRender: {bench: "BenchmarkDriftAtScale", name: "sluice top at scale: a change written -> on the screen, p99",
		dir: atMost, threshold: 1, unit: "s", tolerance: 0.15, best: "the watch's delay and one screen (Snapshot, Build, Lines)"},
	topRequests: {bench: "BenchmarkDriftAtScale", name: "sluice top at scale: requests that are neither a LIST nor a WATCH",
		dir: atMost, threshold: 0, unit: "requests", best: "0"},
	// BenchmarkDriftVersusKarpenter (issue 38: "drift beside Karpenter ...
	// side by side"); the bound is the drift at scale's, and sluice is to
	// be no slower than Karpenter.
	driftSideRatio: {bench: "BenchmarkDriftVersusKarpenter", name: "drift side by side: sluice's wall time over its lower bound",
		dir: atMost, threshold: 1.5, unit: "×", tolerance: 0.15, best: "1×, ceil(200/20) rounds × (5s boot + 3s exit)"},
	driftSideVersus: {bench: "BenchmarkDriftVersusKarpenter", name: "drift side by side: sluice's time to turn the pool over, over Karpenter's",
		dir: atMost, threshold: 1, unit: "×", tolerance: 0.15},
}

// limit is the threshold moved by the tolerance, the last value that passes.
func (t benchTarget) limit() float64 {
	slack := math.Abs(t.threshold) * t.tolerance
	if t.dir == atLeast {
		return t.threshold - slack
	}
	return t.threshold + slack
}

// met says whether v passes; NaN never does.
func (t benchTarget) met(v float64) bool {
	switch t.dir {
	case atMost:
		return v <= t.limit()
	case atLeast:
		return v >= t.limit()
	}
	return false
}

// want is the target as a table's target column shows it: "≤ 3s".
func (t benchTarget) want() string { return t.sign() + " " + t.show(t.threshold) }

func (t benchTarget) sign() string {
	if t.dir == atLeast {
		return "≥"
	}
	return "≤"
}

// show prints v in the target's unit, to three significant figures.
func (t benchTarget) show(v float64) string {
	var n string
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		n = strconv.FormatFloat(v, 'f', -1, 64)
	case v == math.Trunc(v) || math.Abs(v) >= 100:
		n = strconv.FormatFloat(v, 'f', 0, 64)
	default:
		n = strconv.FormatFloat(v, 'g', 3, 64)
	}
	switch t.unit {
	case "s", "%", "×":
		return n + t.unit
	}
	return n + " " + t.unit
}

// verdict is the line that judges v, measured as detail says (empty, or
// "median of 3: ..."), and whether it passed.
func (t benchTarget) verdict(v float64, detail string) (string, bool) {
	value := t.show(v)
	if detail != "" {
		value += " (" + detail + ")"
	}
	terms := "no tolerance"
	if t.tolerance > 0 {
		terms = fmt.Sprintf("tolerance %g%%", 100*t.tolerance)
	}
	if t.best != "" {
		terms += "; best possible: " + t.best
	}
	ok := t.met(v)
	var judged string
	switch {
	case t.dir == atMost && v <= t.threshold, t.dir == atLeast && v >= t.threshold:
		judged = fmt.Sprintf("%s %s (%s): PASS", value, t.want(), terms)
	case ok:
		judged = fmt.Sprintf("%s, past %s but %s %s (%s): PASS", value, t.show(t.threshold), t.sign(), t.show(t.limit()), terms)
	case t.tolerance > 0:
		judged = fmt.Sprintf("%s, not %s %s (%s with %s): MISS", value, t.sign(), t.show(t.limit()), t.show(t.threshold), terms)
	default:
		judged = fmt.Sprintf("%s, not %s (%s): MISS", value, t.want(), terms)
	}
	return "verdict: " + t.name + ": " + judged, ok
}

// benchTB is what a scorecard needs of its benchmark; testing.TB has it.
type benchTB interface {
	Helper()
	Name() string
	Errorf(format string, args ...any)
}

// scorecard collects one benchmark's figures and judges them against its
// targets. A benchmark makes one before its b.N loop, adds what it measures
// (every run of a figure it measures several times) and calls judge once
// after the loop.
type scorecard struct {
	tb      benchTB
	out     io.Writer
	bench   string // tb's name up to the sub-benchmark
	load    func() string
	start   string // the load when the scorecard was made
	samples map[figure][]float64
	skipped map[figure]string
}

func newScorecard(b *testing.B) *scorecard {
	b.Helper()
	return startScorecard(b, os.Stdout, loadavg)
}

func startScorecard(tb benchTB, out io.Writer, load func() string) *scorecard {
	bench, _, _ := strings.Cut(tb.Name(), "/")
	return &scorecard{tb: tb, out: out, bench: bench, load: load, start: load(),
		samples: map[figure][]float64{}, skipped: map[figure]string{}}
}

// target is f's entry in benchTargets.
func (s *scorecard) target(f figure) benchTarget {
	if f < 0 || f >= figures {
		return benchTarget{}
	}
	return benchTargets[f]
}

// want is f's target as a table's target column shows it.
func (s *scorecard) want(f figure) string { return s.target(f).want() }

// add records measurements of f; judge takes their median.
func (s *scorecard) add(f figure, samples ...float64) {
	s.tb.Helper()
	if t := s.target(f); t.bench != s.bench {
		s.tb.Errorf("figure %d (%q) is a target of %q, not of %s", f, t.name, t.bench, s.bench)
		return
	}
	s.samples[f] = append(s.samples[f], samples...)
}

// skip says why this run does not measure f; judge prints it instead of a
// verdict, and does not fail the benchmark for it.
func (s *scorecard) skip(f figure, why string) {
	s.tb.Helper()
	if t := s.target(f); t.bench != s.bench {
		s.tb.Errorf("figure %d (%q) is a target of %q, not of %s", f, t.name, t.bench, s.bench)
		return
	}
	s.skipped[f] = why
}

// judge prints the machine's load and a verdict line for each target of the
// benchmark, and fails the benchmark for each one missed or not measured.
func (s *scorecard) judge() {
	s.tb.Helper()
	fmt.Fprintf(s.out, "\nverdicts of %s (load average over 1, 5, 15 min: %s at the start, %s at the end)\n", s.tb.Name(), s.start, s.load())
	judged := 0
	for f := range figures {
		t := benchTargets[f]
		if t.bench != s.bench {
			continue
		}
		judged++
		samples := s.samples[f]
		if len(samples) == 0 {
			if why, ok := s.skipped[f]; ok {
				fmt.Fprintf(s.out, "verdict: %s: not measured, %s: no verdict\n", t.name, why)
				continue
			}
			fmt.Fprintf(s.out, "verdict: %s: not measured: MISS\n", t.name)
			s.tb.Errorf("%s: not measured", t.name)
			continue
		}
		detail := ""
		if len(samples) > 1 {
			sorted := slices.Sorted(slices.Values(samples))
			shown := make([]string, len(sorted))
			for i, v := range sorted {
				shown[i] = t.show(v)
			}
			detail = fmt.Sprintf("median of %d: %s", len(samples), strings.Join(shown, " "))
		}
		line, ok := t.verdict(median(samples), detail)
		fmt.Fprintln(s.out, line)
		if !ok {
			s.tb.Errorf("%s", strings.TrimPrefix(line, "verdict: "))
		}
	}
	if judged == 0 {
		fmt.Fprintf(s.out, "verdict: %s has no target; it only reports\n", s.bench)
	}
}

// median is the middle of xs, or the mean of the two middles.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}
