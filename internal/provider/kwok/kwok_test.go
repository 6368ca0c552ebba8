package kwok

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var start = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// newPool returns a kwok pool named name, changed by the options.
func newPool(name string, opts ...func(*v1alpha1.NodePool)) *v1alpha1.NodePool {
	p := &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodePoolSpec{
			Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withTemplate(t v1alpha1.NodeTemplate) func(*v1alpha1.NodePool) {
	return func(p *v1alpha1.NodePool) { p.Spec.Template = &t }
}

func withKwok(k v1alpha1.KwokProviderSpec) func(*v1alpha1.NodePool) {
	return func(p *v1alpha1.NodePool) { p.Spec.Provider.Kwok = &k }
}

func newProvider(objects ...runtime.Object) (*Provider, *fake.Clientset, *clocktesting.FakeClock) {
	client := fake.NewClientset(objects...)
	clk := clocktesting.NewFakeClock(start)
	return New(client, clk, Options{}), client, clk
}

func getNode(t *testing.T, client *fake.Clientset, name string) (*corev1.Node, bool) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return n, true
}

func nodeNames(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	return names
}

func TestCreateRegistersTheNodeAfterTheBootDelay(t *testing.T) {
	noSchedule := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name        string
		pool        *v1alpha1.NodePool
		bootDelay   time.Duration
		instance    string
		capacity    v1alpha1.CapacityType
		zone        string
		region      string
		labels      map[string]string // besides the ones every node gets
		taints      []corev1.Taint
		cpu, memory string // allocatable
		pods        string
		image       string
	}{{
		name:      "no template: the default size, on-demand",
		pool:      newPool("general"),
		bootDelay: v1alpha1.DefaultKwokBootDelay,
		instance:  "Standard_D4s_v5", capacity: v1alpha1.CapacityOnDemand, zone: "eastus-1", region: "eastus",
		cpu: "3860m", memory: "14034Mi", pods: "110",
	}, {
		name: "a full template",
		pool: newPool("batch",
			withKwok(v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{Duration: 30 * time.Second}}),
			withTemplate(v1alpha1.NodeTemplate{
				Labels:        map[string]string{"team": "data", provider.LabelInstanceType: "stale"},
				Taints:        []corev1.Taint{noSchedule},
				StartupTaints: []corev1.Taint{startup},
				InstanceTypes: []string{"m6i.xlarge", "m6i.2xlarge"},
				Capacity:      v1alpha1.CapacitySpot,
				Image:         "ami-0abc1234",
				Kubelet:       &v1alpha1.KubeletSpec{MaxPods: ptr.To[int32](58)},
			})),
		bootDelay: 30 * time.Second,
		instance:  "m6i.xlarge", capacity: v1alpha1.CapacitySpot, zone: "us-east-1a", region: "us-east-1",
		labels: map[string]string{"team": "data"},
		taints: []corev1.Taint{noSchedule, startup},
		cpu:    "3920m", memory: "15391Mi", pods: "58", image: "ami-0abc1234",
	}, {
		name: "the template's zone, and a spot pool passing over a size not sold as spot",
		pool: newPool("edge",
			withKwok(v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{}}),
			withTemplate(v1alpha1.NodeTemplate{
				Labels:        map[string]string{provider.LabelZone: "eastus-3"},
				InstanceTypes: []string{"Standard_B2s", "Standard_D2s_v5"},
				Capacity:      v1alpha1.CapacitySpot,
			})),
		bootDelay: 0,
		instance:  "Standard_D2s_v5", capacity: v1alpha1.CapacitySpot, zone: "eastus-3", region: "eastus",
		cpu: "1900m", memory: "6044Mi", pods: "110",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, client, clk := newProvider()
			m, err := p.Create(ctx, tc.pool, "")
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if !regexp.MustCompile(`^` + tc.pool.Name + `-[a-z0-9]{5}$`).MatchString(m.Name) {
				t.Errorf("machine name %q, want %s-<5 lowercase letters and digits>", m.Name, tc.pool.Name)
			}
			want := provider.Machine{
				Name: m.Name, Pool: tc.pool.Name, ProviderID: "kwok://" + m.Name, NodeName: m.Name,
				InstanceType: tc.instance, Capacity: tc.capacity, Zone: tc.zone, Image: tc.image,
				Created: start, State: provider.StateLaunching,
			}
			if *m != want {
				t.Errorf("Create returned\n%+v, want\n%+v", *m, want)
			}

			if tc.bootDelay > 0 {
				clk.Step(tc.bootDelay - time.Millisecond)
				p.register(ctx)
				if _, ok := getNode(t, client, m.Name); ok {
					t.Fatalf("node registered before the boot delay passed")
				}
				if got, err := p.Get(ctx, m.Name); err != nil || got.State != provider.StateLaunching {
					t.Fatalf("Get before the boot delay = %+v, %v; want Launching", got, err)
				}
				clk.Step(time.Millisecond)
			}
			if next := p.register(ctx); !next.IsZero() {
				t.Errorf("register: next registration at %v, want none", next)
			}
			node, ok := getNode(t, client, m.Name)
			if !ok {
				t.Fatalf("no node after the boot delay")
			}

			wantLabels := map[string]string{
				"sluice.dev/nodepool":              tc.pool.Name,
				"sluice.dev/capacity-type":         string(tc.capacity),
				"node.kubernetes.io/instance-type": tc.instance,
				"topology.kubernetes.io/zone":      tc.zone,
				"topology.kubernetes.io/region":    tc.region,
				"kubernetes.io/hostname":           m.Name,
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
			}
			maps.Copy(wantLabels, tc.labels)
			if !maps.Equal(node.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", node.Labels, wantLabels)
			}
			wantAnnotations := map[string]string{
				"sluice.dev/image":         tc.image,
				"sluice.dev/template-hash": provider.TemplateHash(tc.pool.Spec.Template),
				"kwok.x-k8s.io/node":       "fake",
			}
			if !maps.Equal(node.Annotations, wantAnnotations) {
				t.Errorf("annotations %v, want %v", node.Annotations, wantAnnotations)
			}
			// Every new machine registers tainted, as a cloud's would.
			wantTaints := append(slices.Clone(tc.taints), provider.Unregistered)
			if !slices.EqualFunc(node.Spec.Taints, wantTaints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
				t.Errorf("taints %v, want %v", node.Spec.Taints, wantTaints)
			}
			if node.Spec.ProviderID != "kwok://"+m.Name {
				t.Errorf("providerID %q, want kwok://%s", node.Spec.ProviderID, m.Name)
			}
			for r, want := range map[corev1.ResourceName]string{
				corev1.ResourceCPU: tc.cpu, corev1.ResourceMemory: tc.memory, corev1.ResourcePods: tc.pods,
			} {
				got := node.Status.Allocatable[r]
				if got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("allocatable %s %s, want %s", r, got.String(), want)
				}
				if c := node.Status.Capacity[r]; got.Cmp(c) > 0 {
					t.Errorf("allocatable %s %s above capacity %s", r, got.String(), c.String())
				}
			}

			got, err := p.Get(ctx, m.Name)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			want.State, want.Created = provider.StateRunning, node.CreationTimestamp.Time
			if *got != want {
				t.Errorf("Get after registration\n%+v, want\n%+v", *got, want)
			}
		})
	}
}

