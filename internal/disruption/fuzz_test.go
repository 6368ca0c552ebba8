package disruption_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "k8s.io/apimachinery/pkg/util/json"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// FuzzNodePool decodes arbitrary JSON as a NodePool, the way a pool arrives
// from the API server (whose schema a pool may have slipped past, or
// predate), and runs on it what the controllers run: validation, node
// matching, candidates, protection, budgets, maintenance policy and Explain.
// Nothing may panic; a selector that does not parse, or selects everything,
// and a budget that cannot be read, must come back as the pool's Problem;
// and a pool Validate accepts must be one whose budgets answer and whose
// template's nodes it selects.
func FuzzNodePool(f *testing.F) {
	for _, seed := range []string{
		`{"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}}}`,
		`{"apiVersion": "sluice.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "gpu", "creationTimestamp": "2026-10-01T00:00:00Z"},
		  "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}, "matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]},
		    "provider": {"name": "kwok", "kwok": {"bootDelay": "5s", "failure": "None"}},
		    "template": {"labels": {"pool": "gpu"}, "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
		      "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}],
		      "instanceTypes": ["Standard_NC6s_v3", "m6i.xlarge"], "capacity": "spot", "image": "AKSUbuntu-2204gen2-2026.10.01", "kubelet": {"maxPods": 110}},
		    "disruption": {"expireAfter": "720h", "terminationGracePeriod": "48h", "budgets": [
		      {"nodes": "20%"}, {"nodes": "0", "reasons": ["Drifted", "Expired"], "schedule": "0 9 * * mon-fri", "timeZone": "Europe/Berlin", "duration": "8h"}]},
		    "limits": {"cpu": "1000", "memory": "1000Gi", "nodes": 50},
		    "maintenance": {"actions": {"Freeze": "Drain", "Rebalance": "Cordon"}, "approveEarly": false, "deadlineMargin": "1m", "onDeadline": "Stop", "forceEvict": "Always", "userInitiated": "Approve"}}}`,
		`{"metadata": {"name": "lower"}, "spec": {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "in", "values": ["gpu"]}]}}}`,
		`{"metadata": {"name": "exists"}, "spec": {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Exists", "values": ["gpu"]}]}}}`,
		`{"metadata": {"name": "novalues"}, "spec": {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "NotIn"}]}}}`,
		`{"metadata": {"name": "badkey"}, "spec": {"nodeSelector": {"matchLabels": {"-pool/": "a b"}}}}`,
		`{"metadata": {"name": "all"}, "spec": {"nodeSelector": {}}}`,
		`{"metadata": {"name": "everyos"}, "spec": {"nodeSelector": {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "Exists"}]}, "disruption": {"expireAfter": "1m"}}}`,
		`{"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "disruption": {"budgets": [{"nodes": "1", "schedule": "TZ=Europe/Berlin 0 9 * * *", "duration": "1h"}]}}}`,
		`{"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "disruption": {"budgets": [{"nodes": "150%"}, {"nodes": "1", "timeZone": "Mars/Olympus"}]}}}`,
		`{"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "disruption": {"expireAfter": "-1h", "budgets": [{"nodes": "1", "schedule": "0 0 30 2 *", "duration": "1h"}]}}}`,
		`{"metadata": {"name": "gpu", "annotations": {"sluice.dev/do-not-disrupt": "2h"}}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "disruption": {"paused": true}}}`,
		`{"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "provider": {"name": "kwok"}, "template": {"labels": {"pool": "cpu"}}, "limits": {"nodes": 0}}}`,
		`{"metadata": {"name": "gpu"}, "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "maintenance": {"actions": {"Preempt": "Explode"}, "deadlineMargin": "-10m"}}}`,
		`{"spec": null}`, `[]`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var pool v1alpha1.NodePool
		if kjson.Unmarshal(data, &pool) != nil {
			return
		}
		now := t0.Add(40 * 24 * time.Hour)
		nodes := fuzzNodes()

		sel, selErr := metav1.LabelSelectorAsSelector(&pool.Spec.NodeSelector)
		selectorOK := selErr == nil && !sel.Empty()
		budgetErr := error(nil)
		if d := pool.Spec.Disruption; d != nil {
			budgetErr = budget.Validate(d.Budgets)
		}
		var members []*corev1.Node
		for _, n := range nodes {
			got, err := nodepool.For(n, []v1alpha1.NodePool{pool})
			var selectorErr *nodepool.SelectorError
			switch {
			case !selectorOK && (got != nil || !errors.As(err, &selectorErr)):
				t.Fatalf("selector %v (%v) of %s: For(%s) = %v, %v; want no pool and a SelectorError", pool.Spec.NodeSelector, selErr, data, n.Name, got, err)
			case selectorOK && (got != nil) != sel.Matches(labels.Set(n.Labels)):
				t.Fatalf("selector %s: For(%s) = %v, %v", sel, n.Name, got, err)
			}
			if got != nil {
				members = append(members, n)
			}
		}

		problem := nodepool.Validate(&pool, len(members))
		switch {
		case !selectorOK:
			if problem == nil || problem.Reason != nodepool.ReasonInvalidNodeSelector {
				t.Fatalf("selector %v (%v): Validate = %+v; want %s", pool.Spec.NodeSelector, selErr, problem, nodepool.ReasonInvalidNodeSelector)
			}
		case budgetErr != nil:
			if problem == nil || problem.Reason != nodepool.ReasonInvalidBudget {
				t.Fatalf("budgets %v (%v): Validate = %+v; want %s", pool.Spec.Disruption.Budgets, budgetErr, problem, nodepool.ReasonInvalidBudget)
			}
		case problem == nil:
			checkAccepted(t, &pool, sel, members, now)
		}

		checkPolicy(t, &pool)
		hash := provider.TemplateHash(pool.Spec.Template)
		for _, c := range disruption.Candidates(&pool, members, hash, now) {
			switch {
			case c.Reason == v1alpha1.ReasonDrifted && len(c.Differences) == 0,
				c.Reason == v1alpha1.ReasonExpired && (c.ExpiredAt.IsZero() || c.ExpiredAt.After(now)),
				c.Reason != v1alpha1.ReasonDrifted && c.Reason != v1alpha1.ReasonExpired:
				t.Fatalf("candidate %s of %s: %+v", c.Node.Name, data, c)
			}
			_ = c.Message()
		}
		after, expires := pool.DisruptionSpec().ExpireAfterDuration()
		for _, n := range nodes {
			at, _, ok := disruption.Expiry(n, pool.DisruptionSpec(), now)
			if ok != (expires && !n.CreationTimestamp.IsZero()) || ok && (after <= 0 || !at.Equal(n.CreationTimestamp.Add(after))) {
				t.Fatalf("disruption %+v: Expiry(%s) = %s, %t", pool.Spec.Disruption, n.Name, at, ok)
			}
			p := disruption.Protected(&pool, n, nil, now)
			if pool.DisruptionSpec().IsPaused() && (p == nil || p.Reason != disruption.ReasonPaused) {
				t.Fatalf("paused pool: Protected(%s) = %+v", n.Name, p)
			}
			if p != nil && !p.Until.IsZero() && !p.Until.After(now) {
				t.Fatalf("Protected(%s) = %+v, lapsed already", n.Name, p)
			}
			// Explain is asked about a node with the pool For found for it.
			in := disruption.ExplainInput{Node: n, Now: now}
			if slices.Contains(members, n) {
				in.Pool, in.Members = &pool, members
			}
			e := disruption.Explain(in)
			if e.Verdict.Code == "" || e.Verdict.Message == "" || in.Pool != nil && (problem != nil) != (e.Pool.Problem != nil) {
				t.Fatalf("Explain(%s) in %s: %+v", n.Name, data, e)
			}
		}
	})
}

