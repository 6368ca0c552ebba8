package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestMaintenanceSpecDefaults(t *testing.T) {
	tests := []struct {
		name     string
		spec     *MaintenanceSpec
		approve  bool
		margin   time.Duration
		deadline OnDeadlineAction
	}{
		{"nil", nil, true, 5 * time.Second, OnDeadlineDelete},
		{"empty", &MaintenanceSpec{}, true, 5 * time.Second, OnDeadlineDelete},
		{"set", &MaintenanceSpec{
			ApproveEarly:   ptr.To(false),
			DeadlineMargin: &metav1.Duration{Duration: 90 * time.Second},
			OnDeadline:     OnDeadlineStop,
		}, false, 90 * time.Second, OnDeadlineStop},
		{"zero margin is kept", &MaintenanceSpec{DeadlineMargin: &metav1.Duration{}}, true, 0, OnDeadlineDelete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.ApproveEarlyOrDefault(); got != tt.approve {
				t.Errorf("ApproveEarlyOrDefault() = %v, want %v", got, tt.approve)
			}
			if got := tt.spec.DeadlineMarginOrDefault(); got != tt.margin {
				t.Errorf("DeadlineMarginOrDefault() = %v, want %v", got, tt.margin)
			}
			if got := tt.spec.OnDeadlineOrDefault(); got != tt.deadline {
				t.Errorf("OnDeadlineOrDefault() = %q, want %q", got, tt.deadline)
			}
		})
	}
}

func TestApproveUserInitiated(t *testing.T) {
	for _, tc := range []struct {
		spec *MaintenanceSpec
		want bool
	}{
		{nil, false},
		{&MaintenanceSpec{}, false},
		{&MaintenanceSpec{UserInitiated: UserInitiatedLikePlatform}, false},
		{&MaintenanceSpec{UserInitiated: UserInitiatedApprove}, true},
	} {
		if got := tc.spec.ApproveUserInitiated(); got != tc.want {
			t.Errorf("%+v: ApproveUserInitiated() = %v, want %v", tc.spec, got, tc.want)
		}
	}
}

func TestNodePoolMaintenanceSpecNil(t *testing.T) {
	var pool *NodePool
	if got := pool.MaintenanceSpec(); got != nil {
		t.Errorf("no pool: MaintenanceSpec() = %+v, want nil (the defaults)", got)
	}
	spec := &MaintenanceSpec{Actions: MaintenanceActions{Preempt: ActionCordon}}
	pool = &NodePool{Spec: NodePoolSpec{Maintenance: spec}}
	if got := pool.MaintenanceSpec(); got != spec {
		t.Errorf("pool: MaintenanceSpec() = %+v, want the pool's", got)
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	in := &NodePool{Spec: NodePoolSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "spot"}},
		Maintenance:  &MaintenanceSpec{ApproveEarly: ptr.To(true)},
	}}
	out := in.DeepCopy()
	out.Spec.NodeSelector.MatchLabels["pool"] = "other"
	*out.Spec.Maintenance.ApproveEarly = false
	if in.Spec.NodeSelector.MatchLabels["pool"] != "spot" || !*in.Spec.Maintenance.ApproveEarly {
		t.Errorf("DeepCopy shares memory with its source: %+v", in.Spec)
	}
}