func TestZonesGoRoundRobinPerPool(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		opts  Options
		pool  *v1alpha1.NodePool
		zones []string
	}{
		{"azure", Options{}, newPool("a"), []string{"eastus-1", "eastus-2", "eastus-3", "eastus-1"}},
		{"aws", Options{}, newPool("b", withTemplate(v1alpha1.NodeTemplate{InstanceTypes: []string{"c6i.xlarge"}})),
			[]string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1a"}},
		{"options", Options{Zones: []string{"z1", "z2"}}, newPool("c"), []string{"z1", "z2", "z1", "z2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(fake.NewClientset(), clocktesting.NewFakeClock(start), tc.opts)
			var zones []string
			for range tc.zones {
				m, err := p.Create(ctx, tc.pool, "")
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				zones = append(zones, m.Zone)
				// Another pool's machines do not move this pool's turn.
				if _, err := p.Create(ctx, newPool("other"), ""); err != nil {
					t.Fatalf("Create: %v", err)
				}
			}
			if !slices.Equal(zones, tc.zones) {
				t.Errorf("zones %v, want %v", zones, tc.zones)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pool      *v1alpha1.NodePool
		code      string
		retryable bool
		message   string // a part of it
	}{
		{"azure insufficient capacity", newPool("p", withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureInsufficientCapacity})),
			provider.CodeInsufficientCapacity, true, "AllocationFailed"},
		{"aws insufficient capacity", newPool("p",
			withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureInsufficientCapacity}),
			withTemplate(v1alpha1.NodeTemplate{InstanceTypes: []string{"m6i.large"}})),
			provider.CodeInsufficientCapacity, true, "InsufficientInstanceCapacity: We currently do not have sufficient m6i.large capacity"},
		{"azure quota", newPool("p", withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureQuotaExceeded})),
			provider.CodeQuotaExceeded, false, "OperationNotAllowed: Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota"},
		{"azure spot quota", newPool("p",
			withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureQuotaExceeded}),
			withTemplate(v1alpha1.NodeTemplate{Capacity: v1alpha1.CapacitySpot, InstanceTypes: []string{"Standard_E4s_v5"}})),
			provider.CodeQuotaExceeded, false, "Low Priority Cores quota"},
		{"aws quota", newPool("p",
			withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureQuotaExceeded}),
			withTemplate(v1alpha1.NodeTemplate{InstanceTypes: []string{"m6i.large"}})),
			provider.CodeQuotaExceeded, false, "VcpuLimitExceeded"},
		{"azure throttled", newPool("p", withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureThrottled})),
			provider.CodeThrottled, true, "TooManyRequests"},
		{"aws throttled", newPool("p",
			withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureThrottled}),
			withTemplate(v1alpha1.NodeTemplate{InstanceTypes: []string{"m6i.large"}})),
			provider.CodeThrottled, true, "RequestLimitExceeded"},
		{"an unknown instance type", newPool("p", withTemplate(v1alpha1.NodeTemplate{InstanceTypes: []string{"Standard_D4s_v5", "Standard_D4s_v9"}})),
			provider.CodeInvalidTemplate, false, "instance type Standard_D4s_v9 does not exist"},
		// The template is checked before the simulated failure, as a cloud
		// validates a request before it looks for capacity.
		{"an unknown instance type, failing pool", newPool("p",
			withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureInsufficientCapacity}),
			withTemplate(v1alpha1.NodeTemplate{InstanceTypes: []string{"huge"}})),
			provider.CodeInvalidTemplate, false, "instance type huge does not exist"},
		{"no size sold as spot", newPool("p", withTemplate(v1alpha1.NodeTemplate{Capacity: v1alpha1.CapacitySpot, InstanceTypes: []string{"Standard_B2s"}})),
			provider.CodeInvalidTemplate, false, "none of the instance types Standard_B2s is sold as spot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, client, clk := newProvider()
			m, err := p.Create(ctx, tc.pool, "")
			if m != nil {
				t.Errorf("Create returned a machine: %+v", m)
			}
			refusal, ok := provider.AsError(err)
			if !ok {
				t.Fatalf("Create error %v, want a *provider.Error", err)
			}
			if refusal.Code != tc.code || refusal.Retryable != tc.retryable || !strings.Contains(refusal.Message, tc.message) {
				t.Errorf("refusal %+v, want code %s, retryable %v, a message with %q", refusal, tc.code, tc.retryable, tc.message)
			}
			if want := time.Duration(0); tc.code == provider.CodeThrottled && refusal.RetryAfter != ThrottledRetryAfter || tc.code != provider.CodeThrottled && refusal.RetryAfter != want {
				t.Errorf("RetryAfter %v", refusal.RetryAfter)
			}
			clk.Step(time.Hour)
			p.register(ctx)
			if names := nodeNames(t, client); len(names) > 0 {
				t.Errorf("nodes %v registered for a refused machine", names)
			}
			if ms, err := p.List(ctx, tc.pool.Name); err != nil || len(ms) > 0 {
				t.Errorf("List = %v, %v; want no machines", ms, err)
			}
		})
	}
}