// checkAccepted holds a pool Validate accepts to what the controller then
// relies on: its budgets answer for every reason within the pool's size,
// nodes its provider makes from the template belong to it, and its limits
// leave room for its nodes.
func checkAccepted(t *testing.T, pool *v1alpha1.NodePool, sel labels.Selector, members []*corev1.Node, now time.Time) {
	t.Helper()
	budgets := pool.DisruptionSpec().BudgetsOrDefault()
	disrupting := budget.Count(members, disruption.Replacements(members), now)
	for _, r := range v1alpha1.DisruptionReasons {
		a, err := budget.Allowed(budgets, len(members), disrupting, r, now)
		if err != nil || a.Nodes < 0 || a.Nodes > len(members) {
			t.Fatalf("accepted pool %s: Allowed(%s) = %+v, %v", pool.Name, r, a, err)
		}
	}
	if _, _, err := budget.NextChange(budgets, now); err != nil {
		t.Fatalf("accepted pool %s: NextChange: %v", pool.Name, err)
	}
	if tmpl := pool.Spec.Template; tmpl != nil && pool.Spec.Provider.Manages() && !sel.Matches(labels.Set(tmpl.Labels)) {
		t.Fatalf("accepted pool %s: template labels %v are not selected by %s", pool.Name, tmpl.Labels, sel)
	}
	if l := pool.Spec.Limits; l != nil && l.Nodes != nil && int(*l.Nodes) < len(members) {
		t.Fatalf("accepted pool %s: limits.nodes %d below its %d nodes", pool.Name, *l.Nodes, len(members))
	}
}

