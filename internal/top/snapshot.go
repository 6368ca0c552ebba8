// Package top is the live view of the fleet behind `sluice top` and `sluice
// status -w`: a Watch keeps the cluster's nodes, NodePools, pods and Events
// in informers' caches and hands out Snapshots; Build turns a Snapshot into
// a Screen of rows (per pool: its nodes by state, its budgets, maintenance
// deadlines; the last Events) with the functions the controller decides
// with; Render lays a Screen out as text at a width. Build and Render are
// pure, so the view is tested without a terminal; App is the Bubble Tea
// model that runs them.
package top

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Snapshot is the cluster as the watches last saw it, at one reading of the
// clock.
type Snapshot struct {
	Now   time.Time
	Pools []v1alpha1.NodePool
	// PoolsInstalled is false when the cluster does not serve the NodePool
	// CRD (no pools, rather than an error).
	PoolsInstalled bool
	Nodes          []corev1.Node
	// Pods are the pods bound to nodes; nil when they cannot be seen
	// (Hidden says why).
	Pods []*corev1.Pod
	// Events are the Events sluice wrote (drains, maintenance, pools).
	Events []*corev1.Event
	// Hidden says, one line each, what the watches are not allowed to see.
	Hidden []string
	// LostSince is when the connection to the API server was lost; nil
	// while the watches are live. Everything else is then as of LostSince.
	LostSince *time.Time
	// LostError is the error the watch last saw while LostSince is set.
	LostError string
}

// Live says whether the snapshot is current: the watches are connected.
func (s Snapshot) Live() bool { return s.LostSince == nil }
