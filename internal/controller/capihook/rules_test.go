package capihook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

func rule(name, behavior string, pods map[string]string, namespaces map[string]string) drainRule {
	var r drainRule
	r.Metadata.Name = name
	r.Spec.Drain.Behavior = behavior
	if pods != nil || namespaces != nil {
		e := podSelector{}
		if pods != nil {
			e.Selector = &metav1.LabelSelector{MatchLabels: pods}
		}
		if namespaces != nil {
			e.NamespaceSelector = &metav1.LabelSelector{MatchLabels: namespaces}
		}
		r.Spec.Pods = append(r.Spec.Pods, e)
	}
	return r
}

func pod(ns string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: lbls}}
}

// Cluster API's documented order: the pod label first (any case, dash
// optional), then the first matching rule by name, else Drain.
func TestBehaviorFollowsClusterAPIsOrder(t *testing.T) {
	rs := &ruleSet{
		rules: []drainRule{
			rule("a-skip-agents", behaviorSkip, map[string]string{"app": "agent"}, nil),
			rule("b-wait-jobs", behaviorWaitCompleted, map[string]string{"kind": "job"}, nil),
			rule("c-skip-system", behaviorSkip, nil, map[string]string{"tier": "system"}),
			rule("d-drain-agents", behaviorDrain, map[string]string{"app": "agent"}, nil),
		},
		nsLabels: func(ns string) labels.Set {
			if ns == "kube-system" {
				return labels.Set{"tier": "system"}
			}
			return nil
		},
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"no rule matches", pod("web", map[string]string{"app": "web"}), behaviorDrain},
		{"first rule by name wins", pod("web", map[string]string{"app": "agent"}), behaviorSkip},
		{"wait-completed rule", pod("web", map[string]string{"kind": "job"}), behaviorWaitCompleted},
		{"namespace selector", pod("kube-system", map[string]string{"app": "dns"}), behaviorSkip},
		{"label skip beats no rule", pod("web", map[string]string{"cluster.x-k8s.io/drain": "skip"}), behaviorSkip},
		{"label in any case, dash optional", pod("web", map[string]string{"cluster.x-k8s.io/drain": "Wait-Completed"}), behaviorWaitCompleted},
		{"label beats a rule", pod("web", map[string]string{"app": "agent", "cluster.x-k8s.io/drain": "waitcompleted"}), behaviorWaitCompleted},
		{"unknown label value is ignored", pod("web", map[string]string{"app": "agent", "cluster.x-k8s.io/drain": "never"}), behaviorSkip},
	} {
		if got := rs.behavior(tc.pod); got != tc.want {
			t.Errorf("%s: behavior = %s; want %s", tc.name, got, tc.want)
		}
		if got, want := rs.evicts(tc.pod), tc.want == behaviorDrain; got != want {
			t.Errorf("%s: evicts = %v; want %v", tc.name, got, want)
		}
	}
}

func TestRuleMatchesMachinesAndClusters(t *testing.T) {
	r := rule("r", behaviorSkip, nil, nil)
	if !r.machineMatches(labels.Set{"x": "y"}, nil) {
		t.Error("a rule with no machines entry must match every Machine")
	}
	r.Spec.Machines = append(r.Spec.Machines, struct {
		Selector        *metav1.LabelSelector `json:"selector,omitempty"`
		ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	}{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "gpu"}}, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}})
	for _, tc := range []struct {
		machine, cluster labels.Set
		want             bool
	}{
		{labels.Set{"role": "gpu"}, labels.Set{"env": "prod"}, true},
		{labels.Set{"role": "gpu"}, labels.Set{"env": "dev"}, false},
		{labels.Set{"role": "cpu"}, labels.Set{"env": "prod"}, false},
	} {
		if got := r.machineMatches(tc.machine, tc.cluster); got != tc.want {
			t.Errorf("machine %v cluster %v: %v; want %v (selector and clusterSelector are ANDed)", tc.machine, tc.cluster, got, tc.want)
		}
	}
}

func machineWith(conds ...map[string]any) *unstructured.Unstructured {
	m := machine()
	list := make([]any, len(conds))
	for i, c := range conds {
		list[i] = c
	}
	_ = unstructured.SetNestedSlice(m.Object, list, "status", "conditions")
	return m
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name        string
		m           *unstructured.Unstructured
		involuntary bool
		budget      string
	}{
		{"remediation by a MachineHealthCheck", machineWith(map[string]any{"type": "HealthCheckSucceeded", "status": "False"}), true, ""},
		{"remediation by its owner", machineWith(map[string]any{"type": "OwnerRemediated", "status": "False"}, map[string]any{"type": "UpToDate", "status": "False"}), true, ""},
		{"a rollout", machineWith(map[string]any{"type": "UpToDate", "status": "False"}), false, "Upgrade"},
		{"a scale-down", machineWith(map[string]any{"type": "UpToDate", "status": "True"}), false, ""},
	} {
		got := classify(tc.m)
		if got.involuntary != tc.involuntary || string(got.budget) != tc.budget {
			t.Errorf("%s: %+v; want involuntary %v, budget %q", tc.name, got, tc.involuntary, tc.budget)
		}
	}
}
