package agent

// TestLeastPrivilege runs against the sandbox's API server: only it can show
// that the RBAC and the ValidatingAdmissionPolicy the chart ships, given the
// identity a real agent pod's token carries, leave the agent the one write it
// needs and refuse every other.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

const (
	agentNamespace      = "sluice-system"
	agentServiceAccount = "sluice-agent"
	// agentPolicy names the chart's ValidatingAdmissionPolicy.
	agentPolicy = "sluice-agent-own-node"
	// nodeNameExtra is where the API server puts the node a service account
	// token's pod is bound to.
	nodeNameExtra = "authentication.kubernetes.io/node-name"
	// foreignAnnotation belongs to someone else; both nodes carry it.
	foreignAnnotation = "example.com/owner"
	// foreignMaintenanceAnnotation is in the agent's domain but not one it
	// writes; both nodes carry it too.
	foreignMaintenanceAnnotation = "maintenance.sluice.dev/window"
	// probeResource is an extended resource the agent tries to add to its
	// node's status.
	probeResource = "example.com/sluice-probe"
)

// TestLeastPrivilege installs the chart's agent policy, gives the agent the
// token a pod on node "own" would get, and shows it may write its own
// annotations there (its report, its approvals, reboot-required) and nothing
// else anywhere.
func TestLeastPrivilege(t *testing.T) {
	env := sandboxtest.New(t)
	ctx := t.Context()
	begin := time.Now()

	installAgentPolicy(t, env)
	nodes := env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("agent"), 2))
	own, other := nodes[0].Name, nodes[1].Name
	for _, name := range []string{own, other} {
		for _, key := range []string{foreignAnnotation, foreignMaintenanceAnnotation} {
			if err := patchNode(ctx, env.Client, name, annotationPatch(key, "ops")); err != nil {
				t.Fatalf("annotating node %s as the administrator: %v", name, err)
			}
		}
	}
	pod := agentPod(t, env, own)
	victim := fixture.Pod(env.Namespace, "victim", fixture.OnNode(own), fixture.Tolerate(""))
	env.Create(t, victim)

	cfg, err := sandbox.AgentConfig(ctx, env.Client, env.Config, agentNamespace, agentServiceAccount, pod, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	requireBoundToNode(t, client, own)
	waitForPolicy(t, client, other)
	t.Logf("set up in %s", time.Since(begin).Round(time.Millisecond))
	before := map[string]nodeState{own: stateOf(t, env.Client, own), other: stateOf(t, env.Client, other)}

	report := maintenance.NewReport(maintenance.SourceAzure, true, []maintenance.Event{{
		ID: "evt-1", Source: maintenance.SourceAzure, Type: maintenance.TypeReboot, Status: maintenance.StatusScheduled,
	}})
	t.Run("writes the maintenance annotations on its own node", func(t *testing.T) {
		a := New(client, slog.New(slog.DiscardHandler), Config{Node: own, Source: maintenance.SourceAzure})
		node, err := client.CoreV1().Nodes().Get(ctx, own, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading its own node: %v", err)
		}
		if err := a.publish(ctx, node, report); err != nil {
			t.Fatalf("publishing a report: %v", err)
		}
		if err := a.annotate(ctx, map[string]any{contract.AnnotationMaintenanceApproved: "evt-1"}); err != nil {
			t.Fatalf("recording an approval: %v", err)
		}
		node = getNode(t, env.Client, own)
		if got := node.Annotations[contract.AnnotationMaintenanceEvents]; got != report.Encode() {
			t.Errorf("annotation %s = %q, want %q", contract.AnnotationMaintenanceEvents, got, report.Encode())
		}
		if !maintenance.Approved(node, "evt-1") {
			t.Errorf("annotation %s = %q, want evt-1", contract.AnnotationMaintenanceApproved, node.Annotations[contract.AnnotationMaintenanceApproved])
		}
	})

	t.Run("writes and removes reboot-required on its own node", func(t *testing.T) {
		sentinel := filepath.Join(t.TempDir(), "reboot-required")
		if err := os.WriteFile(sentinel, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		a := New(client, slog.New(slog.NewTextHandler(&logs, nil)), Config{Node: own, Source: maintenance.SourceAzure,
			Reboot: RebootCheck{Sentinel: FileSentinel{Path: sentinel}}})
		read := func() {
			node, err := client.CoreV1().Nodes().Get(ctx, own, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading its own node: %v", err)
			}
			required, err := a.cfg.Reboot.Sentinel.RebootRequired(ctx)
			a.takeReboot(node, sentinelReading{required: required, err: err})
			a.publishReboot(ctx, node)
		}
		read()
		if since, ok := rebootSince(getNode(t, env.Client, own)); !ok || time.Since(since) > time.Minute {
			t.Fatalf("after the sentinel appeared: %s = %q; want the time it was found. The agent's log:\n%s",
				contract.AnnotationRebootRequired, getNode(t, env.Client, own).Annotations[contract.AnnotationRebootRequired], logs.String())
		}
		if err := os.Remove(sentinel); err != nil {
			t.Fatal(err)
		}
		read()
		if v, ok := getNode(t, env.Client, own).Annotations[contract.AnnotationRebootRequired]; ok {
			t.Fatalf("after the sentinel went: %s = %q; want it removed. The agent's log:\n%s", contract.AnnotationRebootRequired, v, logs.String())
		}
	})

	const (
		ownNodeOnly     = "may only change its own node"
		noSpec          = "may not change a node's spec"
		noLabels        = "may not change a node's labels"
		onlyAnnotations = "may only write its own annotations"
	)
	for _, tc := range []struct {
		name, node, patch, want string
	}{
		{"cannot annotate another node", other, annotationPatch(contract.AnnotationMaintenanceEvents, report.Encode()), ownNodeOnly},
		{"cannot say another node needs a reboot", other, annotationPatch(contract.AnnotationRebootRequired, "2026-11-21T10:00:00Z"), ownNodeOnly},
		{"cannot write another maintenance.sluice.dev annotation", own, annotationPatch("maintenance.sluice.dev/reboot-now", "true"), onlyAnnotations},
		{"cannot change another's maintenance.sluice.dev annotation", own, annotationPatch(foreignMaintenanceAnnotation, "agent"), onlyAnnotations},
		{"cannot remove another's maintenance.sluice.dev annotation", own, annotationPatch(foreignMaintenanceAnnotation, nil), onlyAnnotations},
		{"cannot write the repair's record", own, annotationPatch(contract.AnnotationUnhealthy, `{"since":"2026-11-21T10:00:00Z"}`), onlyAnnotations},
		{"cannot cordon its own node", own, `{"spec":{"unschedulable":true}}`, noSpec},
		{"cannot taint its own node", own, `{"spec":{"taints":[{"key":"example.com/drain","effect":"NoSchedule"}]}}`, noSpec},
		{"cannot label its own node", own, `{"metadata":{"labels":{"example.com/drained":"true"}}}`, noLabels},
		{"cannot cordon its own node as a person's drain", own, `{"metadata":{"annotations":{"sluice.dev/cordoned-by":"cli"}},"spec":{"unschedulable":true}}`, noSpec},
		{"cannot taint while it cordons", own, `{"metadata":{"annotations":{"sluice.dev/cordoned-by":"maintenance/evt-2"}},"spec":{"unschedulable":true,"taints":[{"key":"example.com/drain","effect":"NoSchedule"}]}}`, noSpec},
		{"cannot name a cordon's owner without cordoning", own, annotationPatch(contract.AnnotationCordonedBy, "maintenance/evt-2"), onlyAnnotations},
		{"cannot write the controller's annotation", own, annotationPatch(contract.AnnotationMaintenanceApprove, "evt-1"), onlyAnnotations},
		{"cannot change another's annotation", own, annotationPatch(foreignAnnotation, "agent"), onlyAnnotations},
		{"cannot remove another's annotation", own, annotationPatch(foreignAnnotation, nil), onlyAnnotations},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantPolicyDenial(t, patchNode(ctx, client, tc.node, tc.patch), tc.want)
		})
	}

	preempt := maintenance.NewReport(maintenance.SourceAzure, true, append(slices.Clone(report.Events), maintenance.Event{
		ID: "evt-2", Source: maintenance.SourceAzure, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled, NotBefore: time.Now().Add(30 * time.Second),
	}))
	var schedulable *corev1.Node // its own node as the agent saw it before it cordoned
	t.Run("cordons its own node in the write that reports a Preempt", func(t *testing.T) {
		a := New(client, slog.New(slog.DiscardHandler), Config{Node: own, Source: maintenance.SourceAzure, CordonInvoluntary: true})
		node, err := client.CoreV1().Nodes().Get(ctx, own, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading its own node: %v", err)
		}
		schedulable = node
		if err := a.publish(ctx, node, preempt); err != nil {
			t.Fatalf("publishing a Preempt: %v", err)
		}
		node = getNode(t, env.Client, own)
		if !node.Spec.Unschedulable || node.Annotations[contract.AnnotationCordonedBy] != "maintenance/evt-2" || node.Annotations[contract.AnnotationMaintenanceEvents] != preempt.Encode() {
			t.Fatalf("after the Preempt's report: unschedulable=%v cordoned-by=%q report=%q; want the report and the cordon for maintenance/evt-2 in one write",
				node.Spec.Unschedulable, node.Annotations[contract.AnnotationCordonedBy], node.Annotations[contract.AnnotationMaintenanceEvents])
		}
	})
	for _, tc := range []struct{ name, patch, want string }{
		{"cannot uncordon its own node", `{"spec":{"unschedulable":false}}`, noSpec},
		{"cannot change a cordon's owner", annotationPatch(contract.AnnotationCordonedBy, "maintenance/evt-3"), onlyAnnotations},
		{"cannot remove a cordon's owner", annotationPatch(contract.AnnotationCordonedBy, nil), onlyAnnotations},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantPolicyDenial(t, patchNode(ctx, client, own, tc.patch), tc.want)
		})
	}
	// A person takes the node over: uncordons it, then cordons it by hand.
	if err := patchNode(ctx, env.Client, own, `{"metadata":{"annotations":{"sluice.dev/cordoned-by":null}},"spec":{"unschedulable":false}}`); err != nil {
		t.Fatal(err)
	}
	if err := patchNode(ctx, env.Client, own, `{"spec":{"unschedulable":true}}`); err != nil {
		t.Fatal(err)
	}
	terminate := maintenance.NewReport(maintenance.SourceAzure, true, append(slices.Clone(report.Events), maintenance.Event{
		ID: "evt-3", Source: maintenance.SourceAzure, Type: maintenance.TypeTerminate, Status: maintenance.StatusScheduled, NotBefore: time.Now().Add(5 * time.Minute),
	}))
	t.Run("never claims a person's cordon", func(t *testing.T) {
		claim := `{"metadata":{"annotations":{"sluice.dev/cordoned-by":"maintenance/evt-3"}},"spec":{"unschedulable":true}}`
		wantPolicyDenial(t, patchNode(ctx, client, own, claim), onlyAnnotations)
		// An agent whose view is from before the person's cordon: its
		// conditional write fails, and the report goes out alone.
		a := New(client, slog.New(slog.DiscardHandler), Config{Node: own, Source: maintenance.SourceAzure, CordonInvoluntary: true})
		if err := a.publish(ctx, schedulable, terminate); err != nil {
			t.Fatalf("publishing a Terminate over a stale view: %v", err)
		}
		node := getNode(t, env.Client, own)
		if !node.Spec.Unschedulable || node.Annotations[contract.AnnotationCordonedBy] != "" || node.Annotations[contract.AnnotationMaintenanceEvents] != terminate.Encode() {
			t.Errorf("after a report over a person's cordon: unschedulable=%v cordoned-by=%q report=%q; want the report written and the cordon left the person's",
				node.Spec.Unschedulable, node.Annotations[contract.AnnotationCordonedBy], node.Annotations[contract.AnnotationMaintenanceEvents])
		}
	})

	t.Run("cannot change its own node's status", func(t *testing.T) {
		patch := `{"status":{"capacity":{"` + probeResource + `":"1"}}}`
		err := patchNode(ctx, client, own, patch, "status")
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Fatalf("patching nodes/status: want Forbidden or Invalid, got %v", err)
		}
		t.Logf("denied (%s): %v", apierrors.ReasonForError(err), err)
		if q, ok := getNode(t, env.Client, own).Status.Capacity[probeResource]; ok {
			t.Errorf("node %s has capacity %s=%s after a denied status patch", own, probeResource, q.String())
		}
	})
	t.Run("cannot delete its own node", func(t *testing.T) {
		wantForbidden(t, client.CoreV1().Nodes().Delete(ctx, own, metav1.DeleteOptions{}))
	})
	t.Run("cannot evict a pod", func(t *testing.T) {
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: victim.Namespace, Name: victim.Name}}
		wantForbidden(t, client.PolicyV1().Evictions(victim.Namespace).Evict(ctx, eviction))
		requirePodIntact(t, env.Client, victim)
	})
	t.Run("cannot delete a pod", func(t *testing.T) {
		wantForbidden(t, client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}))
		requirePodIntact(t, env.Client, victim)
	})
	t.Run("cannot read Secrets", func(t *testing.T) {
		_, err := client.CoreV1().Secrets(agentNamespace).List(ctx, metav1.ListOptions{})
		wantForbidden(t, err)
		_, err = client.CoreV1().Secrets(victim.Namespace).Get(ctx, "anything", metav1.GetOptions{})
		wantForbidden(t, err)
	})
	t.Run("a token not bound to a pod on a node may not write", func(t *testing.T) {
		cfg, err := sandbox.AgentConfig(ctx, env.Client, env.Config, agentNamespace, agentServiceAccount, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		unbound, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// RBAC still lets it read: the refusal below is the policy's.
		if _, err := unbound.CoreV1().Nodes().Get(ctx, own, metav1.GetOptions{}); err != nil {
			t.Fatalf("reading node %s with an unbound token: %v", own, err)
		}
		err = patchNode(ctx, unbound, own, annotationPatch(contract.AnnotationMaintenanceEvents, "{}"))
		wantPolicyDenial(t, err, "its token is not bound to a pod on a node")
	})

	wantOwn := before[own].withAnnotations(map[string]string{
		contract.AnnotationMaintenanceEvents:   terminate.Encode(),
		contract.AnnotationMaintenanceApproved: "evt-1",
	})
	wantOwn.Spec.Unschedulable = true // the person's cordon
	want := map[string]nodeState{own: wantOwn, other: before[other]}
	for _, name := range []string{own, other} {
		got := stateOf(t, env.Client, name)
		// The node lifecycle controller taints an unschedulable node.
		got.Spec.Taints = slices.DeleteFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnschedulable })
		if diff := got.diff(want[name]); len(diff) > 0 {
			t.Errorf("node %s changed beyond the agent's own annotations:\n%s", name, strings.Join(diff, "\n"))
		}
	}
}

