package providertest

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Harness is what a provider's tests give the suite.
type Harness struct {
	// Registration is the provider's, for how it treats images.
	Registration provider.Registration
	// New makes a fresh cloud with two pools in it, for one subtest.
	New func(t *testing.T) *Cloud
	// Refusals are refusals Cloud.Refuse can make besides the ones every
	// provider must (Documented).
	Refusals []Refusal
	// CannotRefuse says, by code, why the provider's Create never answers
	// one of the Documented refusals (its cloud does not refuse that way,
	// or shows it elsewhere); that subtest is skipped with the reason.
	// Empty for a cloud that refuses as every one of them says.
	CannotRefuse map[string]string
	// NoLostAnswer says why the cloud cannot lose an answer ("": it can).
	NoLostAnswer string
	// NoToken says why the provider's cloud token cannot be shown to keep
	// a repeated create from doubling on its own ("": it can, with
	// Cloud.TokenOnly).
	NoToken string
	// Images are two images the cloud has, in a form Images.Check takes.
	Images [2]string
	// BadImage is an image Images.Check refuses.
	BadImage string
	// TaintsFromUser, when the provider leaves the unregistered taint to the
	// user's machine template rather than adding it itself, says so; the
	// cloud's template is then made as the provider's docs tell users to.
	TaintsFromUser string
}

// Cloud is one fresh cloud a subtest runs against.
type Cloud struct {
	Provider provider.Provider
	// Pool is the pool the suite makes machines for; Other is a second
	// pool of the same provider in the same cloud (over the same group or
	// set where the provider has them).
	Pool, Other *v1alpha1.NodePool
	// Foreign makes a machine of Pool's group or set that sluice did not
	// ask for (the group's own scaling, a cluster autoscaler's, a
	// pre-existing Node).
	Foreign func(t *testing.T)
	// Refuse makes the cloud refuse the next create with the code, the way
	// the vendor documents that refusal, and returns the pool to create it
	// for (Pool, or a copy whose spec asks for the refusal).
	Refuse func(t *testing.T, code string) *v1alpha1.NodePool
	// LoseAnswer makes the cloud carry out the next create and lose its
	// answer, as a connection reset after the cloud acted does.
	LoseAnswer func(t *testing.T)
	// TokenOnly makes the provider's own lookups of a machine by name find
	// nothing from now on, so that only the cloud's idempotency token can
	// keep a repeated create from making a second machine.
	TokenOnly func(t *testing.T)
	// Settle lets the cloud finish what it started (a Node registering);
	// nil when there is nothing to wait for.
	Settle func(t *testing.T)
	// Taints are the taints the machine's kubelet registers its Node with,
	// as the cloud (not the provider) reads them.
	Taints func(t *testing.T, m *provider.Machine) []corev1.Taint
	// Count is how many machines the cloud holds for the pools' group or
	// set, whoever asked for them, as the cloud (not the provider) counts
	// them: what List cannot show, a machine nobody claims.
	Count func(t *testing.T) int
	// Restarts is how many restarts in place of the machine the cloud
	// accepted, as the cloud (not the provider) counts them. Every cloud
	// whose provider is a provider.Rebooter should give it: without it the
	// reboot subtest checks the rest and is skipped, saying that whether
	// the cloud restarted the machine went unchecked.
	Restarts func(t *testing.T, m *provider.Machine) int
}

// Refusal is a refusal a provider's Create answers with.
type Refusal struct {
	Code      string
	Retryable bool
}

// Documented are the refusals every provider makes as provider.Error
// documents them: no capacity now may pass, nobody but a person raises a
// quota, a throttled API takes requests again later.
var Documented = []Refusal{
	{provider.CodeInsufficientCapacity, true},
	{provider.CodeQuotaExceeded, false},
	{provider.CodeThrottled, true},
}

// Run runs the suite against the harness's clouds.
func Run(t *testing.T, h Harness) {
	// Whether the provider is a provider.Rebooter, as the clouds made so
	// far show it, so that a provider that is not one makes no cloud only
	// for the reboot subtest to be skipped.
	var seen, rebooter bool
	newCloud := h.New
	h.New = func(t *testing.T) *Cloud {
		c := newCloud(t)
		_, rebooter = c.Provider.(provider.Rebooter)
		seen = true
		return c
	}
	reboot := func(t *testing.T, h Harness) {
		if seen && !rebooter {
			skipNoRebooter(t, h)
		}
		rebootsInPlace(t, h)
	}
	for _, tc := range []struct {
		name string
		test func(t *testing.T, h Harness)
	}{
		{"Create is idempotent by name", createIsIdempotent},
		{"Delete is idempotent", deleteIsIdempotent},
		{"List finds the pool's machines only", listFindsThePoolsMachinesOnly},
		{"refusals have the documented codes", refusalsHaveTheirCodes},
		{"a new machine registers with the unregistered taint", registersTainted},
		{"the image is honoured or refused", imageIsHonoured},
		{"a lost answer neither leaks nor doubles", lostAnswer},
		{"the cloud token alone keeps a create single", tokenOnly},
		{"a reboot restarts the machine in place", reboot},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, h) })
	}
}

