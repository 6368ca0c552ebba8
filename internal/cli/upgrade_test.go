package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

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
	asg := &v1alpha1.NodePool{
		TypeMeta:   upgrading.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "asg"},
		Spec: v1alpha1.NodePoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "asg"}},
			Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAWSASG}, Template: &v1alpha1.NodeTemplate{}},
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
		{"provider none", "gpu", upgradeFlags{image: "img-3"}, nil, "sluice makes no machines for it"},
		{"an image the provider cannot launch", "asg", upgradeFlags{image: "ami-0abc"}, nil, `image "ami-0abc" is not an AMI ID`},
		{"already upgrading", "busy", upgradeFlags{image: "img-4"}, nil, "is upgrading to img-3"},
		{"already upgrading to it", "busy", upgradeFlags{image: "img-3"}, nil, "already upgrading to img-3"},
		{"no such pool", "nope", upgradeFlags{image: "img-3"}, nil, "node pool nope not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, dyn := cluster(t, upgrading, asg)
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
	for _, want := range []string{"Upgrade of NodePool spot to img-3: 2 node(s)", "spot-1  PodDoNotDisrupt", "then: wait (never chosen)", "STARTS", "Predicted time:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("forecast lacks %q:\n%s", want, out.String())
		}
	}
	if err := runPlanUpgrade(context.Background(), &out, kc, dyn, "spot", "nope:latest", outputText, now); err == nil {
		t.Error("a forecast for an image the provider lacks: no error")
	}
}

// Following an upgrade, a lost API server is said once, retried at the
// interval, and its return said; the watch then goes on to the end.
func TestUpgradeStatusWatchReconnects(t *testing.T) {
	done := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec:       v1alpha1.NodePoolSpec{Template: &v1alpha1.NodeTemplate{Image: "img-3"}},
		Status:     v1alpha1.NodePoolStatus{Upgrade: &v1alpha1.UpgradeStatus{Phase: v1alpha1.UpgradeProgressing, Image: "img-3", Nodes: 4, Upgraded: 1}},
	}
	_, dyn := cluster(t, done)
	gets := 0
	dyn.PrependReactor("get", "nodepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		switch gets {
		case 2, 3:
			return true, nil, errors.New(`Get "https://10.0.0.1/apis/sluice.dev/v1alpha1/nodepools/busy": dial tcp 10.0.0.1:443: connect: connection refused`)
		case 4:
			// Back, and finished.
			p := done.DeepCopy()
			p.Status.Upgrade.Phase, p.Status.Upgrade.Upgraded = v1alpha1.UpgradeSucceeded, 4
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
			return true, &unstructured.Unstructured{Object: u}, err
		}
		return false, nil, nil
	})
	clk := testingclock.NewFakeClock(now)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the interval passes whenever the watch waits for it
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				if clk.HasWaiters() {
					clk.Step(2 * time.Second)
				}
			}
		}
	}()
	var out, errOut bytes.Buffer
	err := runUpgradeStatus(context.Background(), &out, &errOut, dyn, "busy", outputText, true, 2*time.Second, clk)
	if err != nil {
		t.Fatalf("the watch ended with %v; want it to reconnect and see the upgrade succeed", err)
	}
	if n := strings.Count(errOut.String(), "lost contact with the API server"); n != 1 {
		t.Errorf("lost contact said %d times over two failed looks, want once:\n%s", n, errOut.String())
	}
	if !strings.Contains(errOut.String(), "reconnected") || !strings.Contains(out.String(), "Succeeded") {
		t.Errorf("want the reconnection said and the end followed; stderr:\n%s\nstdout:\n%s", errOut.String(), out.String())
	}
	if gets != 4 {
		t.Errorf("%d looks, want 4", gets)
	}
}

// The first look is not retried: a server that cannot be reached is an error
// at once, even when following.
func TestUpgradeStatusWatchFailsOnFirstContact(t *testing.T) {
	_, dyn := cluster(t)
	dyn.PrependReactor("get", "nodepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	var out, errOut bytes.Buffer
	err := runUpgradeStatus(context.Background(), &out, &errOut, dyn, "spot", outputText, true, time.Second, testingclock.NewFakeClock(now))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want the first contact's", err)
	}
}
