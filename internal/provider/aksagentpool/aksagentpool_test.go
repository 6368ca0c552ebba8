package aksagentpool_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool/akstest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A controller that wrote its claim and died before it asked AKS is
// replaced by one that finds the claim and raises the count then, once;
// one that died after AKS scaled out is replaced by one that finds the
// machine without raising the count again.
func TestARestartFinishesTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name     string
		afterPut bool
	}{
		{"before the count is raised", false},
		{"after AKS scaled out", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.cloud.AddPool("web", 2, akstest.Pool{})
			if tc.afterPut {
				first, dies := context.WithCancel(context.Background())
				defer dies()
				w.cloud.Answered = func(r akstest.Request) {
					if r.Method == http.MethodPut {
						dies()
					}
				}
				_, _ = w.provider(-1).Create(first, pool("web", "web"), "web-a1b2c")
				w.cloud.Answered = nil
				w.cloud.FinishOperations() // AKS ends the operation nobody polls
			} else {
				// What the dead controller wrote before it would have asked.
				var before []string
				for name := range w.cloud.Machines("web") {
					before = append(before, name)
				}
				if err := w.claims.Put(ctx(t), &aksagentpool.Claim{Machine: "web-a1b2c", Pool: "web", Subscription: akstest.Subscription,
					ResourceGroup: akstest.ResourceGroup, Cluster: akstest.Cluster, AgentPool: "web", Before: before, Count: 3}); err != nil {
					t.Fatal(err)
				}
			}
			if c, _ := w.claims.Get(ctx(t), "web-a1b2c"); c == nil {
				t.Fatal("no claim before the restart")
			}
			m, err := w.provider(3).Create(ctx(t), pool("web", "web"), "web-a1b2c")
			if err != nil {
				t.Fatalf("Create after the restart: %v", err)
			}
			if n := len(w.cloud.Machines("web")); n != 3 {
				t.Errorf("the pool has %d machines, want 3: one scale-out", n)
			}
			if n := w.cloud.Count(http.MethodPut, "/agentPools/web"); n != 1 {
				t.Errorf("%d PUTs of the pool, want 1", n)
			}
			if !strings.HasSuffix(m.ProviderID, "/virtualMachines/2") || m.Name != "web-a1b2c" {
				t.Errorf("machine %+v; want web-a1b2c on the pool's new instance 2", m)
			}
		})
	}
}

// AKS refuses a count change while it upgrades the pool; the refusal is
// retryable and leaves no claim, and the next Create after AKS finished
// makes the machine.
func TestAnOperationInProgressIsRetryable(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	w.cloud.StartOperation("web", "Upgrading")
	p := w.provider(-1)
	_, err := p.Create(ctx(t), pool("web", "web"), "web-a1b2c")
	e, ok := provider.AsError(err)
	if !ok || e.Code != aksagentpool.CodeOperationInProgress || !e.Retryable || !strings.Contains(e.Message, "Another operation (Upgrading)") {
		t.Fatalf("Create during an upgrade = %v; want a retryable %s saying AKS's reason", err, aksagentpool.CodeOperationInProgress)
	}
	if c, _ := w.claims.Get(ctx(t), "web-a1b2c"); c != nil {
		t.Errorf("claim %+v left after the refusal", c)
	}
	w.cloud.FinishOperations()
	if _, err := p.Create(ctx(t), pool("web", "web"), "web-a1b2c"); err != nil {
		t.Errorf("Create after the upgrade: %v", err)
	}
}

// An agent pool AKS's cluster autoscaler sizes is refused, saying how to
// turn it off; nothing is asked of AKS.
func TestAnAutoscaledPoolIsRefused(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{EnableAutoScaling: true})
	_, err := w.provider(-1).Create(ctx(t), pool("web", "web"), "web-a1b2c")
	e, ok := provider.AsError(err)
	if !ok || e.Code != aksagentpool.CodeAutoscaled || e.Retryable || !strings.Contains(e.Message, "--disable-cluster-autoscaler") {
		t.Fatalf("Create = %v; want %s naming the fix", err, aksagentpool.CodeAutoscaled)
	}
	if n := w.cloud.Count(http.MethodPut, "/agentPools/web"); n != 0 {
		t.Errorf("%d PUTs of an autoscaled pool", n)
	}
}