// installAgentPolicy applies the chart's agent manifests, and their namespace,
// as `helm install --namespace sluice-system --create-namespace` would.
func installAgentPolicy(t *testing.T, env *sandboxtest.Env) {
	t.Helper()
	policy, err := chart.AgentPolicy(agentNamespace)
	if err != nil {
		t.Fatal(err)
	}
	namespace := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + agentNamespace + "\n---\n"
	if err := sandbox.ApplyManifests(t.Context(), env.Config, namespace+policy); err != nil {
		t.Fatalf("installing the agent policy: %v", err)
	}
}

// agentPod runs a pod as the agent's service account on node, as its
// DaemonSet would, and returns it once kwok reports it running.
func agentPod(t *testing.T, env *sandboxtest.Env, node string) *corev1.Pod {
	t.Helper()
	pod := fixture.Pod(agentNamespace, "sluice-agent-"+node, fixture.OnNode(node), fixture.Tolerate(""))
	pod.Spec.ServiceAccountName = agentServiceAccount
	created, err := env.Client.CoreV1().Pods(agentNamespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the agent pod: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Pods(agentNamespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	env.WaitFor(t, 30*time.Second, "the agent pod running", func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(agentNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	return created
}

// requireBoundToNode fails the test unless the API server sees client as the
// agent's service account on node: without the node in its extra info the
// policy refuses every write, and the denials below would prove nothing.
func requireBoundToNode(t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking the API server who the agent is: %v", err)
	}
	user := review.Status.UserInfo
	if want := "system:serviceaccount:" + agentNamespace + ":" + agentServiceAccount; user.Username != want {
		t.Fatalf("the agent's token authenticates as %q, want %q", user.Username, want)
	}
	if got := user.Extra[nodeNameExtra]; len(got) != 1 || got[0] != node {
		t.Fatalf("the agent's pod-bound token carries %s=%v, want [%s] (extra: %v)", nodeNameExtra, got, node, user.Extra)
	}
	t.Logf("the agent authenticates as %s with extra %v", user.Username, user.Extra)
}

// waitForPolicy waits until the API server enforces the agent policy, which
// it loads a moment after it is created: until then a dry run of a write the
// policy refuses for several reasons at once (another node, its labels, its
// spec) succeeds, or is Forbidden while RBAC catches up with the new binding.
func waitForPolicy(t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	begin := time.Now()
	patch := []byte(`{"metadata":{"labels":{"example.com/probe":"x"}},"spec":{"unschedulable":true}}`)
	opts := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	var last error
	tries := 0
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		tries++
		_, last = client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, opts)
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+agentPolicy+"'"), nil
	})
	if err != nil {
		t.Fatalf("waiting for policy %s to refuse the agent's write to node %s: %v; last answer: %v", agentPolicy, node, err, last)
	}
	t.Logf("policy in force after %s (%d dry runs): %v", time.Since(begin).Round(time.Millisecond), tries, last)
}

