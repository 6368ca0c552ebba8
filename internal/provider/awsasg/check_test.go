package awsasg_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// CheckRegistration reads the launch template version each group launches
// from: AL2023 user data is fine (Create adds the taint), so is user data
// that registers it itself; anything else is named, with its group.
func TestCheckRegistrationNamesATemplateWithoutTheTaint(t *testing.T) {
	m := mototest.Start(t)
	const al2 = "#!/bin/bash\n/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args '--node-labels=team=web'\n"
	const al2Tainted = "#!/bin/bash\n/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args '--register-with-taints=sluice.dev/unregistered=true:NoExecute'\n"
	for _, tc := range []struct {
		name     string
		userData []mototest.GroupOption // of each group
		missing  []int                  // the groups named
	}{
		{"AL2023: sluice adds the taint", []mototest.GroupOption{mototest.WithNodeLabels(map[string]string{"team": "web"})}, nil},
		{"AL2 registering it itself", []mototest.GroupOption{mototest.WithUserData(al2Tainted)}, nil},
		{"AL2 without it", []mototest.GroupOption{mototest.WithUserData(al2)}, []int{0}},
		{"no user data", []mototest.GroupOption{nil}, []int{0}},
		{"one group of two", []mototest.GroupOption{mototest.WithNodeLabels(nil), mototest.WithUserData(al2)}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var groups []v1alpha1.AutoScalingGroup
			for _, opt := range tc.userData {
				g := unique("asg-")
				if opt == nil {
					m.Group(t, g, "m5.large", 3)
				} else {
					m.Group(t, g, "m5.large", 3, opt)
				}
				groups = append(groups, v1alpha1.AutoScalingGroup{Name: g})
			}
			p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))
			why, err := p.CheckRegistration(context.Background(), pool(unique("web-"), groups...))
			if err != nil {
				t.Fatal(err)
			}
			if (why == "") != (len(tc.missing) == 0) {
				t.Fatalf("CheckRegistration = %q; want the groups %v named", why, tc.missing)
			}
			for i, g := range groups {
				if named := strings.Contains(why, "(group "+g.Name+")"); named != slices.Contains(tc.missing, i) {
					t.Errorf("group %d (%s) named: %v, want %v, in %q", i, g.Name, named, !named, why)
				}
			}
		})
	}
}
