package awsasg_test

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var unregistered = corev1.Taint{Key: contract.TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoExecute}

// User data in the forms EKS documents for each of its node images.
const (
	// nodeadm's "Merging multiple configuration objects" example's shape,
	// with a taint of the template's own.
	al2023WithTaint = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n" +
		"--BOUNDARY\nContent-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: my-cluster\n  kubelet:\n    flags:\n      - --node-labels=team=web\n      - --register-with-taints=dedicated=gpu:NoSchedule\n\n" +
		"--BOUNDARY--\n"
	// A managed node group's AL2 launch template: a MIME document whose
	// shell script runs bootstrap.sh.
	al2MIME = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==BOUNDARY==\"\n\n" +
		"--==BOUNDARY==\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\n/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args '--node-labels=team=web --register-with-taints=sluice.dev/unregistered=true:NoExecute'\n\n" +
		"--==BOUNDARY==--\n"
	al2Script       = "#!/bin/bash\nset -ex\n/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args \"--register-with-taints=dedicated=gpu:NoSchedule,sluice.dev/unregistered=true:NoExecute\"\n"
	al2ScriptNone   = "#!/bin/bash\n/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args '--node-labels=team=web'\n"
	bottlerocket    = "[settings.kubernetes]\ncluster-name = \"my-cluster\"\n\n[settings.kubernetes.node-taints]\n\"dedicated\" = [\"gpu:NoSchedule\"]\n\"sluice.dev/unregistered\" = [\"true:NoExecute\"]\n"
	bottlerocketNot = "[settings.kubernetes]\ncluster-name = \"my-cluster\"\n\n[settings.kubernetes.node-labels]\n\"sluice.dev/unregistered\" = \"true:NoExecute\"\n"
)

// RegistersUnregisteredTaint reads the taint in each form, and only with the
// NoExecute effect.
func TestRegistersUnregisteredTaintReadsEveryForm(t *testing.T) {
	nodeadm := func(flag string) string {
		return strings.Replace(al2023WithTaint, "dedicated=gpu:NoSchedule", flag, 1)
	}
	for _, c := range []struct {
		name, userData string
		want           bool
	}{
		{"AL2023 with the taint", nodeadm("dedicated=gpu:NoSchedule,sluice.dev/unregistered=true:NoExecute"), true},
		{"AL2023 without", al2023WithTaint, false},
		{"AL2023 with another effect", nodeadm("sluice.dev/unregistered=true:NoSchedule"), false},
		{"AL2023 with the taint in an earlier part only", strings.Replace(nodeadm("sluice.dev/unregistered=true:NoExecute"), "--BOUNDARY--",
			"--BOUNDARY\nContent-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n      - --register-with-taints=dedicated=gpu:NoSchedule\n\n--BOUNDARY--", 1), false},
		{"AL2 MIME", al2MIME, true},
		{"AL2 script", al2Script, true},
		{"AL2 script without", al2ScriptNone, false},
		{"Bottlerocket", bottlerocket, true},
		{"Bottlerocket label of the name", bottlerocketNot, false},
		{"empty", "", false},
	} {
		if got := awsasg.RegistersUnregisteredTaint(c.userData); got != c.want {
			t.Errorf("%s: RegistersUnregisteredTaint = %v; want %v", c.name, got, c.want)
		}
	}
}

// An AL2023 node registers with the unregistered taint beside its
// template's own labels and taints, as its kubelet reads the user data
// launched; user data of another kind is launched as the template has it.
func TestANewMachineRegistersWithTheUnregisteredTaint(t *testing.T) {
	m := mototest.Start(t)
	ctx := context.Background()
	p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))
	launch := func(t *testing.T, opts ...mototest.GroupOption) string {
		t.Helper()
		group := unique("asg-")
		m.Group(t, group, "m5.large", 3, opts...)
		np := pool(unique("web-"), v1alpha1.AutoScalingGroup{Name: group})
		machine, err := p.Create(ctx, np, provider.NewName(np.Name))
		if err != nil {
			t.Fatal(err)
		}
		return machine.ProviderID[strings.LastIndex(machine.ProviderID, "/")+1:]
	}

	t.Run("labels", func(t *testing.T) {
		id := launch(t, mototest.WithNodeLabels(map[string]string{"team": "web", "tier": "front"}))
		labels, taints, err := m.Kubelet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if labels["team"] != "web" || labels["tier"] != "front" || len(labels) != 2 || !slices.Equal(taints, []corev1.Taint{unregistered}) {
			t.Errorf("kubelet registers with labels %v, taints %v; want the template's two labels and the unregistered taint", labels, taints)
		}
	})
	t.Run("the template's own taint", func(t *testing.T) {
		id := launch(t, mototest.WithUserData(al2023WithTaint))
		labels, taints, err := m.Kubelet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, unregistered}
		if labels["team"] != "web" || !slices.Equal(taints, want) {
			t.Errorf("kubelet registers with labels %v, taints %v; want team=web and %v", labels, taints, want)
		}
	})
	for _, c := range []struct{ name, userData string }{{"AL2", al2ScriptNone}, {"Bottlerocket", bottlerocketNot}} {
		t.Run(c.name, func(t *testing.T) {
			id := launch(t, mototest.WithUserData(c.userData))
			out, err := m.EC2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id), Attribute: ec2types.InstanceAttributeNameUserData})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := base64.StdEncoding.DecodeString(aws.ToString(out.UserData.Value)); string(got) != c.userData {
				t.Errorf("launched with user data %q; want the launch template's unchanged", got)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		labels, taints, err := m.Kubelet(ctx, launch(t))
		if err != nil || labels != nil || taints != nil {
			t.Errorf("kubelet of an instance without user data: %v, %v, %v; want nothing", labels, taints, err)
		}
	})
}