func TestNeverJoins(t *testing.T) {
	ctx := context.Background()
	p, client, clk := newProvider()
	m, err := p.Create(ctx, newPool("p", withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureNeverJoins})), "")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for range 3 {
		clk.Step(time.Hour)
		if next := p.register(ctx); !next.IsZero() {
			t.Errorf("a registration is due at %v", next)
		}
	}
	if names := nodeNames(t, client); len(names) > 0 {
		t.Errorf("nodes %v registered", names)
	}
	got, err := p.Get(ctx, m.Name)
	if err != nil || got.State != provider.StateLaunching {
		t.Errorf("Get = %+v, %v; want Launching", got, err)
	}
	if err := p.Delete(ctx, m.Name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := p.Get(ctx, m.Name); !provider.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want not found", err)
	}
}

func TestDelete(t *testing.T) {
	foreign := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "aks-user-12345678-vmss000000", Labels: map[string]string{"kubernetes.azure.com/agentpool": "user"}},
		Spec:       corev1.NodeSpec{ProviderID: "azure:///subscriptions/x/virtualMachines/0"},
	}
	// Labelled as a pool's but made by another provider: not kwok's to delete.
	otherCloud := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "p-aws00", Labels: map[string]string{provider.LabelNodePool: "p"}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123"},
	}
	for _, tc := range []struct {
		name string
		// deleteAt: "booting" deletes before the boot delay passes,
		// "registered" after the Node registered.
		deleteAt string
	}{{"during boot", "booting"}, {"after registration", "registered"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, client, clk := newProvider(foreign.DeepCopy(), otherCloud.DeepCopy())
			m, err := p.Create(ctx, newPool("p"), "")
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if tc.deleteAt == "registered" {
				clk.Step(v1alpha1.DefaultKwokBootDelay)
				p.register(ctx)
				if _, ok := getNode(t, client, m.Name); !ok {
					t.Fatalf("node did not register")
				}
			}
			if err := p.Delete(ctx, m.Name); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			clk.Step(time.Hour)
			p.register(ctx)
			if _, ok := getNode(t, client, m.Name); ok {
				t.Errorf("node %s exists after Delete", m.Name)
			}
			if _, err := p.Get(ctx, m.Name); !provider.IsNotFound(err) {
				t.Errorf("Get after Delete: %v, want not found", err)
			}
			// Idempotent, and blind to what it did not make.
			for _, name := range []string{m.Name, "p-never", foreign.Name, otherCloud.Name} {
				if err := p.Delete(ctx, name); err != nil {
					t.Errorf("Delete(%s): %v", name, err)
				}
			}
			if got, want := nodeNames(t, client), []string{foreign.Name, otherCloud.Name}; !slices.Equal(got, want) {
				t.Errorf("nodes %v, want %v", got, want)
			}
		})
	}
}

