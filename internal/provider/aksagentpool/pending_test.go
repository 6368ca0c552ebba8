package aksagentpool_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool/akstest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// nodeOf is the Node the machine's kubelet registers.
func nodeOf(t *testing.T, w *world, machine string) *corev1.Node {
	t.Helper()
	_, _, name, id, ok := w.cloud.Kubelet(machine)
	if !ok {
		t.Fatalf("no kubelet for %s", machine)
	}
	return &corev1.Node{Spec: corev1.NodeSpec{ProviderID: id}, ObjectMeta: metav1ObjectMeta(name)}
}

// A restarted controller that has listed nothing deletes a Node the agent
// pool had before sluice through AKS; one that cannot place the Node (no
// NodePool names its agent pool) says so instead of letting it go.
func TestAFreshProviderDeletesAPreSluiceNode(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 2, akstest.Pool{})
	old := w.cloud.AddMachine("web")
	p := w.provider(-1)
	name := p.NameOf(nodeOf(t, w, old))
	if name == "" {
		t.Fatal("NameOf gave a Node of the agent pool no name")
	}
	if err := p.Delete(ctx(t), name); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.cloud.Machines("web")[old]; ok || w.cloud.PoolCount("web") != 2 {
		t.Errorf("machine %s still there (count %d) after Delete(%s)", old, w.cloud.PoolCount("web"), name)
	}

	lost := newWorld()
	lost.cloud.AddPool("api", 1, akstest.Pool{})
	machine := ""
	for m := range lost.cloud.Machines("api") {
		machine = m
	}
	q := lost.provider(-1) // its NodePools name agent pool web only
	if err := q.Delete(ctx(t), q.NameOf(nodeOf(t, lost, machine))); err == nil {
		t.Error("Delete of a machine no NodePool's agent pool holds = nil; want an error, so the Node is kept")
	}
	if len(lost.cloud.Machines("api")) != 1 {
		t.Error("the machine went")
	}
}

// AKS refusing the PUT changed nothing: a machine new since the claim (an
// upgrade's surge node) is not sluice's, and the claim goes.
func TestARefusedScaleOutTakesNoMachine(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	var once sync.Once
	w.cloud.Answered = func(r akstest.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/machines") {
			once.Do(func() {
				w.cloud.StartOperation("web", "Upgrading")
				w.cloud.AddSurge("web")
			})
		}
	}
	m, err := w.provider(-1).Create(ctx(t), pool("web", "web"), "web-a1b2c")
	if e, ok := provider.AsError(err); !ok || e.Code != aksagentpool.CodeOperationInProgress {
		t.Fatalf("Create = %+v, %v; want %s", m, err, aksagentpool.CodeOperationInProgress)
	}
	if c, _ := w.claims.Get(ctx(t), "web-a1b2c"); c != nil {
		t.Errorf("claim %+v kept after AKS refused", c)
	}
}

// cutShort makes a Create whose scale-out AKS accepted and whose polling
// ends (a controller stopped): the claim stays, its machine not known.
func cutShort(t *testing.T, w *world, p *aksagentpool.Provider, name string) {
	t.Helper()
	first, stop := context.WithCancel(context.Background())
	defer stop()
	w.cloud.Answered = func(r akstest.Request) {
		if r.Method == http.MethodPut {
			stop()
		}
	}
	defer func() { w.cloud.Answered = nil }()
	if m, err := p.Create(first, pool("web", "web"), name); err != nil || m.State != provider.StateLaunching {
		t.Fatalf("Create cut short = %+v, %v; want Launching", m, err)
	}
}

// Deleting a machine whose count AKS raised but whose VM it has not
// listed yet keeps the claim (a retryable error) until the machine shows,
// then deletes it: nothing is left running.
func TestDeleteWaitsForTheMachineOfARaisedCount(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	w.cloud.Hold()
	p := w.provider(-1)
	cutShort(t, w, p, "web-a1b2c")
	err := p.Delete(ctx(t), "web-a1b2c")
	if e, ok := provider.AsError(err); !ok || !e.Retryable {
		t.Fatalf("Delete before AKS listed the machine = %v; want a retryable error", err)
	}
	if c, _ := w.claims.Get(ctx(t), "web-a1b2c"); c == nil {
		t.Fatal("the claim went before its machine showed")
	}
	w.cloud.Release()
	w.cloud.FinishOperations()
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	if n := len(w.cloud.Machines("web")); n != 1 || w.cloud.PoolCount("web") != 1 {
		t.Errorf("%d machines, count %d; want the one the pool had", n, w.cloud.PoolCount("web"))
	}
}

// A pending claim among several new machines is a Failed machine (so the
// controller gives it up), not an error on every Get; its Delete then drops
// the claim and leaves the machines to the pool.
func TestAClaimAmongSeveralNewMachinesFails(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	w.cloud.Hold()
	p := w.provider(-1)
	cutShort(t, w, p, "web-a1b2c")
	w.cloud.AddMachine("web") // someone else scales the pool too
	w.cloud.Release()
	w.cloud.FinishOperations()
	m, err := p.Get(ctx(t), "web-a1b2c")
	if err != nil || m.State != provider.StateFailed || !strings.Contains(m.Message, "2 new machines") {
		t.Fatalf("Get = %+v, %v; want a Failed machine saying why", m, err)
	}
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	if c, _ := w.claims.Get(ctx(t), "web-a1b2c"); c != nil {
		t.Errorf("claim %+v kept", c)
	}
	if n := len(w.cloud.Machines("web")); n != 3 {
		t.Errorf("%d machines; want 3, none deleted on a guess", n)
	}
}

// A caller whose context ends stops waiting for another change of the same
// agent pool, and Get of a pending claim does not wait at all.
func TestTheLockGivesUp(t *testing.T) {
	w := newWorld()
	w.cloud.AddPool("web", 1, akstest.Pool{})
	w.cloud.Hold()
	p := w.provider(-1)
	cutShort(t, w, p, "web-a1b2c")
	w.cloud.FinishOperations() // the first scale-out ended unpolled
	w.cloud.Hold()
	first := make(chan error, 1)
	go func() { // holds the pool's lock while AKS holds its machine
		_, err := p.Create(context.Background(), pool("web", "web"), "web-d3e4f")
		first <- err
	}()
	for i := 0; w.cloud.PoolCount("web") != 3; i++ {
		if i == 2000 {
			t.Fatal("the second scale-out never raised the count")
		}
		time.Sleep(5 * time.Millisecond)
	}
	waiting, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Delete(waiting, "web-a1b2c") }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Delete while the pool is locked = %v; want its context's end", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Delete waited for the lock past its context")
	}
	if m, err := p.Get(ctx(t), "web-a1b2c"); err != nil || m.State == provider.StateFailed {
		t.Errorf("Get of a claim while the pool is locked = %+v, %v", m, err)
	}
	w.cloud.Release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// A NodePool that names no agent pool cannot tell how its machines
// register: an error wrapping ErrCannotTell, not "they are tainted".
func TestCheckRegistrationOfNoAgentPool(t *testing.T) {
	w := newWorld()
	for _, spec := range []*v1alpha1.AKSProviderSpec{nil, {SubscriptionID: akstest.Subscription, Cluster: akstest.Cluster}} {
		np := pool("web", "web")
		np.Spec.Provider.AKS = spec
		if _, err := w.provider(-1).CheckRegistration(ctx(t), np); !errors.Is(err, provider.ErrCannotTell) {
			t.Errorf("CheckRegistration(%+v) = %v; want ErrCannotTell", spec, err)
		}
	}
}
