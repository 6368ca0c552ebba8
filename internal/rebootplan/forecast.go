// Package rebootplan forecasts how long the reboots a pool's nodes wait for
// take under its budgets and reboot windows, and names the nodes that will
// wait and why (`sluice plan reboots`). It reads the pool the way the
// NodePool controller's RebootRequired method decides (the one view, the
// same protections and blocking pods), and changes nothing.
package rebootplan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/upgrade"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// recheck is the controller's pace between a node back in service and the
// next one taken (its pass over a pool with reboots under way).
const recheck = 5 * time.Second

// Input is what a forecast reads, at one moment.
type Input struct {
	Pool    *v1alpha1.NodePool
	Members []*corev1.Node
	// Pods are the cluster's pods (those on members are read), PDBs its
	// PodDisruptionBudgets.
	Pods []corev1.Pod
	PDBs []policyv1.PodDisruptionBudget
	// Downtime is how long a reboot keeps a node from Ready.
	Downtime time.Duration
	Now      time.Time
}

// Forecast is the pending reboots of one pool.
type Forecast struct {
	Pool string `json:"pool"`
	// Waiting is how many members asked for a reboot.
	Waiting int `json:"waiting"`
	// PerRound is how many the budget for RebootRequired lets go at once.
	PerRound int      `json:"perRound"`
	Rounds   []Round  `json:"rounds,omitempty"`
	Held     []Held   `json:"held,omitempty"`
	Total    Duration `json:"total"`
	// OneAtATime is how long the same reboots take one node at a time
	// (kured's pace, its check period left out).
	OneAtATime  Duration `json:"oneAtATime"`
	Assumptions []string `json:"assumptions"`
}

// Round is a batch of reboots started together.
type Round struct {
	Start   time.Time `json:"start"`
	Nodes   []string  `json:"nodes"`
	Drain   Duration  `json:"drain"`
	Slowest string    `json:"slowest,omitempty"`
	Reboot  Duration  `json:"reboot"`
}

// Held is a node whose reboot will not start as things stand.
type Held struct {
	Node    string `json:"node"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Duration prints as Go does, in JSON too.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).Round(time.Second).String() }

// MarshalText is the duration as String gives it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Reasons a reboot is held.
const (
	HeldNoRebootSpec = "NoRebootSpec"
	HeldProtected    = "Protected"
	HeldBlockingPod  = "BlockingPod"
	HeldNoBudget     = "NoBudget"
	HeldNoWindow     = "NoWindow"
)

// Predict forecasts the pool's pending reboots: rounds of as many nodes as
// the budget for RebootRequired allows now, longest waiting first, each
// started inside a reboot window, each as long as its slowest drain plus the
// reboot's downtime.
func Predict(in Input) (*Forecast, error) {
	v := disruption.Observe(in.Pool, in.Members, in.Now)
	waiting := disruption.RebootWaiting(in.Members, v.Replacements, in.Now)
	f := &Forecast{Pool: in.Pool.Name, Waiting: len(waiting)}
	f.Assumptions = []string{
		fmt.Sprintf("a reboot keeps a node from Ready for %s", in.Downtime),
		"the rest of the pool stays as it is (no other disruption takes budget meanwhile)",
		"Prometheus alerts are not consulted: a firing alert that blocks delays every round",
	}
	spec := in.Pool.Spec.Reboot
	if spec == nil {
		for _, w := range waiting {
			f.Held = append(f.Held, Held{w.Node.Name, HeldNoRebootSpec, "the pool has no spec.reboot: sluice does not reboot its nodes"})
		}
		return f, nil
	}
	pods := upgrade.PodsByNode(in.Pods)
	pdbs := make([]*policyv1.PodDisruptionBudget, len(in.PDBs))
	for i := range in.PDBs {
		pdbs[i] = &in.PDBs[i]
	}
	var free []*corev1.Node
	for _, w := range waiting {
		if p := disruption.Protected(in.Pool, w.Node, pods[w.Node.Name], in.Now); p != nil {
			f.Held = append(f.Held, Held{w.Node.Name, HeldProtected, p.Message})
			continue
		}
		why, err := disruption.BlockingPod(spec, pods[w.Node.Name])
		if err != nil {
			return nil, err
		}
		if why != "" {
			f.Held = append(f.Held, Held{w.Node.Name, HeldBlockingPod, why})
			continue
		}
		free = append(free, w.Node)
	}
	a, err := v.Allowed(v1alpha1.ReasonRebootRequired, in.Now)
	if err != nil {
		return nil, err
	}
	f.PerRound = a.Nodes
	if a.Nodes < 1 && len(free) > 0 {
		for _, n := range free {
			f.Held = append(f.Held, Held{n.Name, HeldNoBudget, fmt.Sprintf("the budgets allow no RebootRequired disruption now (%d of the pool's %d nodes out of service)", v.Disrupting, v.Size)})
		}
		return f, nil
	}
	t := in.Now
	for len(free) > 0 {
		open, at, err := disruption.RebootWindowOpen(spec, t)
		if err != nil {
			return nil, err
		}
		if !open {
			if at.IsZero() {
				for _, n := range free {
					f.Held = append(f.Held, Held{n.Name, HeldNoWindow, "no reboot window opens again"})
				}
				break
			}
			t = at
			continue
		}
		batch := free[:min(a.Nodes, len(free))]
		free = free[len(batch):]
		drain, slowest := upgrade.DrainTime(batch, pods, pdbs)
		r := Round{Start: t, Drain: Duration(drain), Slowest: slowest, Reboot: Duration(in.Downtime)}
		for _, n := range batch {
			r.Nodes = append(r.Nodes, n.Name)
			one, _ := upgrade.DrainTime([]*corev1.Node{n}, pods, pdbs)
			f.OneAtATime += Duration(one + in.Downtime + recheck)
		}
		f.Rounds = append(f.Rounds, r)
		t = t.Add(drain + in.Downtime + recheck)
	}
	f.Total = Duration(t.Sub(in.Now))
	return f, nil
}
