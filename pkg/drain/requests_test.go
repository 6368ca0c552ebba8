package drain_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// A budget that lets the drain's evictions through one after another paces
// the drain; it does not block it. The pods that wait their turn, some for
// longer than the drain's 5 s before it diagnoses a hold, cost no list of
// the budget's pods: per pod the drain sends its eviction and little else.
func TestABudgetThatPacesTheDrainCostsNoDiagnosis(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	const pods = 16
	s.env.Create(t,
		fixture.Deployment(ns, "web", pods, s.onAll, fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("1")),
	)
	s.env.WaitForPods(t, "app=web", pods)
	s.env.WaitForPDB(t, "web", pods)
	s.addSpare(t, 1)

	var mu sync.Mutex
	sent := map[string]int{}
	cfg := rest.CopyConfig(s.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			kind := r.Method + " " + r.URL.Path
			switch {
			case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/eviction"):
				kind = "eviction"
			case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/"+ns+"/pods" && r.URL.Query().Get("labelSelector") != "":
				kind = "budget's pods"
			}
			mu.Lock()
			sent[kind]++
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	client := kubernetes.NewForConfigOrDie(cfg)
	d, err := drain.New(client, clock.RealClock{}, drain.Options{}, drain.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	report, err := d.Drain(context.Background(), s.nodes)
	if err != nil || !report.Drained() {
		t.Fatalf("drain: %v, drained %v", err, report != nil && report.Drained())
	}
	mu.Lock()
	defer mu.Unlock()
	// Sixteen waves of one pod take ten seconds or more; a diagnosis every
	// 5 s would have listed the budget's pods twice or more. One wave slower
	// than 5 s on a busy machine may cost one look.
	if sent["budget's pods"] > 1 {
		t.Errorf("the budget's pods were listed %d times while it let the drain through; requests: %v", sent["budget's pods"], sent)
	}
	if sent["eviction"] < pods || sent["eviction"] > pods+2 {
		t.Errorf("%d evictions for %d pods; want one each, and at most two refused; requests: %v", sent["eviction"], pods, sent)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
