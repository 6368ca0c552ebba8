package capi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/capi"
)

// While Cluster API rolls a MachineDeployment out (a new infrastructure
// template whose machines take long to boot, so the old MachineSet still
// holds its replicas), a Delete of an old Machine is refused: a lower
// replicas count would be the rollout planner's to spread, not the marked
// Machine's to take. Nothing is marked and replicas stay.
func TestProviderDeleteRefusedMidRollout(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-0"
	workers := capi.Workers{Namespace: w.Namespace, Cluster: w.cluster, Name: md, Replicas: 2}
	if err := workers.Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	w.settle(t, md)
	old := machineNames(w.machinesOf(t, md))
	slow := workers
	slow.BootDelay = 5 * time.Minute
	if err := slow.CreateTemplate(ctx, w.dyn, "b"); err != nil {
		t.Fatal(err)
	}
	w.patch(t, clusterapi.MachineDeployments, md, map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": capi.InfraGroup, "kind": "KwokMachineTemplate", "name": md + "-b"}}}}})
	w.WaitFor(t, time.Minute, "two MachineSets of "+md+" holding replicas", func(context.Context) (bool, error) {
		return len(w.activeSets(t, md)) == 2, nil
	})
	t.Logf("mid-rollout: MachineSets %v", w.activeSets(t, md))

	p, _ := w.provider(t, md, "web")
	err := p.Delete(ctx, clusterapi.MachineName(w.Namespace, old[0]))
	e, ok := provider.AsError(err)
	if !ok || e.Code != clusterapi.CodeRolloutInProgress || !e.Retryable {
		t.Fatalf("Delete of old Machine %s mid-rollout: %v; want a retryable provider.Error %s", old[0], err, clusterapi.CodeRolloutInProgress)
	}
	t.Logf("refused: %s", e.Message)
	if r := w.replicas(t, md); r != 2 {
		t.Errorf("replicas %d after the refusal; want 2", r)
	}
	for _, m := range w.machinesOf(t, md) {
		if v, ok := m.GetAnnotations()[clusterapi.AnnotationDeleteMachine]; ok {
			t.Errorf("Machine %s marked %q after the refusal; want no mark", m.GetName(), v)
		}
	}
}

// A Delete whose decrement is refused and whose rollback is refused too
// leaves its mark on a Machine that Cluster API was never asked to remove.
// The next Delete finds that stray mark (replicas not lowered from it) and
// takes it off before it marks its own Machine, so that Cluster API removes
// the Machine asked for and not the stray one, which it would otherwise
// take first (equal marks go by name). The decrement is refused by a real
// conflict (the MachineDeployment changed between the provider's read and
// its write), the rollback by a ValidatingAdmissionPolicy.
func TestProviderRollsBackAStrayMark(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-0"
	workers := capi.Workers{Namespace: w.Namespace, Cluster: w.cluster, Name: md, Replicas: 3}
	if err := workers.Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	w.settle(t, md)
	machines := machineNames(w.machinesOf(t, md))
	stray, asked := machines[0], machines[len(machines)-1] // Cluster API takes equal marks by name: the stray one first

	w.keepMarks(t)
	p, conflicts := w.conflictingProvider(t, md)
	conflicts.Store(true)
	err := p.Delete(ctx, clusterapi.MachineName(w.Namespace, stray))
	if e, ok := provider.AsError(err); !ok || e.Code != clusterapi.CodeConflict || !strings.Contains(err.Error(), "taking the mark off") {
		t.Fatalf("Delete with its decrement and its rollback refused: %v; want a Conflict that says the mark could not be taken off", err)
	}
	conflicts.Store(false)
	if v := w.markOf(t, stray); v != "sluice:3" {
		t.Fatalf("Machine %s marked %q; want the stray mark sluice:3 left", stray, v)
	}
	if r := w.replicas(t, md); r != 3 {
		t.Fatalf("replicas %d; want 3, never lowered", r)
	}
	w.dropMarkPolicy(t)

	if err := p.Delete(ctx, clusterapi.MachineName(w.Namespace, asked)); err != nil {
		t.Fatalf("Delete of %s: %v", asked, err)
	}
	if v := w.markOf(t, stray); v != "" {
		t.Errorf("Machine %s still marked %q after the next Delete; want the stray mark taken off", stray, v)
	}
	w.settle(t, md)
	left := machineNames(w.machinesOf(t, md))
	if slices.Contains(left, asked) || !slices.Contains(left, stray) {
		t.Errorf("Machines left %v; want %s removed and %s kept", left, asked, stray)
	}
}

// activeSets lists the MachineDeployment's MachineSets that hold replicas.
func (w *world) activeSets(t *testing.T, md string) []string {
	t.Helper()
	l, err := w.dyn.Resource(clusterapi.MachineSets).Namespace(w.Namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: clusterapi.LabelDeploymentName + "=" + md})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range l.Items {
		if r, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas"); r > 0 {
			out = append(out, s.GetName()+": "+strconv.FormatInt(r, 10))
		}
	}
	return out
}