// nodeState is what the agent must not change on a node.
type nodeState struct {
	Labels      map[string]string
	Annotations map[string]string
	Spec        corev1.NodeSpec
	Capacity    corev1.ResourceList
}

func stateOf(t *testing.T, client kubernetes.Interface, name string) nodeState {
	t.Helper()
	n := getNode(t, client, name)
	return nodeState{Labels: n.Labels, Annotations: n.Annotations, Spec: n.Spec, Capacity: n.Status.Capacity}
}

// withAnnotations returns s with extra annotations added.
func (s nodeState) withAnnotations(extra map[string]string) nodeState {
	s.Annotations = maps.Clone(s.Annotations)
	maps.Copy(s.Annotations, extra)
	return s
}

// diff lists how s differs from want, one line per difference.
func (s nodeState) diff(want nodeState) []string {
	var out []string
	for _, m := range []struct {
		what      string
		got, want map[string]string
	}{{"label", s.Labels, want.Labels}, {"annotation", s.Annotations, want.Annotations}} {
		for k, v := range m.got {
			switch w, ok := m.want[k]; {
			case !ok:
				out = append(out, fmt.Sprintf("%s %s = %q appeared", m.what, k, v))
			case w != v:
				out = append(out, fmt.Sprintf("%s %s = %q, want %q", m.what, k, v, w))
			}
		}
		for k, w := range m.want {
			if _, ok := m.got[k]; !ok {
				out = append(out, fmt.Sprintf("%s %s is gone, want %q", m.what, k, w))
			}
		}
	}
	if !apiequality.Semantic.DeepEqual(s.Spec, want.Spec) {
		out = append(out, fmt.Sprintf("spec = %+v, want %+v", s.Spec, want.Spec))
	}
	if !apiequality.Semantic.DeepEqual(s.Capacity, want.Capacity) {
		out = append(out, fmt.Sprintf("capacity = %v, want %v", s.Capacity, want.Capacity))
	}
	slices.Sort(out)
	return out
}

func getNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return n
}

func patchNode(ctx context.Context, client kubernetes.Interface, name, patch string, subresources ...string) error {
	_, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, subresources...)
	return err
}

// annotationPatch is a merge patch setting one annotation; a nil value
// removes it.
func annotationPatch(key string, value any) string {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return string(b)
}

// wantPolicyDenial fails the test unless err is the agent policy's refusal
// (Invalid, not an RBAC Forbidden) saying want.
func wantPolicyDenial(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("the API server allowed the write; want the policy to refuse it: %s", want)
	case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), agentPolicy):
		t.Fatalf("want policy %s to refuse the write (Invalid), got %v", agentPolicy, err)
	case !strings.Contains(err.Error(), want):
		t.Fatalf("the policy refused the write, but not saying %q: %v", want, err)
	}
	t.Logf("denied (%s): %v", apierrors.ReasonForError(err), err)
}

// wantForbidden fails the test unless RBAC refused the request.
func wantForbidden(t *testing.T, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden, got %v", err)
	}
	t.Logf("denied (%s): %v", apierrors.ReasonForError(err), err)
}

// requirePodIntact fails the test unless pod still exists and is not being
// deleted.
func requirePodIntact(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	p, err := client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	if p.DeletionTimestamp != nil {
		t.Fatalf("pod %s/%s is being deleted", pod.Namespace, pod.Name)
	}
}
