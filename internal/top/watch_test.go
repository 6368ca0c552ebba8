package top

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func fakeClients(t *testing.T) (*fake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	s := fleet()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pool := s.Pools[0].DeepCopy()
	pool.APIVersion, pool.Kind = v1alpha1.SchemeGroupVersion.String(), "NodePool"
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.NodePoolResource: "NodePoolList"}, pool)
	var objs []runtime.Object
	for i := range s.Nodes {
		objs = append(objs, &s.Nodes[i])
	}
	for _, p := range s.Pods {
		objs = append(objs, p)
	}
	return fake.NewClientset(objs...), dyn
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("waited 20s for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RBAC that forbids pods: the watch still syncs, shows the rest, and says
// what it cannot see; the screen marks drain progress unknown.
func TestWatchSaysWhatRBACHides(t *testing.T) {
	kc, dyn := fakeClients(t)
	kc.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("user cannot list pods"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatch(kc, dyn, clocktesting.NewFakeClock(now), Watched{Pods: true, Events: true}, nil)
	w.Start(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, 20*time.Second)
	defer syncCancel()
	if err := w.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	s := w.Snapshot()
	if s.Pods != nil || len(s.Hidden) != 1 || !strings.Contains(s.Hidden[0], "cannot list pods (forbidden by RBAC): drain progress and blocked pods are hidden") {
		t.Fatalf("pods %v, hidden %q", s.Pods, s.Hidden)
	}
	if len(s.Nodes) != 9 || len(s.Pools) != 1 || !s.PoolsInstalled || !s.Live() {
		t.Fatalf("nodes %d, pools %d (installed %v), live %v", len(s.Nodes), len(s.Pools), s.PoolsInstalled, s.Live())
	}
	for _, r := range Build(s).Pools[0].Nodes {
		if r.Name == "batch-draining" && r.Detail != "pods cannot be seen (drain by sluice-controller)" {
			t.Errorf("a drain's progress without pods: %q", r.Detail)
		}
	}
}

// A lost connection: the watch of nodes ends and the next one fails; the
// snapshot says since when and why. Once the
// server answers again, the reflector lists again and the snapshot is
// live, with no call of the Watch's own.
func TestWatchSaysWhenTheConnectionIsLostAndBack(t *testing.T) {
	kc, dyn := fakeClients(t)
	var down atomic.Bool
	var mu sync.Mutex
	var current *watch.FakeWatcher
	kc.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	kc.PrependWatchReactor("nodes", func(clienttesting.Action) (bool, watch.Interface, error) {
		if down.Load() {
			return true, nil, errors.New("http2: client connection lost")
		}
		mu.Lock()
		defer mu.Unlock()
		current = watch.NewFake()
		return true, current, nil
	})
	clk := clocktesting.NewFakeClock(now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatch(kc, dyn, clk, Watched{}, nil)
	w.Start(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, 20*time.Second)
	defer syncCancel()
	if err := w.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watch of nodes", func() bool { mu.Lock(); defer mu.Unlock(); return current != nil })
	// Let the watch have lasted, so its end is not a "very short watch".
	time.Sleep(1100 * time.Millisecond)

	down.Store(true)
	mu.Lock()
	current.Stop()
	mu.Unlock()
	eventually(t, "the loss to show", func() bool { return !w.Snapshot().Live() })
	s := w.Snapshot()
	if !s.LostSince.Equal(now) || !strings.Contains(s.LostError, "connection lost") || len(s.Nodes) != 9 {
		t.Fatalf("lost since %v (%q), %d nodes kept; want %v, connection lost, 9", s.LostSince, s.LostError, len(s.Nodes), now)
	}
	if sc := Build(s); !sc.Stale || !strings.Contains(sc.Banners[0].Text, "connection lost") {
		t.Fatalf("screen of a lost connection: %+v", sc.Banners)
	}

	down.Store(false)
	eventually(t, "the watch to be live again", func() bool { return w.Snapshot().Live() })
	if n := len(w.Snapshot().Nodes); n != 9 {
		t.Fatalf("%d nodes after reconnecting, want 9", n)
	}
}

// roundTrip is a transport that answers as told.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The reflector retries a refused watch by itself and tells no handler, so
// the link learns of it from the requests: refused is lost, any answer
// below 500 is live again, and a request its caller canceled says nothing.
func TestLinkSeesTheRequests(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	link := NewLink(clk)
	changes := 0
	link.notify(func() { changes++ })
	var answer func() (*http.Response, error)
	rt := link.Wrap(roundTrip(func(*http.Request) (*http.Response, error) { return answer() }))
	req := httptest.NewRequest(http.MethodGet, "https://127.0.0.1:6443/api/v1/nodes?watch=true", nil)

	answer = func() (*http.Response, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	_, _ = rt.RoundTrip(req)
	clk.Step(time.Second)
	_, _ = rt.RoundTrip(req)
	since, why := link.State()
	if since == nil || !since.Equal(now) || !strings.Contains(why, "connection refused") || changes != 1 {
		t.Fatalf("after refusals: lost since %v (%q), %d changes; want %v, connection refused, 1", since, why, changes, now)
	}
	answer = func() (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable"}, nil
	}
	_, _ = rt.RoundTrip(req)
	if since, why = link.State(); since == nil || !strings.Contains(why, "503") {
		t.Fatalf("a 503 is not an answer: %v %q", since, why)
	}
	answer = func() (*http.Response, error) { return &http.Response{StatusCode: http.StatusOK}, nil }
	_, _ = rt.RoundTrip(req)
	if since, _ = link.State(); since != nil || changes != 2 {
		t.Fatalf("after an answer: lost since %v, %d changes; want live, 2", since, changes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	answer = func() (*http.Response, error) { return nil, context.Canceled }
	_, _ = rt.RoundTrip(req.WithContext(ctx))
	if since, _ = link.State(); since != nil {
		t.Fatal("a canceled request lost the link")
	}
}
