// Package bench holds sluice's benchmarks. They measure, they do not judge:
// each prints its figures next to what they compare with, and `make bench`
// runs them once (-benchtime 1x), since each builds a whole cluster.
package bench