// A machine deleted while its Node is being created must not leave the Node.
func TestDeleteWhileRegistering(t *testing.T) {
	ctx := context.Background()
	p, client, clk := newProvider()
	m, err := p.Create(ctx, newPool("p"), "")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	client.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if err := p.Delete(ctx, m.Name); err != nil {
			t.Errorf("Delete: %v", err)
		}
		return false, nil, nil // and let the Node be created
	})
	clk.Step(v1alpha1.DefaultKwokBootDelay)
	p.register(ctx)
	if _, ok := getNode(t, client, m.Name); ok {
		t.Errorf("node %s outlived its machine", m.Name)
	}
	if _, err := p.Get(ctx, m.Name); !provider.IsNotFound(err) {
		t.Errorf("Get: %v, want not found", err)
	}
}

func TestRegistrationErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		name  string
		err   error
		state provider.State // after the first attempt
		node  bool           // after the retry delay
	}{
		{"transient", apierrors.NewServerTimeout(gr, "create", 1), provider.StateLaunching, true},
		{"refused", apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "p", nil), provider.StateFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, client, clk := newProvider()
			m, err := p.Create(ctx, newPool("p"), "")
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			failed := false
			client.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if failed {
					return false, nil, nil
				}
				failed = true
				return true, nil, tc.err
			})
			clk.Step(v1alpha1.DefaultKwokBootDelay)
			next := p.register(ctx)
			got, err := p.Get(ctx, m.Name)
			if err != nil || got.State != tc.state {
				t.Fatalf("Get after a failed registration = %+v, %v; want %s", got, err, tc.state)
			}
			if tc.state == provider.StateFailed && !strings.Contains(got.Message, "registering node") {
				t.Errorf("message %q says nothing of the registration", got.Message)
			}
			if want := clk.Now().Add(DefaultRegistrationRetry); tc.node && !next.Equal(want) {
				t.Errorf("next registration at %v, want %v", next, want)
			}
			clk.Step(DefaultRegistrationRetry)
			p.register(ctx)
			if _, ok := getNode(t, client, m.Name); ok != tc.node {
				t.Errorf("node registered after the retry delay: %v, want %v", ok, tc.node)
			}
		})
	}
}

