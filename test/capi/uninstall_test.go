package capi

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// Turning the provider off, or uninstalling sluice, removes every hook
// sluice added: a Machine Cluster API is deleting while sluice is gone is
// held by the hook until then, and goes on (drained by Cluster API) once it
// is removed.
func TestHooksGoWithTheProviderAndWithUninstall(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-u"
	if err := w.workers(md, 3).Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	kube := poolClient(t, w.Env)
	pool := workerPool(w, md, "1")
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), pool) })
	// Hooked, and with a Node: Cluster API runs no hook for a Machine
	// without one (it has nothing to drain), so a scale-down could pick a
	// Machine still booting and delete it past the hook.
	allHooked := func(want int) func([]unstructured.Unstructured) bool {
		return func(ms []unstructured.Unstructured) bool {
			n := 0
			for _, m := range ms {
				if hooked(m) && nodeRef(m) != "" {
					n++
				}
			}
			return n == want && len(ms) == want
		}
	}
	stop := startSluice(t, w)
	w.waitMachines(t, 2*time.Minute, "3 Machines with Nodes, hooked by sluice", allHooked(3))
	stop()

	// The provider turned off: a controller without it takes its hooks away.
	stop = startSluiceWith(t, w, "kwok")
	w.waitMachines(t, time.Minute, "no Machine hooked once the provider is off", func(ms []unstructured.Unstructured) bool {
		for _, m := range ms {
			if hooked(m) {
				return false
			}
		}
		return true
	})
	stop()

	// The provider on again, then sluice stopped: a scale-down meanwhile is
	// held by the hook, as Cluster API never times a hook out.
	stop = startSluice(t, w)
	w.waitMachines(t, time.Minute, "3 Machines with Nodes, hooked again", allHooked(3))
	stop()
	if _, err := w.dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace).Patch(ctx, md, types.MergePatchType,
		[]byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var held string
	w.waitMachines(t, time.Minute, "Cluster API to start deleting a Machine", func(ms []unstructured.Unstructured) bool {
		for _, m := range ms {
			if m.GetDeletionTimestamp() != nil {
				held = m.GetName()
				return true
			}
		}
		return false
	})
	time.Sleep(5 * time.Second)
	for _, m := range w.machines(t) {
		if m.GetName() == held && !hooked(m) {
			t.Fatalf("Machine %s lost the hook with sluice stopped", held)
		}
	}
	out, err := exec.Command(sandboxtest.Sluice(t), "uninstall", "--kubeconfig", w.Sandbox.Kubeconfig(), "-n", w.Namespace).CombinedOutput() //nolint:gosec // the binary this test built
	if err != nil {
		t.Fatalf("sluice uninstall: %v\n%s", err, out)
	}
	t.Logf("sluice uninstall:\n%s", out)
	if !strings.Contains(string(out), "machine  "+w.Namespace+"/"+held) {
		t.Errorf("sluice uninstall did not report removing the hook of Machine %s", held)
	}
	w.waitMachines(t, 2*time.Minute, "Cluster API to finish the scale-down once the hooks are gone, with no hook left", func(ms []unstructured.Unstructured) bool {
		for _, m := range ms {
			if hooked(m) || m.GetName() == held {
				return false
			}
		}
		return len(ms) == 2
	})
}
