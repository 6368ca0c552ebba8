package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// drainFlags are `sluice drain`'s flags: kubectl drain's, then sluice's own.
type drainFlags struct {
	client      kube.ClientFlags
	selector    string
	podSelector string
	dryRun      string
	deadline    string
	onDeadline  string
	output      string
	gracePeriod int64
	skipWait    int
	timeline    string
	opts        drain.Options
}

func newDrainCommand() *cobra.Command {
	f := &drainFlags{}
	cmd := &cobra.Command{
		Use:   "drain NODE... | -l SELECTOR",
		Short: "Cordon nodes and evict their pods, within budgets and deadlines, explaining every blocker",
		Long: `Drain cordons each node and evicts its pods through the Eviction API, honouring
PodDisruptionBudgets. It takes kubectl drain's flags and adds its own: --deadline to finish
before a node goes away, --parallel to drain several nodes under one shared budget.

Pods that cannot leave are reported with a reason code (PDBBlocked, PDBDeadlock, MultiplePDBs,
DoNotDisrupt, Unreplicated, LocalStorage, DaemonSetPod, ...) and what to change. A drain that can
never finish (a budget that allows no eviction, a pod with no controller and no --force) evicts
nothing and does not cordon.

Exit status: 0 every node drained, 3 a pod could not leave, 1 an error.`,
		Example: `  # Drain a node, leaving DaemonSet pods in place
  sluice drain aks-user-12345678-vmss000000 --ignore-daemonsets

  # A spot node goes away in 30 seconds: give every pod what grace fits
  sluice drain aks-spot-12345678-vmss000001 --ignore-daemonsets --deadline 30s

  # Drain a whole pool, five nodes at a time, as JSON
  sluice drain -l kubernetes.azure.com/agentpool=spot --ignore-daemonsets --parallel 5 -o json

  # What would happen, budgets included, without touching anything
  sluice drain -l agentpool=user --ignore-daemonsets --dry-run

  # Keep a picture of the drain: a lane per node, a bar per pod, blockers and the deadline
  sluice drain -l agentpool=spot --ignore-daemonsets --deadline 2m --timeline drain.html`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDrain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args)
		},
	}
	fs := cmd.Flags()
	f.client.AddFlags(fs)
	fs.StringVarP(&f.selector, "selector", "l", "", "drain the nodes matching this label selector")
	fs.BoolVar(&f.opts.IgnoreDaemonSets, "ignore-daemonsets", false, "leave DaemonSet-managed pods on the node")
	fs.BoolVar(&f.opts.EvictDaemonSets, "evict-daemonsets", false, "evict DaemonSet pods too, last, after every other pod (their DaemonSet may recreate them)")
	fs.BoolVar(&f.opts.DeleteEmptyDirData, "delete-emptydir-data", false, "evict pods using emptyDir volumes (their data is lost)")
	// kubectl's old name for it, which kubectl 1.34 no longer takes: old
	// scripts keep working, and are told the new name.
	fs.BoolVar(&f.opts.DeleteEmptyDirData, "delete-local-data", false, "evict pods using emptyDir volumes")
	_ = fs.MarkDeprecated("delete-local-data", "use --delete-emptydir-data")
	fs.IntVar(&f.skipWait, "skip-wait-for-delete-timeout", 0, "stop waiting for a pod terminating for longer than this many seconds (a node whose kubelet is gone); 0 waits for every pod")
	fs.Int64Var(&f.opts.ChunkSize, "chunk-size", 500, "list pods and nodes in pages of this many; 0 lists all at once")
	fs.BoolVar(&f.opts.Force, "force", false, "evict pods no controller manages (nothing recreates them)")
	fs.Int64Var(&f.gracePeriod, "grace-period", -1, "seconds each pod gets to terminate; -1 uses the pod's own")
	fs.DurationVar(&f.opts.Timeout, "timeout", 0, "give up after this long; 0 waits while progress is possible")
	fs.StringVar(&f.podSelector, "pod-selector", "", "only evict pods matching this label selector")
	fs.BoolVar(&f.opts.DisableEviction, "disable-eviction", false, "delete pods instead of evicting them, bypassing PodDisruptionBudgets")
	fs.StringVar(&f.dryRun, "dry-run", "none", `"client" (or "server") simulates the whole drain, budgets included, and changes nothing`)
	fs.Lookup("dry-run").NoOptDefVal = "client"
	fs.StringVar(&f.deadline, "deadline", "", "finish before this: a duration (30s) or a time (RFC 3339); grace periods are shortened to fit")
	fs.StringVar(&f.onDeadline, "on-deadline", "delete", "a pod a budget still holds near the deadline: delete (with the grace left) or stop")
	fs.IntVar(&f.opts.Parallel, "parallel", 1, "nodes drained at once; budgets are shared across them")
	fs.IntVar(&f.opts.MaxInFlight, "max-in-flight", 50, "eviction requests outstanding at once")
	fs.StringVarP(&f.output, "output", "o", "text", outputHelp)
	fs.StringVar(&f.timeline, "timeline", "", "write the drain as one self-contained HTML page to this file: a lane per node, a bar per pod from eviction to gone, blockers and the deadline marked")
	return cmd
}