func TestListAndGet(t *testing.T) {
	ctx := context.Background()
	p, client, clk := newProvider()
	create := func(pool *v1alpha1.NodePool) *provider.Machine {
		t.Helper()
		m, err := p.Create(ctx, pool, "")
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		return m
	}
	running := create(newPool("a"))
	clk.Step(v1alpha1.DefaultKwokBootDelay)
	p.register(ctx)
	launching := create(newPool("a"))
	stuck := create(newPool("a", withKwok(v1alpha1.KwokProviderSpec{Failure: v1alpha1.KwokFailureNeverJoins})))
	other := create(newPool("b"))
	clk.Step(time.Second)
	p.register(ctx)

	// A Node being deleted, held by a finalizer, is a machine Deleting.
	node, _ := getNode(t, client, running.Name)
	node.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	node.Finalizers = []string{"sluice.dev/termination"}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking node deleted: %v", err)
	}

	for _, tc := range []struct {
		pool string
		want map[string]provider.State
	}{
		{"a", map[string]provider.State{running.Name: provider.StateDeleting, launching.Name: provider.StateLaunching, stuck.Name: provider.StateLaunching}},
		{"b", map[string]provider.State{other.Name: provider.StateLaunching}},
		{"c", map[string]provider.State{}},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			machines, err := p.List(ctx, tc.pool)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			got := map[string]provider.State{}
			for _, m := range machines {
				got[m.Name] = m.State
				if m.Pool != tc.pool {
					t.Errorf("machine %s of pool %s listed for %s", m.Name, m.Pool, tc.pool)
				}
				one, err := p.Get(ctx, m.Name)
				if err != nil || *one != *m {
					t.Errorf("Get(%s) = %+v, %v; List said %+v", m.Name, one, err, m)
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("List = %v, want %v", got, tc.want)
			}
			if !slices.IsSortedFunc(machines, func(a, b *provider.Machine) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("List not sorted by name")
			}
		})
	}
	if _, err := p.Get(ctx, "a-zzzzz"); !provider.IsNotFound(err) {
		t.Errorf("Get of an unknown machine: %v, want not found", err)
	}
}

