package drain

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

func TestOptionsValidate(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		opts Options
		errs []string // each must appear; none means valid
	}{
		{"zero value", Options{}, nil},
		{"negative grace", Options{GracePeriodSeconds: ptr.To[int64](-1)}, []string{"--grace-period -1: use -1 for each pod's own, or 0 and up"}},
		{"ignore and evict daemonsets", Options{IgnoreDaemonSets: true, EvictDaemonSets: true},
			[]string{"--ignore-daemonsets and --evict-daemonsets contradict each other: choose one"}},
		{"negative timeout", Options{Timeout: -time.Second}, []string{"--timeout -1s: must not be negative"}},
		{"deadline past", Options{Deadline: now}, []string{"--deadline 2026-11-21T09:00:00Z is already past"}},
		{"deadline ahead", Options{Deadline: now.Add(time.Minute), OnDeadline: OnDeadlineStop}, nil},
		{"unknown on-deadline", Options{OnDeadline: "panic"}, []string{`--on-deadline "panic": use delete or stop`}},
		{"negative parallel and in-flight", Options{Parallel: -1, MaxInFlight: -2},
			[]string{"--parallel -1: must be at least 1", "--max-in-flight -2: must be at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate(now)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate: %q, want it to say %q", err, want)
				}
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	var o Options
	if err := o.Validate(time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if o.OnDeadline != OnDeadlineDelete || o.Parallel != 1 || o.MaxInFlight != 50 || o.PodSelector == nil || !o.PodSelector.Empty() || o.Holder != "sluice" {
		t.Errorf("defaults %+v", o)
	}
}

func TestStopAtIsTheEarlierOfTimeoutAndDeadline(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		deadline time.Time
		want     time.Time
	}{
		{"neither", 0, time.Time{}, time.Time{}},
		{"timeout", time.Hour, time.Time{}, start.Add(time.Hour)},
		{"deadline", 0, start.Add(time.Minute), start.Add(time.Minute)},
		{"deadline first", time.Hour, start.Add(time.Minute), start.Add(time.Minute)},
		{"timeout first", time.Minute, start.Add(time.Hour), start.Add(time.Minute)},
	} {
		o := Options{Timeout: tc.timeout, Deadline: tc.deadline}
		if got := o.stopAt(start); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