// checkPolicy reads the pool's maintenance policy as the maintenance
// controller does: every event type gets the pool's action or a default one.
func checkPolicy(t *testing.T, pool *v1alpha1.NodePool) {
	t.Helper()
	m := pool.MaintenanceSpec()
	for _, typ := range []maintenance.Type{maintenance.TypeFreeze, maintenance.TypeReboot, maintenance.TypeRedeploy,
		maintenance.TypePreempt, maintenance.TypeTerminate, maintenance.TypeRebalance, maintenance.TypeMaintenance, "Unknown"} {
		a := nodepool.ActionFor(m, typ)
		if a == "" || typ == "Unknown" && a != v1alpha1.ActionNone {
			t.Fatalf("pool %s: ActionFor(%s) = %q", pool.Name, typ, a)
		}
		_ = nodepool.ForceEvictFor(m, typ)
	}
	_, _, _ = m.ApproveEarlyOrDefault(), m.DeadlineMarginOrDefault(), m.OnDeadlineOrDefault()
	_ = m.ApproveUserInitiated()
	_, _ = pool.DisruptionSpec().TerminationGracePeriodOrNone()
}

// fuzzNodes are the nodes a fuzzed pool meets: of the pool and not, old and
// new, drifted in every way Drift looks, protected, being replaced, and one
// with no creation time.
func fuzzNodes() []*corev1.Node {
	ready := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	return []*corev1.Node{
		node("gpu-1", label("pool", "gpu"), label("kubernetes.io/os", "linux"), label(corev1.LabelInstanceTypeStable, "Standard_NC6s_v3"),
			label(contract.LabelCapacityType, "spot"), annotate(contract.AnnotationImage, "AKSUbuntu-2204gen2-2026.10.01"),
			tainted("gpu", "true", corev1.TaintEffectNoSchedule), ready),
		node("gpu-2", label("pool", "gpu"), label("kubernetes.io/os", "linux"), label(corev1.LabelInstanceTypeStable, "m5.large"),
			label("eks.amazonaws.com/capacityType", "ON_DEMAND"), label("kubernetes.azure.com/node-image-version", "AKSUbuntu-2204gen2-2025.01.01"),
			annotate(contract.AnnotationTemplateHash, "0123456789abcdef"), created(t0.Add(-400*24*time.Hour)), ready),
		node("gpu-3", label("pool", "gpu"), annotate(contract.AnnotationDoNotDisrupt, "72h"), created(t0.Add(39*24*time.Hour)), ready),
		node("gpu-4", label("pool", "gpu"), annotate(contract.AnnotationDisruption,
			disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: t0, Replacement: "gpu-5"}.String())),
		node("gpu-5", label("pool", "gpu"), label("kubernetes.io/os", "linux")),
		node("gpu-6", label("pool", "gpu"), annotate(contract.AnnotationDisruption, "{not json"), func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("gpu-7", label("pool", "gpu"), created(time.Time{}), annotate(contract.AnnotationDoNotDisrupt, "true"), deleting),
		node("cpu-1", label("pool", "cpu"), label("kubernetes.io/os", "windows"), ready),
		node("bare"),
	}
}