// The PUT sends the pool back as AKS has it, the count raised, at its eTag,
// without the fields AKS reports but does not take.
func TestTheCountPutKeepsThePool(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{NodeLabels: map[string]string{"tier": "web"}})
	if _, err := w.provider(-1).Create(ctx(t), pool("web", "web"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	props, _ := w.cloud.LastPut("web")["properties"].(map[string]any)
	if props["count"] != float64(2) || props["orchestratorVersion"] != "1.31" || props["vmSize"] != "Standard_D4s_v5" || props["nodeLabels"] == nil {
		t.Errorf("PUT properties = %v; want count 2 and the pool's settings as they were", props)
	}
	for _, ro := range []string{"provisioningState", "nodeImageVersion", "currentOrchestratorVersion", "eTag"} {
		if _, ok := props[ro]; ok {
			t.Errorf("PUT sent read-only %s", ro)
		}
	}
}

// Delete removes the AKS machine by name, lowering the count; a second
// Delete is no error.
func TestDeleteRemovesTheMachine(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	p := w.provider(-1)
	if _, err := p.Create(ctx(t), pool("web", "web"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	w.cloud.FinishOperations()
	for range 2 {
		if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.cloud.Machines("web"); len(got) != 1 {
		t.Errorf("machines %v; want the one the pool had", got)
	}
	if n := w.cloud.Count(http.MethodPost, "/deleteMachines"); n != 1 {
		t.Errorf("%d DeleteMachines, want 1", n)
	}
}

func TestCheckRegistration(t *testing.T) {
	other := corev1.Taint{Key: "cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		init []corev1.Taint
		ok   bool
	}{
		{"the pool's initialization taints hold it", []corev1.Taint{other, provider.Unregistered}, true},
		{"they do not", []corev1.Taint{other}, false},
		{"there are none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.cloud.AddPool("web", 0, akstest.Pool{NodeInitializationTaints: tc.init})
			why, err := w.provider(-1).CheckRegistration(ctx(t), pool("web", "web"))
			if err != nil {
				t.Fatal(err)
			}
			if (why == "") != tc.ok || !tc.ok && !strings.Contains(why, "--node-init-taints") {
				t.Errorf("CheckRegistration = %q; want ok %v, or the fix named", why, tc.ok)
			}
		})
	}
}

func TestCheckTemplate(t *testing.T) {
	gpu := corev1.Taint{Key: "sku", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name     string
		template v1alpha1.NodeTemplate
		want     []string // in the answer; none: ""
	}{
		{"equal, AKS's own labels aside", v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "web", "kubernetes.azure.com/agentpool": "web"}, Taints: []corev1.Taint{gpu}}, nil},
		{"a label missing", v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "web", "team": "a"}, Taints: []corev1.Taint{gpu}}, []string{"team=a"}},
		{"a label's value differs", v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "api"}, Taints: []corev1.Taint{gpu}}, []string{"tier is web"}},
		{"a taint AKS lacks and one it has", v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "web"}, Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}}, []string{"x:NoExecute not in nodeTaints", "sku=gpu:NoSchedule not in the template"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.cloud.AddPool("web", 0, akstest.Pool{NodeLabels: map[string]string{"tier": "web"}, NodeTaints: []corev1.Taint{gpu}})
			np := pool("web", "web")
			np.Spec.Template = &tc.template
			got, err := w.provider(-1).CheckTemplate(ctx(t), np)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && got != "" {
				t.Errorf("CheckTemplate = %q; want agreement", got)
			}
			for _, s := range tc.want {
				if !strings.Contains(got, s) {
					t.Errorf("CheckTemplate = %q; want it to say %q", got, s)
				}
			}
		})
	}
}

// NameOf gives sluice's name for a Node of a machine it claimed, a name
// Delete takes for a machine the pool had before sluice, and "" for a Node
// of no listed pool.
func TestNameOf(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	before := w.cloud.AddMachine("web")
	p := w.provider(-1)
	m, err := p.Create(ctx(t), pool("web", "web"), "web-a1b2c")
	if err != nil {
		t.Fatal(err)
	}
	w.cloud.FinishOperations()
	node := func(machine string) *corev1.Node {
		_, _, name, id, ok := w.cloud.Kubelet(machine)
		if !ok {
			t.Fatalf("no kubelet for %s", machine)
		}
		return &corev1.Node{Spec: corev1.NodeSpec{ProviderID: id}, ObjectMeta: metav1ObjectMeta(name)}
	}
	var ours string
	for name := range w.cloud.Machines("web") {
		if _, _, _, id, _ := w.cloud.Kubelet(name); strings.EqualFold(id, m.ProviderID) {
			ours = name
		}
	}
	if got := p.NameOf(node(ours)); got != "web-a1b2c" {
		t.Errorf("NameOf(our node) = %q; want web-a1b2c", got)
	}
	// A restarted controller reads the claims.
	if got := w.provider(-1).NameOf(node(ours)); got != "web-a1b2c" {
		t.Errorf("NameOf(our node) after a restart = %q; want web-a1b2c", got)
	}
	foreign := p.NameOf(node(before))
	if want := "aks-agentpool/" + akstest.Subscription + "/" + before; foreign != want {
		t.Fatalf("NameOf(a node the pool had) = %q; want %q", foreign, want)
	}
	if err := p.Delete(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.cloud.Machines("web")[before]; ok {
		t.Errorf("machine %s still there after Delete(%s)", before, foreign)
	}
	if got := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0abc"}}); got != "" {
		t.Errorf("NameOf(not Azure) = %q", got)
	}
}
