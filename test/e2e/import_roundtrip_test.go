package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// karpenterPools are the Karpenter examples the importer's tests read
// (internal/importer/testdata/karpenter: each says where it comes from).
var karpenterPools = []string{"general-purpose.yaml", "budgets.yaml", "minimal.yaml"}

// TestImportRoundTripsThroughTheAPIServer is the migration as a person does
// it, on one API server: Karpenter's NodePools are created against
// Karpenter v1.14.1's own CRD (the API server validates them, CEL
// included); `sluice import karpenter` reads them from the cluster; what it
// prints goes to `kubectl apply`, where sluice's CRD as the API server
// serves it takes every pool; and a second import with --dry-run finds
// nothing left to change. (Not parallel: Karpenter's CRD is the cluster's
// while it runs, and no other test should see it.)
func TestImportRoundTripsThroughTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(tools, "kubectl")
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	ctx := context.Background()

	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodepool.Install(ctx, ext); err != nil {
		t.Fatal(err)
	}
	crdFile := filepath.Join(t.TempDir(), "karpenter.sh_nodepools.yaml")
	if err := os.WriteFile(crdFile, testenv.KarpenterNodePoolCRD(t, filepath.Join("..", "..")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, kubectl, "--kubeconfig", kubeconfig, "apply", "-f", crdFile); code != 0 {
		t.Fatalf("applying Karpenter's NodePool CRD: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), "nodepools.karpenter.sh", metav1.DeleteOptions{})
	})
	env.WaitFor(t, time.Minute, "Karpenter's NodePool CRD to be served", func(ctx context.Context) (bool, error) {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "nodepools.karpenter.sh", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})

	var names []string
	for _, f := range karpenterPools {
		path := filepath.Join("..", "..", "internal", "importer", "testdata", "karpenter", f)
		out, errOut, code := run(t, kubectl, "--kubeconfig", kubeconfig, "create", "-f", path, "-o", "name")
		if code != 0 {
			t.Fatalf("Karpenter's API server refuses %s: exit %d\n%s", f, code, errOut)
		}
		for _, n := range strings.Fields(out) {
			names = append(names, strings.TrimPrefix(n, "nodepool.karpenter.sh/"))
		}
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = dyn.Resource(v1alpha1.NodePoolResource).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})

	// --provider none, the default: the pools keep selecting the nodes
	// Karpenter launched (karpenter.sh/nodepool=NAME), as the migration's
	// first step does.
	imported, report, code := run(t, sluice, "import", "karpenter", "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("sluice import karpenter: exit %d\n%s", code, report)
	}
	out, errOut, code := runWith(t, imported, kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	if code != 0 {
		t.Fatalf("kubectl apply of what sluice import printed: exit %d\n%s%s\nthe objects:\n%s", code, out, errOut, imported)
	}
	for _, n := range names {
		obj, err := dyn.Resource(v1alpha1.NodePoolResource).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("NodePool %s after the apply: %v", n, err)
		}
		var pool v1alpha1.NodePool
		raw, _ := json.Marshal(obj.Object)
		if err := json.Unmarshal(raw, &pool); err != nil {
			t.Fatal(err)
		}
		if pool.Spec.Provider.Name != v1alpha1.ProviderNone || pool.Spec.NodeSelector.MatchLabels["karpenter.sh/nodepool"] != n {
			t.Errorf("NodePool %s as the API server keeps it: provider %q, selector %v; want none and karpenter.sh/nodepool=%s",
				n, pool.Spec.Provider.Name, pool.Spec.NodeSelector.MatchLabels, n)
		}
	}

	diff, errOut, code := run(t, sluice, "import", "karpenter", "--kubeconfig", kubeconfig, "--dry-run")
	if code != 0 {
		t.Fatalf("sluice import karpenter --dry-run: exit %d\n%s", code, errOut)
	}
	for _, n := range names {
		if !strings.Contains(diff, "# NodePool "+n+" (imported): no change") {
			t.Errorf("after the apply, --dry-run still has changes for %s:\n%s", n, diff)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d Karpenter NodePools imported, applied and found unchanged: %v", len(names), names)
}
