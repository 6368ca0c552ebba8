package cli

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/pkg/drain"
)

func TestDrainFlagsToOptions(t *testing.T) {
	now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		flags   drainFlags
		args    []string
		wantErr string
		check   func(t *testing.T, o drain.Options)
	}{
		{name: "defaults", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", dryRun: "none", output: "text"},
			check: func(t *testing.T, o drain.Options) {
				if o.GracePeriodSeconds != nil || o.DryRun || !o.Deadline.IsZero() || o.Parallel != 1 || o.OnDeadline != drain.OnDeadlineDelete {
					t.Errorf("defaults: %+v", o)
				}
			}},
		{name: "grace period and deadline as a duration", args: []string{"n1"}, flags: drainFlags{gracePeriod: 5, deadline: "30s", onDeadline: "stop", dryRun: "none"},
			check: func(t *testing.T, o drain.Options) {
				if o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 5 || !o.Deadline.Equal(now.Add(30*time.Second)) || o.OnDeadline != drain.OnDeadlineStop {
					t.Errorf("got grace %v deadline %s on-deadline %s", o.GracePeriodSeconds, o.Deadline, o.OnDeadline)
				}
			}},
		{name: "deadline as a time", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, deadline: "2026-11-21T08:05:00Z", onDeadline: "delete"},
			check: func(t *testing.T, o drain.Options) {
				if !o.Deadline.Equal(now.Add(5 * time.Minute)) {
					t.Errorf("deadline %s", o.Deadline)
				}
			}},
		{name: "server dry run is simulated", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, dryRun: "server", onDeadline: "delete"},
			check: func(t *testing.T, o drain.Options) {
				if !o.DryRun {
					t.Error("--dry-run=server: want a dry run")
				}
			}},
		{name: "pod selector", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, podSelector: "app in (a,b)", onDeadline: "delete"},
			check: func(t *testing.T, o drain.Options) {
				if !o.PodSelector.Matches(labels.Set{"app": "a"}) || o.PodSelector.Matches(labels.Set{"app": "c"}) {
					t.Errorf("pod selector %s", o.PodSelector)
				}
			}},
		{name: "nodes and selector", args: []string{"n1"}, flags: drainFlags{selector: "a=b", gracePeriod: -1}, wantErr: "not both"},
		{name: "nothing to drain", flags: drainFlags{gracePeriod: -1}, wantErr: "name the nodes"},
		{name: "bad dry run", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, dryRun: "maybe"}, wantErr: `--dry-run "maybe"`},
		{name: "bad deadline", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, deadline: "soon"}, wantErr: "give a duration"},
		{name: "past deadline", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, deadline: "2026-11-21T07:00:00Z", onDeadline: "delete"}, wantErr: "already past"},
		{name: "bad grace", args: []string{"n1"}, flags: drainFlags{gracePeriod: -2, onDeadline: "delete"}, wantErr: "--grace-period -2"},
		{name: "bad on-deadline", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "panic"}, wantErr: "--on-deadline"},
		{name: "bad selector", flags: drainFlags{gracePeriod: -1, selector: "pool in gpu", onDeadline: "delete"}, wantErr: "--selector"},
		{name: "bad pod selector", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, podSelector: "a in (", onDeadline: "delete"}, wantErr: "--pod-selector"},
		{name: "kubectl's wait and paging flags", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", skipWait: 30, opts: drain.Options{ChunkSize: 100}},
			check: func(t *testing.T, o drain.Options) {
				if o.SkipWaitForDeleteTimeout != 30*time.Second || o.ChunkSize != 100 {
					t.Errorf("skip-wait %s chunk-size %d", o.SkipWaitForDeleteTimeout, o.ChunkSize)
				}
			}},
		{name: "negative skip-wait", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", skipWait: -1}, wantErr: "--skip-wait-for-delete-timeout -1s"},
		{name: "negative chunk size", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", opts: drain.Options{ChunkSize: -5}}, wantErr: "--chunk-size -5"},
		{name: "timeline not html", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", timeline: "drain.png"}, wantErr: "name a .html file"},
		{name: "timeline in a missing directory", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", timeline: "/no/such/dir/drain.html"}, wantErr: "directory /no/such/dir does not exist"},
		{name: "no parallel drains", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", opts: drain.Options{Parallel: 0, MaxInFlight: 50}}, wantErr: "--parallel 0: must be at least 1"},
		{name: "no evictions in flight", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete", opts: drain.Options{Parallel: 1, MaxInFlight: 0}}, wantErr: "--max-in-flight 0: must be at least 1"},
		{name: "daemonsets both ways", args: []string{"n1"}, flags: drainFlags{gracePeriod: -1, onDeadline: "delete",
			opts: drain.Options{IgnoreDaemonSets: true, EvictDaemonSets: true}}, wantErr: "contradict"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.flags.opts.Parallel == 0 && tc.flags.opts.MaxInFlight == 0 {
				// The flags' defaults, as cobra sets them.
				tc.flags.opts.Parallel, tc.flags.opts.MaxInFlight = 1, 50
			}
			o, _, err := tc.flags.toOptions(now, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// --delete-local-data, which kubectl 1.34 no longer takes, still works as
// the deprecated name of --delete-emptydir-data, and says so.
func TestDeleteLocalDataIsADeprecatedAlias(t *testing.T) {
	cmd := newDrainCommand()
	var stderr strings.Builder
	cmd.SetErr(&stderr)
	cmd.Flags().SetOutput(&stderr)
	if err := cmd.ParseFlags([]string{"--delete-local-data"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := cmd.Flags().GetBool("delete-emptydir-data"); !v {
		t.Error("--delete-local-data did not turn --delete-emptydir-data on")
	}
	if !strings.Contains(stderr.String(), "deprecated, use --delete-emptydir-data") {
		t.Errorf("no deprecation notice: %q", stderr.String())
	}
	if cmd.Flags().Lookup("delete-local-data").Hidden != true {
		t.Error("the deprecated flag is listed in --help")
	}
}