func createIsIdempotent(t *testing.T, h Harness) {
	ctx, c := start(t, h)
	name := provider.NewName(c.Pool.Name)
	held := c.Count(t)
	first := create(ctx, t, c, c.Pool, name)
	again := create(ctx, t, c, c.Pool, name)
	sameMachine(t, first, again)
	settle(t, c)
	sameMachine(t, first, create(ctx, t, c, c.Pool, name))
	if n := count(list(ctx, t, c, c.Pool.Name), name); n != 1 {
		t.Errorf("List(%s) holds %d machines named %s after three Creates of it; want 1", c.Pool.Name, n, name)
	}
	if n := c.Count(t); n != held+1 {
		t.Errorf("the cloud holds %d machines after three Creates of one name; want %d, one more than before", n, held+1)
	}
}

func deleteIsIdempotent(t *testing.T, h Harness) {
	ctx, c := start(t, h)
	name := provider.NewName(c.Pool.Name)
	create(ctx, t, c, c.Pool, name)
	settle(t, c)
	for i := range 2 {
		if err := c.Provider.Delete(ctx, name); err != nil {
			t.Fatalf("Delete %d of %s: %v", i+1, name, err)
		}
	}
	settle(t, c)
	if m, err := c.Provider.Get(ctx, name); !provider.IsNotFound(err) {
		t.Errorf("Get(%s) after Delete = %+v, %v; want not found", name, m, err)
	}
	if n := count(list(ctx, t, c, c.Pool.Name), name); n != 0 {
		t.Errorf("List(%s) still holds %s after Delete", c.Pool.Name, name)
	}
	never := provider.NewName(c.Pool.Name)
	if err := c.Provider.Delete(ctx, never); err != nil {
		t.Errorf("Delete(%s) of a machine never made: %v; want nil", never, err)
	}
}

func listFindsThePoolsMachinesOnly(t *testing.T, h Harness) {
	ctx, c := start(t, h)
	c.Foreign(t)
	ours, theirs := provider.NewName(c.Pool.Name), provider.NewName(c.Other.Name)
	create(ctx, t, c, c.Other, theirs)
	create(ctx, t, c, c.Pool, ours)
	settle(t, c)
	for pool, want := range map[string]string{c.Pool.Name: ours, c.Other.Name: theirs} {
		got := list(ctx, t, c, pool)
		if len(got) != 1 || got[0].Name != want || got[0].Pool != pool {
			t.Errorf("List(%s) = %s; want only %s of pool %s (not the other pool's, nor the one sluice did not ask for)", pool, describe(got), want, pool)
		}
	}
}

func refusalsHaveTheirCodes(t *testing.T, h Harness) {
	for code := range h.CannotRefuse {
		if !slices.ContainsFunc(Documented, func(r Refusal) bool { return r.Code == code }) {
			t.Errorf("the harness says why Create never refuses %s, which is no Documented refusal", code)
		}
	}
	for _, want := range append(slices.Clone(Documented), h.Refusals...) {
		t.Run(want.Code, func(t *testing.T) {
			if why, ok := h.CannotRefuse[want.Code]; ok {
				t.Skip(why)
			}
			ctx, c := start(t, h)
			kept := provider.NewName(c.Pool.Name)
			create(ctx, t, c, c.Pool, kept)
			settle(t, c)
			before, held := list(ctx, t, c, c.Pool.Name), c.Count(t)

			name := provider.NewName(c.Pool.Name)
			m, err := c.Provider.Create(ctx, c.Refuse(t, want.Code), name)
			got, ok := provider.AsError(err)
			if !ok || got.Code != want.Code || got.Retryable != want.Retryable {
				t.Errorf("Create refused with %s = %+v, %v; want a provider.Error %s, retryable %v", want.Code, m, err, want.Code, want.Retryable)
			}
			settle(t, c)
			if after := list(ctx, t, c, c.Pool.Name); !slices.Equal(names(after), names(before)) {
				t.Errorf("List(%s) after the refusal = %s; want it as before, %s", c.Pool.Name, describe(after), describe(before))
			}
			if n := c.Count(t); n != held {
				t.Errorf("the cloud holds %d machines after the refusal; want %d, as before", n, held)
			}
			if m, err := c.Provider.Get(ctx, name); !provider.IsNotFound(err) {
				t.Errorf("Get(%s) of the refused machine = %+v, %v; want not found", name, m, err)
			}
		})
	}
}