// FuzzRecord reads arbitrary values of a node's sluice.dev/disruption
// annotation, the record a restarted controller resumes from. A record that
// reads re-encodes to one that reads back the same; one that does not is an
// error (Explain says so) and names no replacement; either way the node
// counts against its pool's budgets.
func FuzzRecord(f *testing.F) {
	launched := t0.Add(time.Minute)
	for _, seed := range []string{
		disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: t0}.String(),
		disruption.Record{Reason: v1alpha1.ReasonExpired, Phase: disruption.PhaseLaunching, Since: t0, Replacement: "gpu-x7k2p", LaunchedAt: &launched}.String(),
		disruption.Record{Reason: disruption.ReasonDeleted, Phase: disruption.PhaseTerminating, Since: t0, Message: "deleted by a person"}.String(),
		`{"reason": "Drifted", "phase": "Sideways", "since": "0000-01-01T00:00:00Z", "launchedAt": "9999-12-31T23:59:59+23:59"}`,
		`{"replacement": "gpu-1"}`, `{"since": "yesterday"}`, `{}`, `null`, `""`, `[]`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}}}
		n := node("gpu-1", label("pool", "gpu"), annotate(contract.AnnotationDisruption, raw))
		now := t0.Add(time.Hour)
		if _, counts := budget.Disrupting(n, now); !counts {
			t.Fatalf("record %q: the node does not count against its budgets", raw)
		}
		r, err := disruption.RecordOf(n)
		replacements := disruption.Replacements([]*corev1.Node{n})
		verdict := disruption.Explain(disruption.ExplainInput{Pool: pool, Node: n, Now: now}).Verdict
		if err != nil {
			want := disruption.VerdictRecordUnreadable
			if disruption.IsNewerRecord(err) {
				want = disruption.VerdictRecordFromNewerVersion
			}
			if r != nil || len(replacements) != 0 || verdict.Code != want {
				t.Fatalf("unreadable record %q (%v): %+v, replacements %v, verdict %+v", raw, err, r, replacements, verdict)
			}
			return
		}
		// Replacements names Nodes present: here only the node itself, when
		// its record (oddly) names it.
		self := r != nil && r.Replacement != "" && r.Replacement == provider.MachineName(n)
		if r == nil || verdict.Code != disruption.VerdictBeingReplaced || self != replacements[n.Name] || len(replacements) > 1 {
			t.Fatalf("record %q: %+v, replacements %v, verdict %+v", raw, r, replacements, verdict)
		}
		enc := r.String()
		back, err := disruption.RecordOf(node("gpu-1", annotate(contract.AnnotationDisruption, enc)))
		if err != nil || back == nil || back.String() != enc {
			t.Fatalf("record %q encodes as %q, which reads back as %+v, %v", raw, enc, back, err)
		}
	})
}

