// Package bench holds sluice's benchmarks. Each prints its figures next to
// what they compare with, then judges itself: every target it has is one
// entry of benchTargets (targets_bench_test.go), with its threshold, its
// direction and the noise it tolerates on the shared 2-core machine, and the
// benchmark prints the machine's load and a verdict line per target, PASS or
// MISS. A MISS, or a target not measured, fails the benchmark, so `make
// bench` exits non-zero. `make bench` runs each once (-benchtime 1x), since
// most build a whole cluster; figures a benchmark already measures several
// times are judged by their median. CI does not run the benchmarks.
package bench