func registersTainted(t *testing.T, h Harness) {
	if h.TaintsFromUser != "" {
		t.Logf("the cloud's template registers the taint itself: %s", h.TaintsFromUser)
	}
	ctx, c := start(t, h)
	m := create(ctx, t, c, c.Pool, provider.NewName(c.Pool.Name))
	settle(t, c)
	if m.ProviderID == "" {
		m = get(ctx, t, c, m.Name)
	}
	if taints := c.Taints(t, m); !slices.Contains(taints, provider.Unregistered) {
		t.Errorf("machine %s's kubelet registers with taints %v; want %s among them", m.Name, taints, provider.Unregistered.ToString())
	}
}

func imageIsHonoured(t *testing.T, h Harness) {
	images := h.Registration.Images
	if !images.Sets() {
		t.Skipf("%s cannot set images: %s", h.Registration.Name, images.Unsupported)
	}
	if images.Check == nil {
		t.Errorf("%s sets images but checks none: a typo in a template's image would reach the cloud", h.Registration.Name)
	} else if err := images.Check(h.BadImage); err == nil {
		t.Errorf("Images.Check(%q) = nil; want it refused", h.BadImage)
	}
	ctx, c := start(t, h)
	// The second image first: a provider that boots its group's or set's
	// own image whatever is asked fails here, not by luck.
	for _, image := range []string{h.Images[1], h.Images[0]} {
		if err := images.Check(image); err != nil {
			t.Fatalf("the harness's image %q is refused: %v", image, err)
		}
		pool := c.Pool.DeepCopy()
		if pool.Spec.Template == nil {
			pool.Spec.Template = &v1alpha1.NodeTemplate{}
		}
		pool.Spec.Template.Image = image
		m := create(ctx, t, c, pool, provider.NewName(pool.Name))
		settle(t, c)
		if got := get(ctx, t, c, m.Name); got.Image != image {
			t.Errorf("machine %s of a template asking for image %s runs %q", m.Name, image, got.Image)
		}
	}
}

func lostAnswer(t *testing.T, h Harness) {
	if h.NoLostAnswer != "" {
		t.Skip(h.NoLostAnswer)
	}
	ctx, c := start(t, h)
	name := provider.NewName(c.Pool.Name)
	held := c.Count(t)
	c.LoseAnswer(t)
	first, err := c.Provider.Create(ctx, c.Pool, name)
	if err == nil {
		// The provider knew how to go on without the answer.
		t.Logf("Create with its answer lost returned machine %s (%s)", first.Name, first.State)
		if first.Name != name {
			t.Errorf("Create with its answer lost returned machine %q; want %s", first.Name, name)
		}
	}
	again := create(ctx, t, c, c.Pool, name)
	if err == nil {
		sameMachine(t, first, again)
	}
	settle(t, c)
	if n := count(list(ctx, t, c, c.Pool.Name), name); n != 1 {
		t.Errorf("List(%s) holds %d machines named %s after a lost answer and a second Create; want 1", c.Pool.Name, n, name)
	}
	if n := c.Count(t); n != held+1 {
		t.Errorf("the cloud holds %d machines after a lost answer and a second Create; want %d, one more than before", n, held+1)
	}
}

func tokenOnly(t *testing.T, h Harness) {
	if h.NoToken != "" {
		t.Skip(h.NoToken)
	}
	ctx, c := start(t, h)
	name := provider.NewName(c.Pool.Name)
	held := c.Count(t)
	c.LoseAnswer(t)
	if _, err := c.Provider.Create(ctx, c.Pool, name); err == nil {
		t.Fatal("Create with its answer lost succeeded; the harness's LoseAnswer must make it fail")
	}
	c.TokenOnly(t)
	create(ctx, t, c, c.Pool, name)
	settle(t, c)
	if n := count(list(ctx, t, c, c.Pool.Name), name); n != 1 {
		t.Errorf("List(%s) holds %d machines named %s when only the cloud token could tell; want 1", c.Pool.Name, n, name)
	}
	if n := c.Count(t); n != held+1 {
		t.Errorf("the cloud holds %d machines when only the cloud token could tell; want %d, one more than before", n, held+1)
	}
}

