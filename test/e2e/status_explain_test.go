package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// TestStatusAndExplainDescribeADriftedPool: a pool without a provider whose
// two nodes run an older AKS image than its template. With no controller
// running, `sluice status` counts both as drifted and `sluice explain node`
// names the image as the difference and says the node is only reported.
func TestStatusAndExplainDescribeADriftedPool(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	const (
		running = "AKSUbuntu-2204gen2containerd-202610.01.0"
		wanted  = "AKSUbuntu-2204gen2containerd-202611.01.0"
	)
	aks := fixture.AKSPool(sandboxtest.UniqueName("drift"), 2, fixture.Image(running))
	nodes := env.CreateNodes(t, aks)
	pool := aks.Name
	selector := map[string]any{}
	for k, v := range aks.Selector() {
		selector[k] = v
	}
	createNodePool(t, env, pool, map[string]any{
		"nodeSelector": map[string]any{"matchLabels": selector},
		"provider":     map[string]any{"name": "none"},
		"template":     map[string]any{"image": wanted},
	})

	out, errOut, code := run(t, sluice, "status", "-o", "json", "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("sluice status: exit %d\n%s%s", code, out, errOut)
	}
	var status struct {
		Pools []struct {
			Name     string `json:"name"`
			Nodes    int    `json:"nodes"`
			Drifted  int    `json:"drifted"`
			Ready    bool   `json:"ready"`
			Provider struct {
				Name    string `json:"name"`
				Managed bool   `json:"managed"`
			} `json:"provider"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	found := false
	for _, p := range status.Pools {
		if p.Name != pool {
			continue
		}
		found = true
		if p.Nodes != 2 || p.Drifted != 2 || !p.Ready || p.Provider.Name != "none" || p.Provider.Managed {
			t.Errorf("status of pool %s: %+v; want 2 nodes, 2 drifted, Ready, provider none", pool, p)
		}
	}
	if !found {
		t.Fatalf("status does not list pool %s:\n%s", pool, out)
	}

	out, errOut, code = run(t, sluice, "explain", "node", nodes[0].Name, "-o", "json", "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("sluice explain: exit %d\n%s%s", code, out, errOut)
	}
	var explained struct {
		Pool *struct {
			Name    string `json:"name"`
			Managed bool   `json:"managed"`
		} `json:"pool"`
		Differences []struct {
			Field string `json:"field"`
			Want  string `json:"want"`
			Got   string `json:"got"`
		} `json:"differences"`
		Candidate string `json:"candidate"`
		Verdict   struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &explained); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	if explained.Pool == nil || explained.Pool.Name != pool || explained.Pool.Managed {
		t.Errorf("explain names pool %+v; want %s, not managed", explained.Pool, pool)
	}
	if len(explained.Differences) != 1 || explained.Differences[0].Field != "image" ||
		explained.Differences[0].Want != wanted || explained.Differences[0].Got != running {
		t.Errorf("differences %+v; want the image, %s wanted, %s running", explained.Differences, wanted, running)
	}
	if explained.Candidate != "Drifted" || explained.Verdict.Code != "ReportedOnly" ||
		!strings.Contains(explained.Verdict.Message, "reported only") || !strings.Contains(explained.Verdict.Message, "no provider") {
		t.Errorf("verdict %+v (candidate %q); want Drifted, reported only, no provider", explained.Verdict, explained.Candidate)
	}

	out, errOut, code = run(t, sluice, "explain", "node", "no-such-node", "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(errOut, "node no-such-node not found") || !strings.Contains(errOut, "kubectl get nodes") {
		t.Errorf("explain of a missing node: exit %d\n%s%s; want 1 and how to list nodes", code, out, errOut)
	}
}

// createNodePool serves the NodePool CRD and creates a pool, deleted when
// the test ends.
func createNodePool(t *testing.T, env *sandboxtest.Env, name string, spec map[string]any) {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodepool.Install(context.Background(), ext); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "NodePool",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	if _, err := dyn.Resource(v1alpha1.NodePoolResource).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NodePool %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.NodePoolResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