func (w *world) markOf(t *testing.T, machine string) string {
	t.Helper()
	m, err := w.dyn.Resource(clusterapi.Machines).Namespace(w.Namespace).Get(context.Background(), machine, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m.GetAnnotations()[clusterapi.AnnotationDeleteMachine]
}

func machineNames(ms []unstructured.Unstructured) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.GetName())
	}
	slices.Sort(out)
	return out
}

// conflictingProvider is the provider, whose writes of a scale subresource,
// while conflicts is set, each meet a MachineDeployment changed (by another
// client) since the provider read it: the API server refuses them with a
// conflict.
func (w *world) conflictingProvider(t *testing.T, md string) (*clusterapi.Provider, *atomic.Bool) {
	t.Helper()
	conflicts := &atomic.Bool{}
	var n atomic.Int64
	touch := func() {
		patch := []byte(`{"metadata":{"annotations":{"test.example/touched":"` + strconv.FormatInt(n.Add(1), 10) + `"}}}`)
		if _, err := w.dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace).Patch(context.Background(), md, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	}
	p := w.providerWith(t, md, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/scale") && conflicts.Load() {
				touch()
			}
			return next.RoundTrip(r)
		})
	}, "web")
	return p, conflicts
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// markPolicy refuses, in one namespace, an update of a Machine that takes
// its delete-machine annotation off, and any update that adds the probe
// annotation (so a test can tell when the policy is in force).
const markPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: NAME
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [cluster.x-k8s.io]
      apiVersions: ["*"]
      operations: [UPDATE]
      resources: [machines]
  validations:
  - expression: >-
      !has(oldObject.metadata.annotations) || !('cluster.x-k8s.io/delete-machine' in oldObject.metadata.annotations) ||
      (has(object.metadata.annotations) && 'cluster.x-k8s.io/delete-machine' in object.metadata.annotations)
    message: the test keeps delete-machine marks
  - expression: "!has(object.metadata.annotations) || !('test.example/probe' in object.metadata.annotations)"
    message: probe refused
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: NAME
spec:
  policyName: NAME
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: NAMESPACE}
`

// keepMarks puts markPolicy in force for the test's namespace.
func (w *world) keepMarks(t *testing.T) {
	t.Helper()
	manifests := strings.NewReplacer("NAMESPACE", w.Namespace, "NAME", w.Namespace+"-keep-marks").Replace(markPolicy)
	if err := sandbox.ApplyManifests(context.Background(), w.Config, manifests); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.dropMarkPolicy(t) })
	w.WaitFor(t, 30*time.Second, "the policy keeping delete-machine marks in force", func(ctx context.Context) (bool, error) {
		return w.probeRefused(ctx), nil
	})
}

// dropMarkPolicy deletes markPolicy and waits until it is no longer in force.
func (w *world) dropMarkPolicy(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	name := w.Namespace + "-keep-marks"
	adm := w.Client.AdmissionregistrationV1()
	_ = adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	_ = adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
	w.WaitFor(t, 30*time.Second, "the policy keeping delete-machine marks gone", func(ctx context.Context) (bool, error) {
		return !w.probeRefused(ctx), nil
	})
}

// probeRefused says whether a dry-run update adding the probe annotation to
// one of the namespace's Machines is refused.
func (w *world) probeRefused(ctx context.Context) bool {
	l, err := w.dyn.Resource(clusterapi.Machines).Namespace(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) == 0 {
		return false
	}
	patch := []byte(`{"metadata":{"annotations":{"test.example/probe":"1"}}}`)
	_, err = w.dyn.Resource(clusterapi.Machines).Namespace(w.Namespace).Patch(ctx, l.Items[0].GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	return err != nil && strings.Contains(err.Error(), "probe refused")
}