// rebootsInPlace runs where the provider is a provider.Rebooter: a reboot
// of a machine is one restart the cloud accepted, of the same machine (no
// machine made or removed); a machine never made, or deleted, is not
// found, and its reboot brings nothing back.
func rebootsInPlace(t *testing.T, h Harness) {
	ctx, c := start(t, h)
	r, ok := c.Provider.(provider.Rebooter)
	if !ok {
		skipNoRebooter(t, h)
	}
	restarts := c.Restarts
	if restarts == nil {
		// Skipped at the end, once the rest is checked: a failure before
		// the skip still fails the subtest.
		defer t.Skipf("%s is a provider.Rebooter, but the harness gives no Cloud.Restarts: whether the cloud restarted the machine is not checked", h.Registration.Name)
		restarts = func(*testing.T, *provider.Machine) int { return -1 }
	}
	name := provider.NewName(c.Pool.Name)
	create(ctx, t, c, c.Pool, name)
	settle(t, c)
	before, held := get(ctx, t, c, name), c.Count(t)
	if n := restarts(t, before); n > 0 {
		t.Fatalf("the cloud counts %d restarts of machine %s before any reboot", n, name)
	}
	if err := r.Reboot(ctx, name); err != nil {
		t.Fatalf("Reboot(%s): %v", name, err)
	}
	if n := restarts(t, before); n != 1 && c.Restarts != nil {
		t.Errorf("the cloud accepted %d restarts of machine %s (%s) after one Reboot; want 1", n, name, before.ProviderID)
	}
	settle(t, c)
	if after := get(ctx, t, c, name); after.ProviderID != before.ProviderID {
		t.Errorf("machine %s is %s after its reboot; want the same machine, %s", name, after.ProviderID, before.ProviderID)
	}
	if n := c.Count(t); n != held {
		t.Errorf("the cloud holds %d machines after a reboot; want %d, as before", n, held)
	}

	never := provider.NewName(c.Pool.Name)
	if err := r.Reboot(ctx, never); !provider.IsNotFound(err) {
		t.Errorf("Reboot(%s) of a machine never made = %v; want an error for which provider.IsNotFound is true", never, err)
	}
	if err := c.Provider.Delete(ctx, name); err != nil {
		t.Fatalf("Delete(%s): %v", name, err)
	}
	settle(t, c)
	if err := r.Reboot(ctx, name); !provider.IsNotFound(err) {
		t.Errorf("Reboot(%s) of a deleted machine = %v; want an error for which provider.IsNotFound is true", name, err)
	}
	settle(t, c)
	if n := c.Count(t); n != held-1 {
		t.Errorf("the cloud holds %d machines after a deleted machine's reboot; want %d (the reboot brings nothing back)", n, held-1)
	}
}

func skipNoRebooter(t *testing.T, h Harness) {
	t.Helper()
	t.Skipf("%s is no provider.Rebooter: a node it cannot reboot is replaced", h.Registration.Name)
}

// start makes the subtest's cloud, and a context that ends with it.
func start(t *testing.T, h Harness) (context.Context, *Cloud) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, h.New(t)
}

func create(ctx context.Context, t *testing.T, c *Cloud, pool *v1alpha1.NodePool, name string) *provider.Machine {
	t.Helper()
	m, err := c.Provider.Create(ctx, pool, name)
	if err != nil {
		t.Fatalf("Create(%s, %s): %v", pool.Name, name, err)
	}
	if m.Name != name || m.Pool != pool.Name {
		t.Errorf("Create(%s, %s) = machine %s of pool %s; want %s of %s", pool.Name, name, m.Name, m.Pool, name, pool.Name)
	}
	return m
}

func get(ctx context.Context, t *testing.T, c *Cloud, name string) *provider.Machine {
	t.Helper()
	m, err := c.Provider.Get(ctx, name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return m
}

func list(ctx context.Context, t *testing.T, c *Cloud, pool string) []*provider.Machine {
	t.Helper()
	ms, err := c.Provider.List(ctx, pool)
	if err != nil {
		t.Fatalf("List(%s): %v", pool, err)
	}
	return ms
}

func settle(t *testing.T, c *Cloud) {
	t.Helper()
	if c.Settle != nil {
		c.Settle(t)
	}
}

// sameMachine fails unless b is a: the same name, and the same providerID
// once both know it.
func sameMachine(t *testing.T, a, b *provider.Machine) {
	t.Helper()
	if b.Name != a.Name || a.ProviderID != "" && b.ProviderID != "" && b.ProviderID != a.ProviderID {
		t.Errorf("asked again by name: machine %s (%s); want the same machine %s (%s)", b.Name, b.ProviderID, a.Name, a.ProviderID)
	}
}

func count(ms []*provider.Machine, name string) int {
	n := 0
	for _, m := range ms {
		if m.Name == name {
			n++
		}
	}
	return n
}

func names(ms []*provider.Machine) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

func describe(ms []*provider.Machine) string {
	out := "["
	for i, m := range ms {
		if i > 0 {
			out += " "
		}
		out += m.Name + "(pool " + m.Pool + ")"
	}
	return out + "]"
}
