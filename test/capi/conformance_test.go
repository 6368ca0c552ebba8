package capi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/provider/providertest"
	"github.com/sluice-dev/sluice/internal/sandbox/capi"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The cluster-api provider passes the suite every provider must, against
// Cluster API's own controllers: its MachineDeployment and MachineSet
// controllers make and delete the Machines, the sandbox's infrastructure
// provider makes their Nodes.
func TestConformance(t *testing.T) {
	newWorld(t) // Cluster API starts before the suite's subtests, each bound to a minute
	providertest.Run(t, providertest.Harness{
		Registration: clusterapi.Registration,
		New:          conformanceCloud,
		Refusals: []providertest.Refusal{
			{Code: clusterapi.CodeAutoscalerEnabled, Retryable: false},
			{Code: clusterapi.CodeTopologyOwned, Retryable: false},
			{Code: clusterapi.CodeClusterPaused, Retryable: true},
		},
		CannotRefuse: map[string]string{
			provider.CodeInsufficientCapacity: "Cluster API takes any replicas count: a cloud out of capacity shows after the scale-up, on the " +
				"infrastructure provider's machine (its conditions; phase Failed under the v1beta1 contract), not as a refusal of the write of replicas",
			provider.CodeQuotaExceeded: "Cluster API takes any replicas count: a cloud's quota, or a ResourceQuota on Machines, stops the " +
				"MachineSet or the infrastructure provider after the scale-up, not the write of replicas",
			provider.CodeThrottled: "the provider writes only to the Kubernetes API, whose refusal for load is a 429 of API Priority and " +
				"Fairness: client-go waits and retries it itself, and the provider maps one that outlasts the retries to Throttled (errors.go). " +
				"No request of this harness can be refused so: its admin identity (system:masters) is exempt from API Priority and Fairness, " +
				"and a priority level without seats still admits a request while none of its others runs",
		},
		NoToken: "the Kubernetes API takes no idempotency token for a write of replicas: the provider writes a claim before it sets the " +
			"scale subresource to an absolute count at the resourceVersion read, and finds its machine by the claim",
		TaintsFromUser: "Cluster API's bootstrap provider, not sluice, starts a Machine's kubelet: the unregistered taint is the user's to put " +
			"in the MachineDeployment's bootstrap template (a KubeadmConfigTemplate's joinConfiguration.nodeRegistration.taints), as this one's is",
	})
}

// conformanceCloud is a Cluster with a MachineDeployment md-0 of one
// Machine, whose kubelets register with the unregistered taint, and two
// pools over it.
func conformanceCloud(t *testing.T) *providertest.Cloud {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-0"
	workers := capi.Workers{Namespace: w.Namespace, Cluster: w.cluster, Name: md, Replicas: 1, Taints: []corev1.Taint{provider.Unregistered}}
	if err := workers.Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	w.settle(t, md)
	p, lose := w.provider(t, md, "web", "batch")
	web, batch := w.pool("web", md), w.pool("batch", md)
	return &providertest.Cloud{
		Provider: p,
		Pool:     web,
		Other:    batch,
		// kubectl scale: a replica more, and Cluster API makes its Machine.
		Foreign: func(t *testing.T) {
			w.scaleBy(t, md, 1)
			w.settle(t, md)
		},
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			switch code {
			case clusterapi.CodeAutoscalerEnabled:
				w.annotate(t, clusterapi.MachineDeployments, md, map[string]any{
					clusterapi.AnnotationAutoscalerMin: "1", clusterapi.AnnotationAutoscalerMax: "10"})
			case clusterapi.CodeTopologyOwned:
				w.patch(t, clusterapi.MachineDeployments, md, map[string]any{"metadata": map[string]any{
					"labels": map[string]any{clusterapi.LabelTopologyOwned: ""}}})
			case clusterapi.CodeClusterPaused:
				w.patch(t, clusterapi.Clusters, w.cluster, map[string]any{"spec": map[string]any{"paused": true}})
				// A paused Cluster is never deleted with its namespace.
				t.Cleanup(func() {
					w.patch(t, clusterapi.Clusters, w.cluster, map[string]any{"spec": map[string]any{"paused": nil}})
				})
			default:
				t.Fatalf("Cluster API makes no refusal %s", code)
			}
			return web
		},
		// The scale subresource's PUT: the API server raises replicas, its
		// answer is lost.
		LoseAnswer: func(*testing.T) { lose.Store(true) },
		Settle:     func(t *testing.T) { w.settle(t, md) },
		Taints: func(t *testing.T, m *provider.Machine) []corev1.Taint {
			nodes, err := w.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes.Items {
				if m.ProviderID != "" && n.Spec.ProviderID == m.ProviderID {
					return n.Spec.Taints
				}
			}
			t.Fatalf("machine %s (%s) has no Node", m.Name, m.ProviderID)
			return nil
		},
		Count: func(t *testing.T) int { return len(w.machinesOf(t, md)) },
	}
}

