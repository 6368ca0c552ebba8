package bench

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestTargetsVerdict(t *testing.T) {
	most := benchTarget{name: "time", dir: atMost, threshold: 3, unit: "s", tolerance: 0.15}
	least := benchTarget{name: "speedup", dir: atLeast, threshold: 5, unit: "×", tolerance: 0.15}
	exact := benchTarget{name: "writes", dir: atMost, threshold: 0, unit: "writes"}
	fewer := benchTarget{name: "evictions", dir: atMost, threshold: -1, unit: "evictions", tolerance: 0.5}
	for _, c := range []struct {
		t    benchTarget
		v    float64
		pass bool
		says string // part of the verdict line
	}{
		{most, 1.84, true, "verdict: time: 1.84s ≤ 3s (tolerance 15%): PASS"},
		{most, 3, true, "3s ≤ 3s"},
		{most, 3.4, true, "3.4s, past 3s but ≤ 3.45s (tolerance 15%): PASS"},
		{most, 3.5, false, "3.5s, not ≤ 3.45s (3s with tolerance 15%): MISS"},
		{most, 0, true, "PASS"},
		{least, 7.9, true, "7.9× ≥ 5× (tolerance 15%): PASS"},
		{least, 4.3, true, "past 5× but ≥ 4.25×"},
		{least, 4.2, false, "4.2×, not ≥ 4.25× (5× with tolerance 15%): MISS"},
		{least, 0, false, "MISS"},
		{exact, 0, true, "0 writes ≤ 0 writes (no tolerance): PASS"},
		{exact, 1, false, "1 writes, not ≤ 0 writes (no tolerance): MISS"},
		{fewer, -18, true, "PASS"},
		{fewer, -0.6, true, "past -1 evictions but ≤ -0.5 evictions"},
		{fewer, 0, false, "MISS"},
		{most, math.NaN(), false, "MISS"},
		{least, math.Inf(1), true, "PASS"},
	} {
		line, pass := c.t.verdict(c.v, "")
		if pass != c.pass || !strings.Contains(line, c.says) {
			t.Errorf("%s at %g: %q (pass %v); want pass %v and %q", c.t.name, c.v, line, pass, c.pass, c.says)
		}
		if want := map[bool]string{true: ": PASS", false: ": MISS"}[c.pass]; !strings.HasSuffix(line, want) {
			t.Errorf("%s at %g: %q does not end in %q", c.t.name, c.v, line, want)
		}
	}
	if got := (benchTarget{dir: atMost, threshold: 1.5, unit: "×", tolerance: 0.15, best: "1×, the lower bound"}).want(); got != "≤ 1.5×" {
		t.Errorf("want() = %q; want %q", got, "≤ 1.5×")
	}
	if line, _ := (benchTarget{name: "x", dir: atMost, threshold: 1.5, unit: "s", tolerance: 0.15, best: "1s"}).verdict(1.2, "median of 3: 1s 1.2s 2s"); !strings.Contains(line, "1.2s (median of 3: 1s 1.2s 2s) ≤ 1.5s (tolerance 15%; best possible: 1s): PASS") {
		t.Errorf("verdict with a median and a bound: %q", line)
	}
}

func TestTargetsMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{2}, 2}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %g; want %g", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is a number")
	}
}

// fakeBench records what a scorecard asks of its benchmark.
type fakeBench struct {
	name   string
	errors []string
}

