package drain

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/ownership"
	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/labels"
)

// DeadlineAction is what to do with a pod still held near the deadline.
type DeadlineAction string

// Deadline actions.
const (
	// OnDeadlineDelete deletes a held pod with the longest grace still possible.
	OnDeadlineDelete DeadlineAction = "delete"
	// OnDeadlineStop leaves it and reports it.
	OnDeadlineStop DeadlineAction = "stop"
)

// Options are a drain's settings; the zero value plus Validate's defaults
// behaves like `kubectl drain` with no flags.
type Options struct {
	// IgnoreDaemonSets leaves DaemonSet pods on the node instead of refusing the drain.
	IgnoreDaemonSets bool
	// EvictDaemonSets evicts DaemonSet pods in a last wave, after every other
	// pod has gone, so node agents (log shippers, monitoring) shut down
	// gracefully and see the rest leave. Their DaemonSet may recreate them.
	EvictDaemonSets bool
	// DeleteEmptyDirData evicts pods with emptyDir volumes; their data is lost.
	DeleteEmptyDirData bool
	// Force evicts pods no controller manages (nothing recreates them), and
	// DaemonSet pods whose DaemonSet is gone.
	Force bool
	// GracePeriodSeconds overrides each pod's terminationGracePeriodSeconds;
	// nil uses the pod's own.
	GracePeriodSeconds *int64
	// Timeout bounds the whole drain; zero waits as long as it takes.
	Timeout time.Duration
	// SkipWaitForDeleteTimeout, when positive, stops waiting for a pod that
	// has been terminating for longer (kubectl's
	// --skip-wait-for-delete-timeout): one already terminating that long is
	// skipped, and an evicted one is not waited for past it. For nodes whose
	// kubelet is gone, where pods never finish terminating.
	SkipWaitForDeleteTimeout time.Duration
	// ListTimeout bounds the first list of each watch the drain starts (the
	// budgets, a node's pods), within Timeout and Deadline; zero: only they
	// and the context bound it. A list refused for good (forbidden) fails at
	// once whatever the bound.
	ListTimeout time.Duration
	// ChunkSize lists pods and nodes in pages of this many (kubectl's
	// --chunk-size); zero lists all at once.
	ChunkSize int64
	// Deadline is when the nodes go away (a spot preemption, a maintenance
	// window); zero means none. It also bounds the drain.
	Deadline time.Time
	// OnDeadline says what to do with pods still held when the deadline nears.
	OnDeadline DeadlineAction
	// PodSelector limits the drain to matching pods; nil means all.
	PodSelector labels.Selector
	// PodFilter, when set, further limits the drain to the pods it accepts
	// (for rules a label selector cannot say, such as "either label").
	PodFilter func(*corev1.Pod) bool
	// DisableEviction deletes pods instead of evicting them, bypassing
	// PodDisruptionBudgets.
	DisableEviction bool
	// DryRun reports what would happen and changes nothing.
	DryRun bool
	// Parallel is how many nodes drain at once; default 1.
	Parallel int
	// MaxInFlight bounds the evictions outstanding at once across all nodes;
	// default 50.
	MaxInFlight int
	// Holder names this drain on the node's claim annotation (a host, a pod).
	Holder string
	// Shared, when set, gives the drain a view of pods and budgets, a budget
	// ledger and an eviction limit it shares with every other drain given the
	// same Shared (MaxInFlight is then the Shared's); nil: the drain watches
	// for itself.
	Shared *Shared
	// CordonOwner is recorded on a node this drain cordons
	// (contract.AnnotationCordonedBy), so that only the same owner uncordons it;
	// default ownership.OwnerCLI.
	CordonOwner string
	// Last picks pods to evict after every other pod, DaemonSet pods
	// included: the drainer's own pod when it runs on the node it drains, so
	// it sees the drain through before it goes.
	Last func(*corev1.Pod) bool
}

// Validate checks the options and fills in defaults. Its errors name the flag
// to change.
func (o *Options) Validate(now time.Time) error {
	var errs []error
	if o.GracePeriodSeconds != nil && *o.GracePeriodSeconds < 0 {
		errs = append(errs, fmt.Errorf("--grace-period %d: use -1 for each pod's own, or 0 and up", *o.GracePeriodSeconds))
	}
	if o.IgnoreDaemonSets && o.EvictDaemonSets {
		errs = append(errs, errors.New("--ignore-daemonsets and --evict-daemonsets contradict each other: choose one"))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must not be negative", o.Timeout))
	}
	if o.ListTimeout < 0 {
		errs = append(errs, fmt.Errorf("list timeout %s: must not be negative", o.ListTimeout))
	}
	if o.SkipWaitForDeleteTimeout < 0 {
		errs = append(errs, fmt.Errorf("--skip-wait-for-delete-timeout %s: must not be negative (0 waits for every pod)", o.SkipWaitForDeleteTimeout))
	}
	if o.ChunkSize < 0 {
		errs = append(errs, fmt.Errorf("--chunk-size %d: must not be negative (0 lists all at once)", o.ChunkSize))
	}
	if !o.Deadline.IsZero() && !o.Deadline.After(now) {
		errs = append(errs, fmt.Errorf("--deadline %s is already past", o.Deadline.Format(time.RFC3339)))
	}
	switch o.OnDeadline {
	case "":
		o.OnDeadline = OnDeadlineDelete
	case OnDeadlineDelete, OnDeadlineStop:
	default:
		errs = append(errs, fmt.Errorf("--on-deadline %q: use delete or stop", o.OnDeadline))
	}
	if o.Parallel == 0 {
		o.Parallel = 1
	}
	if o.Parallel < 0 {
		errs = append(errs, fmt.Errorf("--parallel %d: must be at least 1", o.Parallel))
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 50
	}
	if o.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("--max-in-flight %d: must be at least 1", o.MaxInFlight))
	}
	if o.PodSelector == nil {
		o.PodSelector = labels.Everything()
	}
	if o.Holder == "" {
		o.Holder = "sluice"
	}
	if o.CordonOwner == "" {
		o.CordonOwner = ownership.OwnerCLI
	}
	return errors.Join(errs...)
}

// stopAt is when the drain gives up: the earlier of deadline and timeout.
func (o *Options) stopAt(start time.Time) time.Time {
	var end time.Time
	if o.Timeout > 0 {
		end = start.Add(o.Timeout)
	}
	if !o.Deadline.IsZero() && (end.IsZero() || o.Deadline.Before(end)) {
		end = o.Deadline
	}
	return end
}