// provider is the cluster-api provider over the sandbox, keeping its claims
// in the test's namespace, with the pools named over the MachineDeployment;
// lose, once set, drops the answer of the next write of a scale
// subresource after the API server carried it out.
func (w *world) provider(t *testing.T, md string, pools ...string) (*clusterapi.Provider, *atomic.Bool) {
	t.Helper()
	lose := &atomic.Bool{}
	p := w.providerWith(t, md, func(rt http.RoundTripper) http.RoundTripper { return &loseScale{next: rt, lose: lose} }, pools...)
	return p, lose
}

// providerWith is the provider over a client whose transport wrap wraps.
func (w *world) providerWith(t *testing.T, md string, wrap func(http.RoundTripper) http.RoundTripper, pools ...string) *clusterapi.Provider {
	t.Helper()
	cfg := rest.CopyConfig(w.Config)
	cfg.Wrap(wrap)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var nps []v1alpha1.NodePool
	for _, name := range pools {
		nps = append(nps, *w.pool(name, md))
	}
	return clusterapi.New(dyn, clusterapi.NewConfigMapClaims(w.Client, w.Namespace), clock.RealClock{}, clusterapi.Options{
		ListPools: func(context.Context) ([]v1alpha1.NodePool, error) { return nps, nil },
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name()),
	})
}

// loseScale carries out a PUT of a scale subresource and loses its answer,
// as a connection reset after the API server acted does.
type loseScale struct {
	next http.RoundTripper
	lose *atomic.Bool
}

func (l *loseScale) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/scale") || !l.lose.CompareAndSwap(true, false) {
		return l.next.RoundTrip(r)
	}
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	return nil, errors.New("read: connection reset by peer (the test lost the API server's answer)")
}

func (w *world) pool(name, md string) *v1alpha1.NodePool {
	return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace + "-" + name}, Spec: v1alpha1.NodePoolSpec{
		Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderClusterAPI,
			ClusterAPI: &v1alpha1.ClusterAPIProviderSpec{Namespace: w.Namespace, MachineDeployment: md}}}}
}

// machinesOf lists the MachineDeployment's Machines, deleting ones too, as
// its MachineSets count them.
func (w *world) machinesOf(t *testing.T, md string) []unstructured.Unstructured {
	t.Helper()
	l, err := w.dyn.Resource(clusterapi.Machines).Namespace(w.Namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: clusterapi.LabelDeploymentName + "=" + md})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func (w *world) replicas(t *testing.T, md string) int64 {
	t.Helper()
	u, err := w.dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace).Get(context.Background(), md, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return r
}

// settle waits until the MachineDeployment has as many Machines as
// replicas, none deleting, each with its Node.
func (w *world) settle(t *testing.T, md string) {
	t.Helper()
	start := time.Now()
	w.WaitFor(t, 2*time.Minute, "MachineDeployment "+md+" settled: its replicas' Machines, each with a Node, none deleting",
		func(context.Context) (bool, error) {
			ms := w.machinesOf(t, md)
			if int64(len(ms)) != w.replicas(t, md) {
				return false, nil
			}
			for _, m := range ms {
				if m.GetDeletionTimestamp() != nil || nodeRef(m) == "" {
					return false, nil
				}
			}
			return true, nil
		})
	t.Logf("MachineDeployment %s settled in %s", md, time.Since(start).Round(10*time.Millisecond))
}

// scaleBy changes the MachineDeployment's replicas through its scale
// subresource, as kubectl scale does.
func (w *world) scaleBy(t *testing.T, md string, by int64) {
	t.Helper()
	ctx := context.Background()
	res := w.dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace)
	s, err := res.Get(ctx, md, metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
	if err := unstructured.SetNestedField(s.Object, r+by, "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, s, metav1.UpdateOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
}

func (w *world) annotate(t *testing.T, gvr schema.GroupVersionResource, name string, annotations map[string]any) {
	t.Helper()
	w.patch(t, gvr, name, map[string]any{"metadata": map[string]any{"annotations": annotations}})
}

// patch merge-patches one of the namespace's objects.
func (w *world) patch(t *testing.T, gvr schema.GroupVersionResource, name string, patch map[string]any) {
	t.Helper()
	raw, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.dyn.Resource(gvr).Namespace(w.Namespace).Patch(context.Background(), name, types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		t.Fatal(fmt.Errorf("patching %s %s: %w", gvr.Resource, name, err))
	}
}
