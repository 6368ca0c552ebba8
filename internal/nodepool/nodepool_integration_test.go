package nodepool

// These tests run against the sandbox's API server: it, not sluice, applies
// the CRD's defaults and refuses invalid pools, so only it can show that the
// schema the chart ships says what the Go types mean.

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// installed returns a dynamic client for a sandbox with the CRD installed.
func installed(t *testing.T) dynamic.Interface {
	t.Helper()
	env := sandboxtest.New(t)
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Install(ctx, ext); err != nil {
		t.Fatalf("Install: %v", err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// create creates a NodePool with the given spec, deleting it when the test
// ends if the API server accepted it.
func create(t *testing.T, dyn dynamic.Interface, name string, spec map[string]any) error {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	_, err := dyn.Resource(v1alpha1.NodePoolResource).Create(context.Background(), obj, metav1.CreateOptions{})
	if err == nil {
		t.Cleanup(func() {
			_ = dyn.Resource(v1alpha1.NodePoolResource).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return err
}

// expression is a nodeSelector of one matchExpression.
func expression(key, operator string, values ...string) map[string]any {
	e := map[string]any{"key": key, "operator": operator}
	if len(values) > 0 {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		e["values"] = vs
	}
	return map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{e}}}
}

func withDisruption(d map[string]any) map[string]any {
	return map[string]any{"nodeSelector": selector("x"), "disruption": d}
}

func withBudget(b map[string]any) map[string]any {
	return withDisruption(map[string]any{"budgets": []any{b}})
}

func selector(value string) map[string]any {
	return map[string]any{"matchLabels": map[string]any{"sluice.dev/test-pool": value}}
}

func TestInstallIsRepeatable(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := Install(context.Background(), ext); err != nil {
			t.Fatalf("Install #%d: %v", i+1, err)
		}
	}
}

func TestAPIServerAppliesDefaults(t *testing.T) {
	t.Parallel()
	dyn := installed(t)
	tuned, bare := sandboxtest.UniqueName("tuned-"), sandboxtest.UniqueName("bare-")
	if err := create(t, dyn, tuned, map[string]any{
		"nodeSelector": selector(tuned),
		"maintenance":  map[string]any{"actions": map[string]any{"Preempt": "Cordon", "Freeze": "Drain"}},
	}); err != nil {
		t.Fatalf("creating a valid pool: %v", err)
	}
	// A pool that says nothing about maintenance still reads back with the
	// defaults filled in.
	if err := create(t, dyn, bare, map[string]any{"nodeSelector": selector(bare)}); err != nil {
		t.Fatalf("creating a pool without maintenance: %v", err)
	}

	pools, err := List(context.Background(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{tuned, bare} {
		p := find(t, pools, name)
		if p.Spec.Provider.Name != v1alpha1.ProviderNone {
			t.Errorf("%s: provider %q, want the default none", name, p.Spec.Provider.Name)
		}
		m := p.Spec.Maintenance
		if m == nil {
			t.Fatalf("%s: maintenance left nil, want the API server's defaults", name)
		}
		if m.ApproveEarly == nil || !*m.ApproveEarly {
			t.Errorf("%s: approveEarly %v, want the default true", name, m.ApproveEarly)
		}
		if m.DeadlineMargin == nil || m.DeadlineMargin.Duration != 5*time.Second {
			t.Errorf("%s: deadlineMargin %v, want the default 5s", name, m.DeadlineMargin)
		}
		if m.OnDeadline != v1alpha1.OnDeadlineDelete {
			t.Errorf("%s: onDeadline %q, want the default Delete", name, m.OnDeadline)
		}
	}

	// The pool read back drives the policy: its own actions, defaults beside.
	p := find(t, pools, tuned)
	for typ, want := range map[maintenance.Type]v1alpha1.MaintenanceAction{
		maintenance.TypePreempt:   v1alpha1.ActionCordon,
		maintenance.TypeFreeze:    v1alpha1.ActionDrain,
		maintenance.TypeTerminate: v1alpha1.ActionDrain,
		maintenance.TypeRebalance: v1alpha1.ActionCordon,
	} {
		if got := ActionFor(p.MaintenanceSpec(), typ); got != want {
			t.Errorf("%s: ActionFor(%s) = %q, want %q", tuned, typ, got, want)
		}
	}
	// Only this test's pools: tests beside it (in parallel, on the same API
	// server) create pools with broad selectors (NotIn, DoesNotExist) that
	// would select this node too.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"sluice.dev/test-pool": tuned}}}
	got, err := For(node, []v1alpha1.NodePool{*p, *find(t, pools, bare)})
	if err != nil || got == nil || got.Name != tuned {
		t.Errorf("For(node labelled for %s) = %v, %v; want that pool", tuned, got, err)
	}
}

func find(t *testing.T, pools []v1alpha1.NodePool, name string) *v1alpha1.NodePool {
	t.Helper()
	for i := range pools {
		if pools[i].Name == name {
			return &pools[i]
		}
	}
	t.Fatalf("List did not return %s", name)
	return nil
}

func TestAPIServerRefusesInvalidPools(t *testing.T) {
	t.Parallel()
	dyn := installed(t)
	withMaintenance := func(m map[string]any) map[string]any {
		return map[string]any{"nodeSelector": selector("x"), "maintenance": m}
	}
	withActions := func(a map[string]any) map[string]any {
		return withMaintenance(map[string]any{"actions": a})
	}
	const (
		emptySelector = `spec.nodeSelector: Invalid value: "object": nodeSelector must not be empty: set matchLabels or matchExpressions; a pool that selects every node is almost always a mistake`
		rebalance     = `spec.maintenance.actions.Rebalance: Invalid value: "string": Rebalance may be None or Cordon: a rebalance recommendation is only a hint that a spot instance may be preempted, so draining on it is refused`
		freeze        = `spec.maintenance.actions.Freeze: Invalid value: "string": Freeze may be None or Drain: a freeze pauses the VM for seconds`
		margin        = `spec.maintenance.deadlineMargin: Invalid value: "string": deadlineMargin must be a duration from 0s to 10m, such as 5s or 1m30s`
	)
	tests := []struct {
		name string
		spec map[string]any
		want string
	}{
		{"empty selector", map[string]any{"nodeSelector": map[string]any{}}, emptySelector},
		{"empty matchLabels", map[string]any{"nodeSelector": map[string]any{"matchLabels": map[string]any{}}}, emptySelector},
		{"empty matchExpressions", map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{}}}, emptySelector},
		{"no selector", map[string]any{}, `spec.nodeSelector: Required value`},
		{"Rebalance: Drain", withActions(map[string]any{"Rebalance": "Drain"}), rebalance},
		{"Freeze: Cordon", withActions(map[string]any{"Freeze": "Cordon"}), freeze},
		{"deadlineMargin 11m", withMaintenance(map[string]any{"deadlineMargin": "11m"}), margin},
		{"deadlineMargin 10m1s", withMaintenance(map[string]any{"deadlineMargin": "10m1s"}), margin},
		{"deadlineMargin -1s", withMaintenance(map[string]any{"deadlineMargin": "-1s"}), margin},
		// Not a duration at all: the rule cannot evaluate, and the API
		// server says so before the rule's message.
		{"deadlineMargin prose", withMaintenance(map[string]any{"deadlineMargin": "5 minutes"}),
			`deadlineMargin must be a duration from 0s to 10m, such as 5s or 1m30s`},
		{"action not in the enum", withActions(map[string]any{"Terminate": "Evict"}),
			`spec.maintenance.actions.Terminate: Unsupported value: "Evict": supported values: "None", "Cordon", "Drain"`},
		{"onDeadline not in the enum", withMaintenance(map[string]any{"onDeadline": "Ignore"}),
			`spec.maintenance.onDeadline: Unsupported value: "Ignore": supported values: "Delete", "Stop"`},
		{"provider not in the enum", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "aws"}},
			`spec.provider.name: Unsupported value: "aws": supported values: "kwok", "none"`},
		{"operator in lower case", expression("agentpool", "in", "spot"),
			`nodeSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist (spelled so, capitalized)`},
		{"In without values", expression("agentpool", "In"),
			`nodeSelector.matchExpressions[]: In and NotIn need at least one value; Exists and DoesNotExist take none`},
		{"Exists with values", expression("agentpool", "Exists", "spot"),
			`nodeSelector.matchExpressions[]: In and NotIn need at least one value; Exists and DoesNotExist take none`},
		{"forceEvict not in the enum", withMaintenance(map[string]any{"forceEvict": "Sometimes"}),
			`spec.maintenance.forceEvict: Unsupported value: "Sometimes": supported values: "WhenNodeGoesAway", "Always", "Never"`},
		{"budget of 150%", withBudget(map[string]any{"nodes": "150%"}), `spec.disruption.budgets[0].nodes in body should match`},
		{"budget of a fraction", withBudget(map[string]any{"nodes": "0.5"}), `spec.disruption.budgets[0].nodes in body should match`},
		{"schedule without a duration", withBudget(map[string]any{"nodes": "0", "schedule": "0 9 * * *"}),
			`a budget's schedule and duration come together`},
		{"duration without a schedule", withBudget(map[string]any{"nodes": "0", "duration": "8h"}),
			`a budget's schedule and duration come together`},
		{"schedule of six fields", withBudget(map[string]any{"nodes": "0", "schedule": "0 0 9 * * *", "duration": "8h"}),
			`schedule must be a cron expression of five fields`},
		{"timeZone without a schedule", withBudget(map[string]any{"nodes": "0", "timeZone": "Europe/Berlin"}),
			`a budget's timeZone applies to its schedule`},
		{"reason not in the enum", withBudget(map[string]any{"nodes": "1", "reasons": []any{"Bored"}}),
			`Unsupported value: "Bored"`},
		{"expireAfter of days", withDisruption(map[string]any{"expireAfter": "30d"}), `spec.disruption.expireAfter in body should match`},
		{"expireAfter under a minute", withDisruption(map[string]any{"expireAfter": "30s"}), `expireAfter must be Never or a duration of at least 1m`},
		{"kwok settings with provider none", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "none", "kwok": map[string]any{"bootDelay": "1s"}}},
			`provider.kwok is the kwok provider's settings: set it only with provider.name kwok`},
		{"aws settings with provider kwok", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "kwok", "aws": map[string]any{"autoScalingGroups": []any{map[string]any{"name": "web"}}}}},
			`provider.aws is the aws-asg provider's settings: set it only with provider.name aws-asg`},
		{"aws-asg without its groups", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "aws-asg"}},
			`provider.name aws-asg needs provider.aws.autoScalingGroups`},
		{"aws-asg with no group", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "aws-asg", "aws": map[string]any{"autoScalingGroups": []any{}}}},
			`spec.provider.aws.autoScalingGroups: Invalid value: 0`},
		{"azure settings with provider aws-asg", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "aws-asg",
			"aws": map[string]any{"autoScalingGroups": []any{map[string]any{"name": "web"}}}, "azure": azureSpec("00000000-0000-0000-0000-000000000000")}},
			`provider.azure is the azure-vmss provider's settings: set it only with provider.name azure-vmss`},
		{"azure-vmss without its settings", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "azure-vmss"}},
			`provider.name azure-vmss needs provider.azure`},
		{"azure subscription not a GUID", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "azure-vmss", "azure": azureSpec("my-subscription")}},
			`spec.provider.azure.subscriptionID in body should match`},
		{"kwok failure not in the enum", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "kwok", "kwok": map[string]any{"failure": "Sometimes"}}},
			`Unsupported value: "Sometimes"`},
		{"template sets the pool label", map[string]any{"nodeSelector": selector("x"), "template": map[string]any{"labels": map[string]any{"sluice.dev/nodepool": "x"}}},
			`template.labels must not set sluice.dev/nodepool or sluice.dev/capacity-type`},
		{"capacity not in the enum", map[string]any{"nodeSelector": selector("x"), "template": map[string]any{"capacity": "reserved"}},
			`Unsupported value: "reserved"`},
		{"surge and unavailable both 0", map[string]any{"nodeSelector": selector("x"), "upgrade": map[string]any{"maxSurge": 0, "maxUnavailable": "0%"}},
			`upgrade.maxSurge and upgrade.maxUnavailable are both 0, so no node could ever be upgraded`},
		{"surge over 100%", map[string]any{"nodeSelector": selector("x"), "upgrade": map[string]any{"maxSurge": "150%"}},
			`maxSurge must be a number of nodes (0 or more) or a percentage from 0% to 100%`},
		{"negative unavailable", map[string]any{"nodeSelector": selector("x"), "upgrade": map[string]any{"maxUnavailable": -1}},
			`maxUnavailable must be a number of nodes (0 or more)`},
		{"drainTimeout under 10s", map[string]any{"nodeSelector": selector("x"), "upgrade": map[string]any{"drainTimeout": "5s"}},
			`drainTimeout must be a duration of at least 10s`},
		{"behaviour not in the enum", map[string]any{"nodeSelector": selector("x"), "upgrade": map[string]any{"undrainableNodeBehavior": "Delete"}},
			`Unsupported value: "Delete"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := create(t, dyn, sandboxtest.UniqueName("invalid-"), tt.spec)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: got %v, want it refused as Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("create refused with\n  %v\nwant it to contain\n  %s", err, tt.want)
			}
		})
	}
}

// azureSpec is provider.azure with one scale set.
func azureSpec(subscription string) map[string]any {
	return map[string]any{"subscriptionID": subscription, "resourceGroup": "MC_rg_aks_westeurope",
		"scaleSets": []any{map[string]any{"name": "aks-web-12345678-vmss"}}}
}

// The rules refuse only what they mean to: their limits and the other
// choices they leave are accepted.
func TestAPIServerAcceptsTheLimits(t *testing.T) {
	t.Parallel()
	dyn := installed(t)
	withMaintenance := func(m map[string]any) map[string]any {
		return map[string]any{"nodeSelector": selector("x"), "maintenance": m}
	}
	tests := []struct {
		name string
		spec map[string]any
	}{
		{"deadlineMargin 0s", withMaintenance(map[string]any{"deadlineMargin": "0s"})},
		{"NotIn and DoesNotExist", map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "agentpool", "operator": "NotIn", "values": []any{"system"}},
			map[string]any{"key": "kubernetes.azure.com/scalesetpriority", "operator": "DoesNotExist"},
		}}}},
		{"forceEvict Never", withMaintenance(map[string]any{"forceEvict": "Never"})},
		{"budgets of 0, 100% and a window", map[string]any{"nodeSelector": selector("x"), "disruption": map[string]any{
			"expireAfter": "720h", "terminationGracePeriod": "48h", "consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never", "paused": true,
			"budgets": []any{
				map[string]any{"nodes": "100%"},
				map[string]any{"nodes": "0", "schedule": "0 9 * * mon-fri", "timeZone": "Europe/Berlin", "duration": "8h", "reasons": []any{"Drifted", "Expired"}},
				map[string]any{"nodes": "3", "schedule": "@daily", "duration": "1h30m"},
			}}}},
		{"an azure-vmss pool", map[string]any{"nodeSelector": selector("x"), "provider": map[string]any{"name": "azure-vmss",
			"azure": azureSpec("6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d")}}},
		{"a provider with a template and limits", map[string]any{"nodeSelector": selector("x"),
			"provider": map[string]any{"name": "kwok", "kwok": map[string]any{"bootDelay": "0s", "failure": "NeverJoins"}},
			"template": map[string]any{"labels": map[string]any{"sluice.dev/test-pool": "x"}, "instanceTypes": []any{"Standard_D4s_v5", "m6i.xlarge"},
				"capacity": "spot", "image": "AKSUbuntu-2204gen2containerd-202611.01.0", "kubelet": map[string]any{"maxPods": 250},
				"taints":        []any{map[string]any{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}},
				"startupTaints": []any{map[string]any{"key": "cni-not-ready", "effect": "NoSchedule"}}},
			"limits": map[string]any{"cpu": "1000", "memory": "4Ti", "nodes": 50}}},
		{"deadlineMargin 10m", withMaintenance(map[string]any{"deadlineMargin": "10m"})},
		{"deadlineMargin 1m30s", withMaintenance(map[string]any{"deadlineMargin": "1m30s"})},
		{"Freeze: Drain", withMaintenance(map[string]any{"actions": map[string]any{"Freeze": "Drain"}})},
		{"Rebalance: Cordon and None", withMaintenance(map[string]any{"actions": map[string]any{"Rebalance": "None", "Reboot": "Cordon"}})},
		{"every knob", map[string]any{
			"nodeSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "agentpool", "operator": "In", "values": []any{"spot"}}}},
			"provider":     map[string]any{"name": "kwok"},
			"maintenance": map[string]any{
				"approveEarly": false, "deadlineMargin": "30s", "onDeadline": "Stop",
				"actions": map[string]any{
					"Freeze": "None", "Reboot": "Drain", "Redeploy": "Cordon", "Preempt": "Drain",
					"Terminate": "Drain", "Rebalance": "Cordon", "Maintenance": "Cordon",
				},
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := create(t, dyn, sandboxtest.UniqueName("valid-"), tt.spec); err != nil {
				t.Errorf("create: %v", err)
			}
		})
	}
}