func (f *fakeBench) Helper()      {}
func (f *fakeBench) Name() string { return f.name }
func (f *fakeBench) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestTargetsScorecard(t *testing.T) {
	load := func() string { return "0.50 0.40 0.30" }
	judge := func(name string, fill func(*scorecard)) (string, []string) {
		var out bytes.Buffer
		fb := &fakeBench{name: name}
		s := startScorecard(fb, &out, load)
		fill(s)
		s.judge()
		return out.String(), fb.errors
	}

	out, errs := judge("BenchmarkDoctor", func(s *scorecard) { s.add(doctorThousandNodes, 2.1, 1.8, 9) })
	if len(errs) != 0 || !strings.Contains(out, "verdict: doctor 1000 nodes/30000 pods: 2.1s (median of 3: 1.8s 2.1s 9s) ≤ 3s") ||
		!strings.Contains(out, "load average over 1, 5, 15 min: 0.50 0.40 0.30 at the start") {
		t.Errorf("a median within its target:\n%s\nerrors %q", out, errs)
	}

	out, errs = judge("BenchmarkDoctor", func(s *scorecard) { s.add(doctorThousandNodes, 3.9) })
	if len(errs) != 1 || !strings.Contains(out, ": MISS") || !strings.Contains(errs[0], "doctor 1000 nodes/30000 pods: 3.9s, not ≤ 3.45s") {
		t.Errorf("a miss must fail the benchmark:\n%s\nerrors %q", out, errs)
	}

	// Sub-benchmarks share their parent's targets; one not measured fails.
	out, errs = judge("BenchmarkDrainTwentyNodes/loaded", func(s *scorecard) { s.add(drainSpeedup, 11, 12, 13) })
	if len(errs) != 1 || !strings.Contains(errs[0], "requests per evicted pod: not measured") || strings.Count(out, "verdict: ") != 2 {
		t.Errorf("a target not measured must fail the benchmark:\n%s\nerrors %q", out, errs)
	}

	out, errs = judge("BenchmarkDoctor", func(s *scorecard) { s.skip(doctorThousandNodes, "no 1000 in the sizes asked for") })
	if len(errs) != 0 || !strings.Contains(out, "not measured, no 1000 in the sizes asked for: no verdict") {
		t.Errorf("a target skipped on purpose says so and passes:\n%s\nerrors %q", out, errs)
	}

	out, errs = judge("BenchmarkDoctor", func(s *scorecard) { s.add(agentMemory, 10); s.add(doctorThousandNodes, 1) })
	if len(errs) != 1 || !strings.Contains(errs[0], "not of BenchmarkDoctor") {
		t.Errorf("another benchmark's figure must be refused:\n%s\nerrors %q", out, errs)
	}

	out, errs = judge("BenchmarkSandboxScale", func(*scorecard) {})
	if len(errs) != 0 || !strings.Contains(out, "BenchmarkSandboxScale has no target") {
		t.Errorf("a benchmark without targets:\n%s\nerrors %q", out, errs)
	}
}

func TestTargetsTable(t *testing.T) {
	benches := benchmarkFuncs(t)
	names := map[string]figure{}
	for f, tg := range benchTargets {
		at := fmt.Sprintf("figure %d (%q)", f, tg.name)
		if tg.name == "" {
			t.Errorf("figure %d has no entry in benchTargets", f)
			continue
		}
		if other, ok := names[tg.name]; ok {
			t.Errorf("%s: the name of figure %d too", at, other)
		}
		names[tg.name] = figure(f)
		if tg.unit == "" {
			t.Errorf("%s: no unit", at)
		}
		if tg.dir != atMost && tg.dir != atLeast {
			t.Errorf("%s: neither at most nor at least", at)
		}
		if math.IsNaN(tg.threshold) || math.IsInf(tg.threshold, 0) {
			t.Errorf("%s: threshold %g", at, tg.threshold)
		}
		if tg.tolerance < 0 || tg.tolerance >= 1 {
			t.Errorf("%s: tolerance %g; want a share from 0 to under 1", at, tg.tolerance)
		}
		if tg.threshold == 0 && tg.tolerance != 0 {
			t.Errorf("%s: a tolerance on a threshold of 0 allows nothing; set none", at)
		}
		if _, ok := benches[tg.bench]; !ok {
			t.Errorf("%s: no benchmark %q in test/bench", at, tg.bench)
		}
	}
}

// Every benchmark judges itself: its body makes a scorecard.
func TestTargetsEveryBenchmarkJudged(t *testing.T) {
	for name, judged := range benchmarkFuncs(t) {
		if !judged {
			t.Errorf("%s makes no scorecard (newScorecard): its figures are never judged", name)
		}
	}
}

// benchmarkFuncs reads the Benchmark functions of this directory and whether
// each one's body calls newScorecard.
func benchmarkFuncs(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Benchmark") {
				continue
			}
			judged := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.Name == "newScorecard" {
					judged = true
				}
				return !judged
			})
			out[fn.Name.Name] = judged
		}
	}
	if len(out) == 0 {
		t.Fatal("no Benchmark function found in test/bench")
	}
	return out
}
