package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func patches(dyn *dynamicfake.FakeDynamicClient) int {
	n := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

// Bad input is refused with a message that says what to fix, and the pool
// is not touched.
func TestUpgradePoolRefusesBadInput(t *testing.T) {
	upgrading := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec: v1alpha1.NodePoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "busy"}},
			Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok}, Template: &v1alpha1.NodeTemplate{Image: "img-3"}, Upgrade: &v1alpha1.UpgradeSpec{}},
		Status: v1alpha1.NodePoolStatus{Upgrade: &v1alpha1.UpgradeStatus{Phase: v1alpha1.UpgradeProgressing, Image: "img-3", Nodes: 4, Upgraded: 1}},
	}
	for _, tc := range []struct {
		name, pool string
		flags      upgradeFlags
		changed    []string
		says       string
	}{
		{"unknown image", "spot", upgradeFlags{image: "ubuntu-latest"}, nil, `no image "ubuntu-latest"`},
		{"surge and unavailable 0", "spot", upgradeFlags{image: "img-3", maxSurge: "0", maxUnavailable: "0%"}, []string{"max-surge", "max-unavailable"}, "come to 0 nodes"},
		{"bad surge", "spot", upgradeFlags{image: "img-3", maxSurge: "150%"}, []string{"max-surge"}, "--max-surge"},
		{"bad behaviour", "spot", upgradeFlags{image: "img-3", behavior: "Delete"}, []string{"undrainable-node-behavior"}, "use Schedule or Cordon"},
		{"provider none", "gpu", upgradeFlags{image: "img-3"}, nil, "cannot upgrade it"},
		{"already upgrading", "busy", upgradeFlags{image: "img-4"}, nil, "is upgrading to img-3"},
		{"already upgrading to it", "busy", upgradeFlags{image: "img-3"}, nil, "already upgrading to img-3"},
		{"no such pool", "nope", upgradeFlags{image: "img-3"}, nil, "node pool nope not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, dyn := cluster(t, upgrading)
			changed := func(f string) bool { return strings.Contains(strings.Join(tc.changed, ","), f) }
			var out bytes.Buffer
			err := runUpgradePool(context.Background(), &out, kc, dyn, tc.pool, tc.flags, changed)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v; want one saying %q", err, tc.says)
			}
			if n := patches(dyn); n != 0 {
				t.Errorf("%d writes to the pool after a refusal; want none", n)
			}
		})
	}
}

// A good request sets the template's image and spec.upgrade, and says what
// will happen.
func TestUpgradePoolStarts(t *testing.T) {
	kc, dyn := cluster(t)
	var out bytes.Buffer
	f := upgradeFlags{image: "img-3", maxSurge: "50%", behavior: "Cordon"}
	changed := func(f string) bool { return f == "max-surge" || f == "undrainable-node-behavior" }
	if err := runUpgradePool(context.Background(), &out, kc, dyn, "spot", f, changed); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "upgrading 2 of 2 nodes to img-3: maxSurge 1") {
		t.Errorf("output %q", out.String())
	}
	pool, err := getOnePool(context.Background(), dyn, "spot")
	if err != nil {
		t.Fatal(err)
	}
	u := pool.Spec.Upgrade
	if pool.Spec.Template.Image != "img-3" || u == nil || u.MaxSurge == nil || *u.MaxSurge != intstr.FromString("50%") || u.UndrainableNodeBehavior != v1alpha1.UndrainableCordon {
		t.Errorf("pool after the upgrade request: image %s, upgrade %+v", pool.Spec.Template.Image, u)
	}
}

// pause, resume and abort refuse what makes no sense for the upgrade's
// phase.
func TestUpgradeControlFollowsThePhase(t *testing.T) {
	kc, dyn := cluster(t)
	var out bytes.Buffer
	for _, verb := range []string{"pause", "abort", "resume"} {
		if err := runUpgradeControl(context.Background(), &out, kc, dyn, "spot", verb); err == nil || !strings.Contains(err.Error(), "no ") {
			t.Errorf("%s with no upgrade: error %v; want a refusal", verb, err)
		}
	}
	if n := patches(dyn); n != 0 {
		t.Errorf("%d writes after refusals", n)
	}
}

// The forecast names the node a do-not-disrupt pod holds, with what the
// upgrade will do about it, and times the rest.
func TestPlanUpgradeNamesBlockers(t *testing.T) {
	kc, dyn := cluster(t)
	var out bytes.Buffer
	if err := runPlanUpgrade(context.Background(), &out, kc, dyn, "spot", "img-3", outputText, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Upgrade of NodePool spot to img-3: 2 node(s)", "spot-1  PodDoNotDisrupt", "then: wait (never chosen)", "Predicted time:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("forecast lacks %q:\n%s", want, out.String())
		}
	}
	if err := runPlanUpgrade(context.Background(), &out, kc, dyn, "spot", "nope:latest", outputText, now); err == nil {
		t.Error("a forecast for an image the provider lacks: no error")
	}
}