// FuzzDoNotDisrupt protects a node by arbitrary sluice.dev/do-not-disrupt
// values on its pool, on itself and on a pod, at any age. Protected must
// agree with what the annotation documents: on a pool any value but false
// pauses it; on a node or pod, true protects for good, a duration until it
// has passed since the node's creation or the pod's start, and anything
// else for good (so a typo never exposes a node); the longest protection
// wins.
func FuzzDoNotDisrupt(f *testing.F) {
	for _, seed := range []struct {
		pool, node, pod string
		age             int64
	}{
		{"", "", "", 0}, {"true", "", "", 0}, {"false", "2h", "", int64(time.Hour)}, {"", "2h", "", int64(3 * time.Hour)},
		{"", "", "30m", int64(10 * time.Minute)}, {"", "2h", "3h", int64(150 * time.Minute)}, {"", "true", "1h", 0},
		{"", "-1h", "", 0}, {"", "1d", "", 0}, {"", "2562047h47m16.854775807s", "", 0}, {"", "0s", "yes", 0},
		{"2h", "", "", 0}, {"", " true", "False", 0}, {"", "1h", "", -int64(time.Hour)},
	} {
		f.Add(seed.pool, seed.node, seed.pod, seed.age)
	}
	f.Fuzz(func(t *testing.T, poolValue, nodeValue, podValue string, age int64) {
		pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Annotations: map[string]string{contract.AnnotationDoNotDisrupt: poolValue}}}
		n := node("gpu-1", annotate(contract.AnnotationDoNotDisrupt, nodeValue))
		started := t0.Add(-time.Hour)
		p := pod("default", "web-0", podAnnotated(contract.AnnotationDoNotDisrupt, podValue), func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: started} })
		now := t0.Add(time.Duration(age))

		got := disruption.Protected(pool, n, []*corev1.Pod{p}, now)
		if poolValue != "" && poolValue != "false" {
			if got == nil || got.Reason != disruption.ReasonPoolDoNotDisrupt || !got.Until.IsZero() {
				t.Fatalf("pool annotated %q: Protected = %+v", poolValue, got)
			}
			return
		}
		onNode, nodeForGood := wantProtection(nodeValue, n.CreationTimestamp.Time, now)
		onPod, podForGood := wantProtection(podValue, started, now)
		switch {
		case !onNode && !onPod:
			if got != nil {
				t.Fatalf("node %q, pod %q at %s: Protected = %+v; want none", nodeValue, podValue, now, got)
			}
			return
		case got == nil:
			t.Fatalf("node %q, pod %q at %s: not protected", nodeValue, podValue, now)
		case !got.Until.IsZero() && !got.Until.After(now):
			t.Fatalf("node %q, pod %q at %s: Protected = %+v, lapsed already", nodeValue, podValue, now, got)
		case (nodeForGood || podForGood) != got.Until.IsZero():
			t.Fatalf("node %q, pod %q at %s: Protected = %+v; for good: node %t, pod %t", nodeValue, podValue, now, got, nodeForGood, podForGood)
		}
		var until time.Time
		for _, v := range []struct {
			on    bool
			value string
			since time.Time
		}{{onNode, nodeValue, n.CreationTimestamp.Time}, {onPod, podValue, started}} {
			if d, err := time.ParseDuration(v.value); v.on && err == nil && d >= 0 && v.since.Add(d).After(until) {
				until = v.since.Add(d)
			}
		}
		if !got.Until.IsZero() && !got.Until.Equal(until) {
			t.Fatalf("node %q, pod %q at %s: protected until %s; want %s", nodeValue, podValue, now, got.Until, until)
		}
	})
}

// wantProtection is what the do-not-disrupt annotation documents for value,
// counted from since: whether it protects at now, and whether for good.
func wantProtection(value string, since, now time.Time) (protects, forGood bool) {
	switch value {
	case "", "false":
		return false, false
	case "true":
		return true, true
	}
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return true, true
	}
	return now.Before(since.Add(d)), false
}