// toOptions validates the flags into drain options.
func (f *drainFlags) toOptions(now time.Time, args []string) (drain.Options, outputFormat, error) {
	opts := f.opts
	format, err := parseOutput(f.output)
	if err != nil {
		return opts, "", err
	}
	if len(args) > 0 && f.selector != "" {
		return opts, "", fmt.Errorf("name nodes or give --selector, not both")
	}
	if len(args) == 0 && f.selector == "" {
		return opts, "", fmt.Errorf("name the nodes to drain, or select them with -l/--selector")
	}
	switch f.dryRun {
	case "none", "":
	case "client", "server":
		opts.DryRun = true
	default:
		return opts, "", fmt.Errorf(`--dry-run %q: use "client" (or "server"; both simulate the drain client-side)`, f.dryRun)
	}
	if f.selector != "" {
		if _, err := parseSelector("selector", f.selector); err != nil {
			return opts, "", err
		}
	}
	if f.podSelector != "" {
		sel, err := parseSelector("pod-selector", f.podSelector)
		if err != nil {
			return opts, "", err
		}
		opts.PodSelector = sel
	}
	if f.deadline != "" {
		dl, err := parseDeadline(f.deadline, now)
		if err != nil {
			return opts, "", err
		}
		opts.Deadline = dl
	}
	if f.gracePeriod != -1 {
		opts.GracePeriodSeconds = &f.gracePeriod
	}
	// The library reads zero as "the default"; a person who types 0 means
	// none at all, which would never drain: refused, as negative values are.
	if opts.Parallel < 1 {
		return opts, "", fmt.Errorf("--parallel %d: must be at least 1", opts.Parallel)
	}
	if opts.MaxInFlight < 1 {
		return opts, "", fmt.Errorf("--max-in-flight %d: must be at least 1", opts.MaxInFlight)
	}
	if err := checkTimelinePath(f.timeline); err != nil {
		return opts, "", err
	}
	opts.SkipWaitForDeleteTimeout = time.Duration(f.skipWait) * time.Second
	opts.OnDeadline = drain.DeadlineAction(f.onDeadline)
	host, _ := os.Hostname()
	opts.Holder = "sluice drain@" + host
	// Validate fills defaults in: call it before opts is copied out.
	err = opts.Validate(now)
	return opts, format, err
}

// parseDeadline reads a duration from now or an absolute RFC 3339 time.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--deadline %s: must be in the future", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--deadline %q: give a duration (30s, 2m) or a time (2026-11-21T10:00:00Z)", s)
	}
	return t, nil
}

func runDrain(ctx context.Context, out, errOut io.Writer, f *drainFlags, args []string) error {
	clk := clock.RealClock{}
	opts, format, err := f.toOptions(clk.Now(), args)
	if err != nil {
		return err
	}
	// The first contact, and each watch's first list, wait no longer than
	// --request-timeout (30 s when not given), nor past --timeout or
	// --deadline.
	opts.ListTimeout = f.client.ContactTimeout()
	contact := opts.ListTimeout
	if opts.Timeout > 0 {
		contact = min(contact, opts.Timeout)
	}
	if !opts.Deadline.IsZero() {
		contact = min(contact, max(opts.Deadline.Sub(clk.Now()), time.Millisecond))
	}
	client, _, err := f.client.ClientWithin(ctx, contact)
	if err != nil {
		return err
	}
	nodes := args
	if f.selector != "" {
		if nodes, err = nodesMatching(ctx, client, f.selector, opts.ChunkSize); err != nil {
			return err
		}
	}
	progress := newProgressPrinter(errOut, clk)
	hooks := drain.Hooks{Observer: progress}
	var steps *timeline.Recorder
	if f.timeline != "" {
		steps = &timeline.Recorder{}
		hooks.Observer = drain.ObserverFunc(func(p drain.Progress) { progress.Observe(p); steps.Observe(p) })
	}
	if !opts.DryRun {
		hooks.Recorder = kube.NewRecorder(client, clk, "sluice-drain")
	}
	d, err := drain.New(client, clk, opts, hooks)
	if err != nil {
		return err
	}
	stopProgress := progress.start()
	report, err := d.Drain(ctx, nodes)
	stopProgress()
	if report == nil {
		return fmt.Errorf("draining: %w", err)
	}
	if format.structured() {
		if encErr := writeStructured(out, format, report); encErr != nil {
			return encErr
		}
	} else {
		writeReport(out, report, format == outputWide)
	}
	// The picture comes after the report: failing to write it loses
	// nothing else, and the drain's own outcome decides the exit status.
	var pictureErr error
	if steps != nil {
		if pictureErr = writeTimeline(f.timeline, "sluice drain "+describeNodes(nodes), steps, report); pictureErr == nil {
			fmt.Fprintf(errOut, "timeline: %s\n", f.timeline)
		}
	}
	switch {
	case err != nil:
		return errors.Join(fmt.Errorf("draining: %w", err), pictureErr)
	case report.Failed():
		return exitError{code: ExitError, err: errors.Join(errors.New("the drain could not run on some nodes (see the report)"), pictureErr)}
	case !report.Drained():
		return exitError{code: ExitBlocked, err: errors.Join(errors.New("some pods could not leave (see the report)"), pictureErr)}
	}
	return pictureErr
}

// parseSelector reads the label selector given to --flag (selector,
// pod-selector) as the API server reads it; the error names the flag.
func parseSelector(flag, value string) (labels.Selector, error) {
	sel, err := labels.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, value, err)
	}
	return sel, nil
}

// nodesMatching lists the nodes the selector picks, in pages of chunk (all
// at once when 0), as kubectl's --chunk-size does.
func nodesMatching(ctx context.Context, client kubernetes.Interface, selector string, chunk int64) ([]string, error) {
	if _, err := parseSelector("selector", selector); err != nil {
		return nil, err
	}
	var names []string
	opts := metav1.ListOptions{LabelSelector: selector, Limit: chunk}
	for {
		list, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no nodes match %q", selector)
	}
	return names, nil
}

// exitError carries an exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// ExitCode is the process exit status for this error.
func (e exitError) ExitCode() int { return e.code }