func TestANewProviderFindsRunningMachinesFromNodes(t *testing.T) {
	ctx := context.Background()
	first, client, clk := newProvider(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fixture-0"}})
	var running []string
	for range 2 {
		m, err := first.Create(ctx, newPool("p", withTemplate(v1alpha1.NodeTemplate{Image: "img-1", Capacity: v1alpha1.CapacitySpot})), "")
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		running = append(running, m.Name)
	}
	clk.Step(v1alpha1.DefaultKwokBootDelay)
	first.register(ctx)
	booting, err := first.Create(ctx, newPool("p"), "")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}

	// The controller restarts.
	second := New(client, clk, Options{})
	machines, err := second.List(ctx, "p")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var names []string
	for _, m := range machines {
		names = append(names, m.Name)
		want := provider.Machine{
			Name: m.Name, Pool: "p", ProviderID: "kwok://" + m.Name, NodeName: m.Name, InstanceType: DefaultInstanceType,
			Capacity: v1alpha1.CapacitySpot, Zone: m.Zone, Image: "img-1", State: provider.StateRunning,
		}
		if *m != want || m.Zone == "" {
			t.Errorf("rediscovered %+v, want %+v", *m, want)
		}
	}
	slices.Sort(running)
	if !slices.Equal(names, running) {
		t.Errorf("rediscovered %v, want %v", names, running)
	}
	// Forgotten, unlike a cloud would: it never registers either.
	if _, err := second.Get(ctx, booting.Name); !provider.IsNotFound(err) {
		t.Errorf("Get of a machine booting across the restart: %v, want not found", err)
	}
	if _, err := second.Get(ctx, "fixture-0"); !provider.IsNotFound(err) {
		t.Errorf("Get of a node kwok did not make: %v, want not found", err)
	}
	if err := second.Delete(ctx, running[0]); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok := getNode(t, client, running[0]); ok {
		t.Errorf("rediscovered machine's node survived Delete")
	}
}

func TestRunRegistersOnTheClockAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, client, clk := newProvider()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	m, err := p.Create(ctx, newPool("p"), "")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	waitFor(t, "Run to wait for the boot delay", clk.HasWaiters)
	if _, ok := getNode(t, client, m.Name); ok {
		t.Fatalf("node registered before the boot delay")
	}
	clk.Step(v1alpha1.DefaultKwokBootDelay)
	waitFor(t, "the node to register", func() bool {
		_, err := client.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
		return err == nil
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return when its context ended")
	}
}

// waitFor polls until cond holds, for at most ten seconds of real time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAzureFamily(t *testing.T) {
	for size, want := range map[string]string{
		"Standard_D4s_v5":  "standardDSv5Family",
		"Standard_D4as_v5": "standardDASv5Family",
		"Standard_F8s_v2":  "standardFSv2Family",
		"Standard_B2s":     "standardBSFamily",
	} {
		if got := azureFamily(size); got != want {
			t.Errorf("azureFamily(%s) = %s, want %s", size, got, want)
		}
	}
}

// The template's startup taints are on the Node when it registers and are
// lifted StartupTaintsLifted later, as a CNI would; its other taints stay.
func TestStartupTaintsAreLiftedAfterRegistration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keep := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}
	p, client, clk := newProvider()
	m, err := p.Create(ctx, newPool("batch", withKwok(v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{}}),
		withTemplate(v1alpha1.NodeTemplate{Taints: []corev1.Taint{keep}, StartupTaints: []corev1.Taint{startup}})), "")
	if err != nil {
		t.Fatal(err)
	}
	p.register(ctx)
	taints := func() []corev1.Taint {
		n, ok := getNode(t, client, m.Name)
		if !ok {
			t.Fatal("no node")
		}
		return n.Spec.Taints
	}
	if got := taints(); len(got) != 3 {
		t.Fatalf("taints at registration = %v, want the template's, the startup taint and %s", got, provider.Unregistered.Key)
	}
	waitFor(t, "the lift to wait on the clock", func() bool { return clk.HasWaiters() })
	clk.Step(DefaultStartupTaintsLifted)
	waitFor(t, "the startup taint lifted", func() bool { return len(taints()) == 2 })
	if got := taints(); got[0].Key != keep.Key || got[1].Key != provider.Unregistered.Key {
		t.Errorf("taints after the lift = %v, want only %v", got, keep)
	}
}

