package drain_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/drain"
)

const holdFinalizer = "test.sluice.dev/hold"

// releaseHeld removes the test's finalizer from the namespace's pods, so the
// namespace can go.
func releaseHeld(t *testing.T, s *scene) {
	t.Cleanup(func() {
		ctx := context.Background()
		pods, _ := s.env.Client.CoreV1().Pods(s.env.Namespace).List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			_, _ = s.env.Client.CoreV1().Pods(s.env.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
}

// kubectl's --skip-wait-for-delete-timeout: a pod that never finishes
// terminating (its kubelet is gone; here a finalizer holds it) is not waited
// for past the timeout, and one already terminating longer is skipped.
func TestSkipWaitForDeleteTimeout(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	releaseHeld(t, s)
	s.env.Create(t,
		fixture.Deployment(ns, "held", 1, s.onAll, fixture.Finalizer(holdFinalizer), fixture.GracePeriod(1)),
		fixture.Pod(ns, "stuck", fixture.OnNode(node), fixture.Finalizer(holdFinalizer)))
	s.env.WaitForPods(t, "app in (held,stuck)", 2)
	if err := s.env.Client.CoreV1().Pods(ns).Delete(context.Background(), "stuck", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // stuck has been terminating for longer than the timeout below
	s.addSpare(t, 1)

	d := s.run(t, drain.Options{SkipWaitForDeleteTimeout: 2 * time.Second, Timeout: 20 * time.Second}, node)
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "stuck", want{outcome: drain.PodSkipped, reason: drain.ReasonTerminating, message: "longer than --skip-wait-for-delete-timeout 2s"})
	d.expect(t, "held", want{outcome: drain.PodEvicted, message: "still terminating 2s after its grace period ended"})
	// held's deletion timestamp is the end of its 1s grace period (to the
	// second); the drain stops waiting 2s after that, as kubectl does.
	if d.took < 2*time.Second || d.took > 15*time.Second {
		t.Errorf("the drain took %s; want it to stop waiting 2-3s after the eviction (1s grace, then 2s)", d.took)
	}
}

// recorder keeps the query of every LIST of pods.
type recorder struct {
	mu    sync.Mutex
	lists []string
	next  http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") && req.URL.Query().Get("watch") == "" {
		r.mu.Lock()
		r.lists = append(r.lists, req.URL.RawQuery)
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

// kubectl's --chunk-size: the drain's own lists of pods come in pages of
// that many, which the API server answers with continue tokens.
func TestChunkSizePagesTheLists(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	// Static pods stay on the node, so the drain's last look at it lists
	// more than one pod.
	s.env.Create(t, fixture.Deployment(ns, "web", 3, s.onAll, fixture.ExitsAfter(0.5)), mirrorPod(ns, node), mirrorPodNamed(ns, node, "static-db"))
	s.env.WaitForPods(t, "app=web", 3)
	s.addSpare(t, 1)
	rec := &recorder{}
	cfg := *s.env.Config
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	client, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := drain.New(client, clock.RealClock{}, drain.Options{ChunkSize: 1}, drain.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	report, err := d.Drain(context.Background(), []string{node})
	if err != nil || report.Nodes[0].Outcome != drain.NodeDrained {
		t.Fatalf("drain: %v %+v", err, report)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var limited, continued bool
	for _, q := range rec.lists {
		limited = limited || strings.Contains(q, "limit=1")
		continued = continued || strings.Contains(q, "continue=")
	}
	if !limited || !continued {
		t.Errorf("pod lists %q; want pages of 1 (limit=1) followed by continue tokens", rec.lists)
	}
}

func mirrorPodNamed(ns, node, name string) *corev1.Pod {
	p := mirrorPod(ns, node)
	p.Name = name
	return p
}
