package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RepairSpec says which nodes of the pool are broken and how sluice repairs
// them: a reboot first where the provider can, then a replacement
// (docs/health.md).
type RepairSpec struct {
	// Conditions are the node conditions that mean the node is broken,
	// each for how long it is tolerated. Left out: Ready False or Unknown,
	// and node-problem-detector's KernelDeadlock and ReadonlyFilesystem
	// True, each for 10m.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Conditions []RepairCondition `json:"conditions,omitempty"`

	// FlapGrace is how long a broken node must look healthy before its
	// clock starts again: a condition that comes and goes faster than this
	// does not put off the repair (default 5m).
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="repair.flapGrace must be a duration such as 5m"
	FlapGrace *metav1.Duration `json:"flapGrace,omitempty"`

	// MaxUnhealthy is the circuit breaker: when more of the pool's nodes
	// than this are unhealthy at once (a number, or a percentage of the
	// pool rounded up), nothing is repaired: a failure that wide is the
	// network's, a zone's or the control plane's, and replacing nodes would
	// not mend it. Default 20%.
	//
	// +optional
	// +kubebuilder:default="20%"
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +kubebuilder:validation:MaxLength=10
	MaxUnhealthy string `json:"maxUnhealthy,omitempty"`

	// MaxUnhealthyPerZone is the same breaker for each zone of the pool
	// (topology.kubernetes.io/zone): a zone with more unhealthy nodes than
	// this halts every repair of the pool. Default 20%.
	//
	// +optional
	// +kubebuilder:default="20%"
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +kubebuilder:validation:MaxLength=10
	MaxUnhealthyPerZone string `json:"maxUnhealthyPerZone,omitempty"`

	// Steps are the repair's ladder, in order: Reboot (through the
	// provider, where it can reboot a machine in place) and Replace.
	// Default [Reboot, Replace].
	//
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Steps []RepairStep `json:"steps,omitempty"`

	// RebootTimeout is how long a rebooted node has to become healthy
	// before the next step (default 10m).
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="repair.rebootTimeout must be at least 1m, such as 10m"
	RebootTimeout *metav1.Duration `json:"rebootTimeout,omitempty"`
}

// RepairCondition is one node condition that means the node is broken.
type RepairCondition struct {
	// Type is the condition's type, such as Ready or KernelDeadlock.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// Status is the status that means broken.
	//
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status string `json:"status"`
	// Toleration is how long the node may be so before it is repaired.
	//
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="a repair condition's toleration must be a duration such as 10m"
	Toleration metav1.Duration `json:"toleration"`
}

// RepairStep is a rung of the repair ladder.
//
// +kubebuilder:validation:Enum=Reboot;Replace
type RepairStep string

// Repair steps.
const (
	RepairReboot  RepairStep = "Reboot"
	RepairReplace RepairStep = "Replace"
)

// Repair defaults.
const (
	DefaultRepairToleration    = 10 * time.Minute
	DefaultRepairFlapGrace     = 5 * time.Minute
	DefaultRepairRebootTimeout = 10 * time.Minute
	DefaultMaxUnhealthy        = "20%"
	DefaultRebootTimeout       = 15 * time.Minute
)

// ConditionsOrDefault are the conditions that mean broken.
func (r *RepairSpec) ConditionsOrDefault() []RepairCondition {
	if r != nil && len(r.Conditions) > 0 {
		return r.Conditions
	}
	tol := metav1.Duration{Duration: DefaultRepairToleration}
	return []RepairCondition{
		{Type: string(corev1.NodeReady), Status: string(corev1.ConditionFalse), Toleration: tol},
		{Type: string(corev1.NodeReady), Status: string(corev1.ConditionUnknown), Toleration: tol},
		{Type: "KernelDeadlock", Status: string(corev1.ConditionTrue), Toleration: tol},
		{Type: "ReadonlyFilesystem", Status: string(corev1.ConditionTrue), Toleration: tol},
	}
}

// FlapGraceOrDefault is FlapGrace, 5m when unset.
func (r *RepairSpec) FlapGraceOrDefault() time.Duration {
	if r == nil || r.FlapGrace == nil {
		return DefaultRepairFlapGrace
	}
	return r.FlapGrace.Duration
}

