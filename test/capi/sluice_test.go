package capi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox/capi"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// syncBuffer is a log both the process and the test touch.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startSluice runs `sluice controller --providers cluster-api` against the
// sandbox until the test ends; its log is kept when the test fails.
func startSluice(t *testing.T, w *world) (stop func()) {
	t.Helper()
	return startSluiceWith(t, w, "cluster-api")
}

// startSluiceWith runs `sluice controller --providers <providers>`.
func startSluiceWith(t *testing.T, w *world, providers string) (stop func()) {
	t.Helper()
	bin := sandboxtest.Sluice(t)
	args := []string{"controller", "--kubeconfig", w.Sandbox.Kubeconfig(), "--leader-elect=false",
		"--providers", providers, "--health-probe-bind-address", "0", "--metrics-bind-address", "0",
		"--identity", "sluice-" + w.Namespace}
	cmd := exec.Command(bin, args...) //nolint:gosec // the binary this test built
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+w.Namespace)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			path := filepath.Join(os.TempDir(), "sluice-capi-"+w.Namespace+".log")
			f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err == nil {
				_, _ = f.WriteString("--- sluice controller --providers " + providers + "\n" + log.String())
				_ = f.Close()
			}
			t.Logf("sluice's log: %s", path)
		}
	})
	return stop
}

// workerPool is a NodePool over the MachineDeployment md, whose Nodes carry
// the label pool=md (the kubelet's node-labels, from the bootstrap data).
func workerPool(w *world, md string, budget string) *v1alpha1.NodePool {
	return &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: w.Namespace + "-" + md},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": w.Namespace + "-" + md}},
			Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderClusterAPI,
				ClusterAPI: &v1alpha1.ClusterAPIProviderSpec{Namespace: w.Namespace, MachineDeployment: md}},
			Disruption: &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: budget}}},
		},
	}
}

// createPool creates workerPool over md with the NodePool CRD installed, and
// deletes it when the test ends.
func (w *world) createPool(t *testing.T, md, budget string) *v1alpha1.NodePool {
	t.Helper()
	kube := poolClient(t, w.Env)
	pool := workerPool(w, md, budget)
	if err := kube.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), pool) })
	return pool
}

// waitHooked waits until n Machines have their Node and sluice's hook: only
// then does Cluster API run the hook when it deletes one.
func (w *world) waitHooked(t *testing.T, n int) {
	t.Helper()
	w.waitMachines(t, 2*time.Minute, fmt.Sprintf("%d Machines with Nodes, each hooked by sluice", n), func(ms []unstructured.Unstructured) bool {
		ready := 0
		for _, m := range ms {
			if nodeRef(m) != "" && hooked(m) {
				ready++
			}
		}
		return ready == n
	})
}

// workers is a MachineDeployment whose kubelets register with the unregistered
// taint, as docs/providers.md tells users to put in their bootstrap template.
func (w *world) workers(md string, replicas int) capi.Workers {
	return capi.Workers{Namespace: w.Namespace, Cluster: w.cluster, Name: md, Replicas: replicas,
		Labels: map[string]string{"pool": w.Namespace + "-" + md},
		Taints: []corev1.Taint{{Key: contract.TaintUnregistered, Effect: corev1.TaintEffectNoExecute}}}
}

// condition is sluice's condition on the Machine: status, reason, message.
func drainedCondition(m *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] == contract.ConditionMachineDrained {
			s, _ := cm["status"].(string)
			r, _ := cm["reason"].(string)
			msg, _ := cm["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// waitMachines waits until cond holds for the namespace's Machines.
func (w *world) waitMachines(t *testing.T, timeout time.Duration, what string, cond func([]unstructured.Unstructured) bool) {
	t.Helper()
	w.WaitFor(t, timeout, what, func(context.Context) (bool, error) { return cond(w.machines(t)), nil })
}

func hooked(m unstructured.Unstructured) bool {
	return m.GetAnnotations()[clusterapi.AnnotationPreDrainHook] != ""
}

func nodeRef(m unstructured.Unstructured) string {
	n, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	return n
}

// poolClient installs the NodePool CRD (the chart's) and returns a client
// that speaks NodePools.
func poolClient(t *testing.T, env *sandboxtest.Env) client.Client {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodepool.Install(t.Context(), ext); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	kube, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// setPool changes the pool as a person's kubectl edit would, retried on a
// conflict with the controller's status writes.
func setPool(t *testing.T, kube client.Client, pool *v1alpha1.NodePool, change func(*v1alpha1.NodePool)) {
	t.Helper()
	for range 10 {
		cur := &v1alpha1.NodePool{}
		if err := kube.Get(context.Background(), client.ObjectKeyFromObject(pool), cur); err != nil {
			t.Fatal(err)
		}
		change(cur)
		err := kube.Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatalf("updating NodePool %s: kept conflicting", pool.Name)
}
