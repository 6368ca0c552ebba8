package v1alpha1

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults of UpgradeSpec's fields; the CRD schema repeats them.
const (
	DefaultMaxSurge         = "10%"
	DefaultDrainTimeout     = 30 * time.Minute
	DefaultNodeSoakDuration = time.Duration(0)
)

// UpgradeSpecOf returns the pool's upgrade settings, nil when unset;
// UpgradeSpec's methods answer with the defaults then.
func (p *NodePool) UpgradeSpecOf() *UpgradeSpec {
	if p == nil {
		return nil
	}
	return p.Spec.Upgrade
}

// Surge is how many new machines may be made ahead of the nodes they
// replace in a pool of size nodes: a percentage rounds up, and a pool is
// never surged by more than its size.
func (u *UpgradeSpec) Surge(size int) (int, error) {
	v := intstr.FromString(DefaultMaxSurge)
	if u != nil && u.MaxSurge != nil {
		v = *u.MaxSurge
	}
	n, err := scaled(v, size, true)
	return min(n, size), err
}

// Unavailable is how many nodes may be drained before their replacement is
// Ready in a pool of size nodes: a percentage rounds down.
func (u *UpgradeSpec) Unavailable(size int) (int, error) {
	if u == nil || u.MaxUnavailable == nil {
		return 0, nil
	}
	n, err := scaled(*u.MaxUnavailable, size, false)
	return min(n, size), err
}

// scaled reads N or P% of size.
func scaled(v intstr.IntOrString, size int, up bool) (int, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("%d: must not be negative", v.IntVal)
		}
		return int(v.IntVal), nil
	}
	s := strings.TrimSuffix(v.StrVal, "%")
	p, err := strconv.Atoi(s)
	if err != nil || s == v.StrVal || p < 0 || p > 100 {
		if n, ierr := strconv.Atoi(v.StrVal); ierr == nil && n >= 0 {
			return n, nil // "3": a number written as a string
		}
		return 0, fmt.Errorf("%q: use a number of nodes or a percentage from 0%% to 100%%", v.StrVal)
	}
	f := float64(p) * float64(size) / 100
	if up {
		return int(math.Ceil(f)), nil
	}
	return int(math.Floor(f)), nil
}

// DrainTimeoutOrDefault returns DrainTimeout, or its default.
func (u *UpgradeSpec) DrainTimeoutOrDefault() time.Duration {
	if u == nil || u.DrainTimeout == nil {
		return DefaultDrainTimeout
	}
	return u.DrainTimeout.Duration
}

// SoakOrDefault returns NodeSoakDuration, or its default.
func (u *UpgradeSpec) SoakOrDefault() time.Duration {
	if u == nil || u.NodeSoakDuration == nil {
		return DefaultNodeSoakDuration
	}
	return u.NodeSoakDuration.Duration
}

// Behavior returns UndrainableNodeBehavior, or its default (Schedule).
func (u *UpgradeSpec) Behavior() UndrainableNodeBehavior {
	if u == nil || u.UndrainableNodeBehavior == "" {
		return UndrainableSchedule
	}
	return u.UndrainableNodeBehavior
}

// MaxBlocked returns MaxBlockedNodes, or its default: the surge count.
func (u *UpgradeSpec) MaxBlocked(surge int) int {
	if u == nil || u.MaxBlockedNodes == nil {
		return surge
	}
	return int(*u.MaxBlockedNodes)
}

// WaitsForDaemonSets says whether a new node serves only once its
// DaemonSet pods are Ready.
func (u *UpgradeSpec) WaitsForDaemonSets() bool {
	return u != nil && u.HealthGate != nil && u.HealthGate.DaemonSetPodsReady
}