// RebootTimeoutOrDefault is RebootTimeout, 10m when unset.
func (r *RepairSpec) RebootTimeoutOrDefault() time.Duration {
	if r == nil || r.RebootTimeout == nil {
		return DefaultRepairRebootTimeout
	}
	return r.RebootTimeout.Duration
}

// StepsOrDefault is the ladder, [Reboot, Replace] when unset.
func (r *RepairSpec) StepsOrDefault() []RepairStep {
	if r == nil || len(r.Steps) == 0 {
		return []RepairStep{RepairReboot, RepairReplace}
	}
	return r.Steps
}

// Limits are MaxUnhealthy and MaxUnhealthyPerZone, with their defaults.
func (r *RepairSpec) Limits() (pool, zone string) {
	pool, zone = DefaultMaxUnhealthy, DefaultMaxUnhealthy
	if r != nil && r.MaxUnhealthy != "" {
		pool = r.MaxUnhealthy
	}
	if r != nil && r.MaxUnhealthyPerZone != "" {
		zone = r.MaxUnhealthyPerZone
	}
	return pool, zone
}

// RebootSpec says when the pool's nodes may be rebooted for their OS
// (docs/health.md).
type RebootSpec struct {
	// Windows are when reboots may start: each opens when its schedule
	// fires and stays open for its duration. Left out, any time.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Windows []RebootWindow `json:"windows,omitempty"`

	// BlockingPodSelectors hold a node's reboot while a pod on it matches
	// any of them (kured's --blocking-pod-selector).
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	BlockingPodSelectors []metav1.LabelSelector `json:"blockingPodSelectors,omitempty"`

	// Prometheus holds every reboot of the pool while the server has
	// alerts that block (kured's --prometheus-url and alert filter). An
	// unreachable server holds them too.
	//
	// +optional
	Prometheus *PrometheusAlerts `json:"prometheus,omitempty"`

	// Timeout is how long a rebooted node has to be Ready again with its
	// sentinel gone before it is handed to repair (default 15m).
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="reboot.timeout must be at least 1m, such as 15m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// TimeoutOrDefault is Timeout, 15m when unset.
func (r *RebootSpec) TimeoutOrDefault() time.Duration {
	if r == nil || r.Timeout == nil {
		return DefaultRebootTimeout
	}
	return r.Timeout.Duration
}

// WindowBudgets are the reboot windows as scheduled budgets (of no nodes),
// so that the one reading of a budget's schedule serves both.
func (r *RebootSpec) WindowBudgets() []Budget {
	out := make([]Budget, len(r.Windows))
	for i, w := range r.Windows {
		schedule, d := w.Schedule, w.Duration
		out[i] = Budget{Nodes: "0", Schedule: &schedule, Duration: &d, TimeZone: w.TimeZone}
	}
	return out
}

// RebootWindow is when reboots may start.
type RebootWindow struct {
	// Schedule is a cron expression (five fields, or a macro such as
	// @daily) for when the window opens.
	//
	// +required
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5 || self.startsWith('@')",message="a reboot window's schedule must be a cron expression of five fields (minute hour day-of-month month day-of-week), such as '0 2 * * *', or a macro such as @daily"
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open.
	//
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="a reboot window's duration must be at least 1m, such as 4h"
	Duration metav1.Duration `json:"duration"`
	// TimeZone is the IANA time zone the schedule is read in; default UTC.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone *string `json:"timeZone,omitempty"`
}

// PrometheusAlerts is the Prometheus server whose alerts hold reboots.
type PrometheusAlerts struct {
	// URL is the server's base URL, such as http://prometheus.monitoring:9090.
	//
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// AlertFilterRegexp leaves out the alerts whose name matches it (or,
	// with AlertFilterMatchOnly, counts only those).
	//
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	AlertFilterRegexp string `json:"alertFilterRegexp,omitempty"`
	// AlertFilterMatchOnly counts only the alerts AlertFilterRegexp matches.
	//
	// +optional
	AlertFilterMatchOnly bool `json:"alertFilterMatchOnly,omitempty"`
	// FiringOnly counts only firing alerts, not pending ones.
	//
	// +optional
	FiringOnly bool `json:"firingOnly,omitempty"`
}
