package cli

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// FuzzSelector reads arbitrary -l/--selector and --pod-selector values.
// Nothing may panic; a refused one says which flag; an accepted one prints
// (as sluice reports it) a selector that reads back the same, and selects
// the same labels.
func FuzzSelector(f *testing.F) {
	for _, seed := range []string{
		"pool=gpu", "pool==gpu,zone!=eu-west-1a", "app in (a,b)", "tier notin (db), !canary", "kubernetes.io/os",
		"!node-role.kubernetes.io/control-plane", "sluice.dev/nodepool=gpu,karpenter.sh/capacity-type in (spot)",
		"a=", "a in ()", "a in (", "a=b=c", "pool in gpu", "x>1", "x < 3", ",", " ", "", "a=b,", "=b", "A.b/c-d_e=f.G-h_i",
		"a.b/c/d=e", strings.Repeat("k", 64) + "=v", "k=" + strings.Repeat("v", 64), "a=\x00",
	} {
		f.Add(seed)
	}
	sets := []labels.Set{
		{}, {"pool": "gpu"}, {"pool": "gpu", "zone": "eu-west-1a"}, {"app": "a", "tier": "web"}, {"kubernetes.io/os": "linux"},
		{"a": ""}, {"x": "2"}, {"x": "5"},
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, flag := range []string{"selector", "pod-selector"} {
			sel, err := parseSelector(flag, value)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "--"+flag+" ") {
					t.Fatalf("--%s %q: error %q does not name the flag", flag, value, err)
				}
				continue
			}
			printed := sel.String()
			again, err := parseSelector(flag, printed)
			if err != nil || again.String() != printed {
				t.Fatalf("--%s %q reads as %q, which reads back as %v, %v", flag, value, printed, again, err)
			}
			for _, set := range sets {
				if sel.Matches(set) != again.Matches(set) {
					t.Fatalf("--%s %q and %q disagree on %v", flag, value, printed, set)
				}
			}
		}
	})
}

// FuzzDrainFlags validates arbitrary values of sluice drain's string flags.
// Nothing may panic; accepted flags make options a drain can run with: a
// deadline in the future, a known deadline action, a pod selector, and a
// dry run exactly when one was asked for.
func FuzzDrainFlags(f *testing.F) {
	for _, seed := range []struct {
		selector, podSelector, deadline, dryRun, onDeadline, output string
		grace                                                       int64
	}{
		{"pool=gpu", "", "", "none", "delete", "text", -1},
		{"", "app in (web,api)", "30s", "client", "stop", "json", 30},
		{"", "", "2026-11-21T10:00:00Z", "server", "delete", "", 0},
		{"", "", "2026-11-21T07:00:00+01:00", "", "", "yaml", -2},
		{"a in (", "", "-5m", "maybe", "panic", "text", -1},
		{"", "", "1e3h", "none", "Delete", "text", -1},
		{"", "", "9223372036s", "none", "delete", "text", -1},
	} {
		f.Add(seed.selector, seed.podSelector, seed.deadline, seed.dryRun, seed.onDeadline, seed.output, seed.grace)
	}
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, selector, podSelector, deadline, dryRun, onDeadline, output string, grace int64) {
		flags := drainFlags{selector: selector, podSelector: podSelector, deadline: deadline, dryRun: dryRun,
			onDeadline: onDeadline, output: output, gracePeriod: grace}
		var args []string
		if selector == "" {
			args = []string{"n1"}
		}
		opts, _, err := flags.toOptions(now, args)
		if err != nil {
			return
		}
		switch {
		case deadline != "" && !opts.Deadline.After(now), deadline == "" && !opts.Deadline.IsZero():
			t.Fatalf("--deadline %q: deadline %s", deadline, opts.Deadline)
		case opts.OnDeadline != "delete" && opts.OnDeadline != "stop":
			t.Fatalf("--on-deadline %q: %q", onDeadline, opts.OnDeadline)
		case opts.PodSelector == nil || podSelector == "" && !opts.PodSelector.Empty():
			t.Fatalf("--pod-selector %q: %v", podSelector, opts.PodSelector)
		case opts.DryRun != (dryRun == "client" || dryRun == "server"):
			t.Fatalf("--dry-run %q: dry run %t", dryRun, opts.DryRun)
		case grace != -1 && (opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != grace), grace < -1:
			t.Fatalf("--grace-period %d: %v", grace, opts.GracePeriodSeconds)
		}
	})
}