// Asking again for a machine of the same name (a controller that crashed
// after asking) returns that machine, booting or running, and makes no
// second one.
func TestCreateIsIdempotentByName(t *testing.T) {
	ctx := context.Background()
	p, client, _ := newProvider()
	pool := newPool("p", withKwok(v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{}}))
	first, err := p.Create(ctx, pool, "p-fixed")
	if err != nil || first.Name != "p-fixed" {
		t.Fatalf("Create = %+v, %v; want machine p-fixed", first, err)
	}
	again, err := p.Create(ctx, pool, "p-fixed")
	if err != nil || again.Name != "p-fixed" || again.State != provider.StateLaunching {
		t.Fatalf("Create again while booting = %+v, %v; want the same launching machine", again, err)
	}
	p.register(ctx)
	again, err = p.Create(ctx, pool, "p-fixed")
	if err != nil || again.State != provider.StateRunning {
		t.Fatalf("Create again once registered = %+v, %v; want the running machine", again, err)
	}
	if names := nodeNames(t, client); len(names) != 1 {
		t.Errorf("nodes after three Creates of one name: %v, want one", names)
	}
}

// The simulated cloud has the images named like real ones, and refuses any
// other as a cloud refuses an image it does not have.
func TestCheckImage(t *testing.T) {
	for _, ok := range []string{"", "AKSUbuntu-2204gen2containerd-202611.01.0", "AzureLinux-V2gen2-202612.01.0", "ami-0c2d3e8f1a9b7c6d5", "ami-0abc1234", "img-7"} {
		if err := CheckImage(ok); err != nil {
			t.Errorf("CheckImage(%q): %v; want it known", ok, err)
		}
	}
	for _, bad := range []string{"ubuntu-latest", "ami-0abc", "img-", "AKSUbuntu-2204gen2containerd-latest"} {
		err := CheckImage(bad)
		if pe, ok := provider.AsError(err); !ok || pe.Code != provider.CodeInvalidTemplate {
			t.Errorf("CheckImage(%q): %v; want an InvalidTemplate refusal", bad, err)
		}
	}
}

// With NodeNames the machine's Node registers under another name, as a
// cloud's kubelet names it; the machine keeps its name, read back from the
// Node's providerID, and Get, Delete and List still go by it.
func TestNodesNamedAsACloudNamesThem(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(start)
	p := New(client, clk, Options{NodeNames: func(m string) string { return "ip-10-0-0-1." + m }})
	m, err := p.Create(ctx, newPool("p"), "p-abcde")
	if err != nil {
		t.Fatal(err)
	}
	if m.NodeName != "ip-10-0-0-1.p-abcde" {
		t.Errorf("machine says its Node is %q; want ip-10-0-0-1.p-abcde", m.NodeName)
	}
	clk.Step(v1alpha1.DefaultKwokBootDelay)
	p.register(ctx)
	node, ok := getNode(t, client, "ip-10-0-0-1.p-abcde")
	if !ok {
		t.Fatal("no Node ip-10-0-0-1.p-abcde after the boot delay")
	}
	if got := p.NameOf(node); got != "p-abcde" || node.Labels[corev1.LabelHostname] != node.Name {
		t.Errorf("NameOf = %q, hostname label %q; want p-abcde and the Node's name", got, node.Labels[corev1.LabelHostname])
	}
	if got, err := p.Get(ctx, "p-abcde"); err != nil || got.Name != "p-abcde" || got.State != provider.StateRunning {
		t.Errorf("Get(p-abcde) = %+v, %v; want the running machine", got, err)
	}
	if list, err := p.List(ctx, "p"); err != nil || len(list) != 1 || list[0].Name != "p-abcde" {
		t.Errorf("List(p) = %v, %v; want p-abcde", list, err)
	}
	if err := p.Delete(ctx, "p-abcde"); err != nil {
		t.Fatal(err)
	}
	if _, ok := getNode(t, client, "ip-10-0-0-1.p-abcde"); ok {
		t.Error("the Node is still there after Delete")
	}
}
