package capihook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
)

// Drain behaviours, as MachineDrainRule's spec.drain.behavior and the pod
// label cluster.x-k8s.io/drain name them.
const (
	behaviorDrain         = "Drain"
	behaviorSkip          = "Skip"
	behaviorWaitCompleted = "WaitCompleted"
)

// drainRule is the part of a MachineDrainRule sluice reads.
type drainRule struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Drain struct {
			Behavior string `json:"behavior"`
		} `json:"drain"`
		Machines []struct {
			Selector        *metav1.LabelSelector `json:"selector,omitempty"`
			ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
		} `json:"machines,omitempty"`
		Pods []podSelector `json:"pods,omitempty"`
	} `json:"spec"`
}

// podSelector is one entry of a MachineDrainRule's spec.pods.
type podSelector struct {
	Selector          *metav1.LabelSelector `json:"selector,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ruleSet is how Cluster API would treat each pod of one Machine's Node: the
// MachineDrainRules in the Machine's namespace that match the Machine (in
// name order), under the pod label cluster.x-k8s.io/drain, which wins.
type ruleSet struct {
	rules    []drainRule
	nsLabels func(ns string) labels.Set
}

// rules reads the MachineDrainRules that apply to the Machine.
func (c *Controller) rules(ctx context.Context, m *unstructured.Unstructured) (*ruleSet, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(clusterapi.Group + "/" + clusterapi.Version)
	list.SetKind("MachineDrainRuleList")
	if err := c.kube.List(ctx, list, client.InNamespace(m.GetNamespace())); err != nil {
		return nil, fmt.Errorf("listing MachineDrainRules: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	var clusterLabels labels.Set
	if name, _, _ := unstructured.NestedString(m.Object, "spec", "clusterName"); name != "" {
		cl := &unstructured.Unstructured{}
		cl.SetAPIVersion(clusterapi.Group + "/" + clusterapi.Version)
		cl.SetKind("Cluster")
		if err := c.kube.Get(ctx, types.NamespacedName{Namespace: m.GetNamespace(), Name: name}, cl); err == nil {
			clusterLabels = cl.GetLabels()
		}
	}
	rs := &ruleSet{nsLabels: func(string) labels.Set { return nil }}
	byNamespace := false
	for _, item := range list.Items {
		var r drainRule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &r); err != nil {
			return nil, fmt.Errorf("reading MachineDrainRule %s: %w", item.GetName(), err)
		}
		if r.machineMatches(m.GetLabels(), clusterLabels) {
			rs.rules = append(rs.rules, r)
			byNamespace = byNamespace || slices.ContainsFunc(r.Spec.Pods, func(e podSelector) bool { return e.NamespaceSelector != nil })
		}
	}
	if byNamespace {
		// Read now: the drain asks later, after this reconcile's context
		// has ended.
		var nss corev1.NamespaceList
		if err := c.kube.List(ctx, &nss); err != nil {
			return nil, fmt.Errorf("listing namespaces for MachineDrainRules' namespaceSelector: %w", err)
		}
		byName := make(map[string]labels.Set, len(nss.Items))
		for _, n := range nss.Items {
			byName[n.Name] = n.Labels
		}
		rs.nsLabels = func(ns string) labels.Set { return byName[ns] }
	}
	return rs, nil
}

func (r drainRule) machineMatches(machine, cluster labels.Set) bool {
	if len(r.Spec.Machines) == 0 {
		return true
	}
	for _, e := range r.Spec.Machines {
		if matches(e.Selector, machine) && matches(e.ClusterSelector, cluster) {
			return true
		}
	}
	return false
}

func (r drainRule) podMatches(pod labels.Set, ns func() labels.Set) bool {
	if len(r.Spec.Pods) == 0 {
		return true
	}
	for _, e := range r.Spec.Pods {
		if matches(e.Selector, pod) && (e.NamespaceSelector == nil || matches(e.NamespaceSelector, ns())) {
			return true
		}
	}
	return false
}

// matches: an absent selector matches everything, as in Cluster API.
func matches(s *metav1.LabelSelector, set labels.Set) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(set)
}

// behavior is how Cluster API drains the pod: the label first (skip,
// wait-completed; case does not matter, nor the dash), then the first rule whose
// pods match, else Drain.
func (rs *ruleSet) behavior(p *corev1.Pod) string {
	switch strings.Replace(strings.ToLower(p.Labels[clusterapi.LabelDrain]), "-", "", 1) {
	case "skip":
		return behaviorSkip
	case "waitcompleted":
		return behaviorWaitCompleted
	}
	for _, r := range rs.rules {
		if r.podMatches(p.Labels, func() labels.Set { return rs.nsLabels(p.Namespace) }) {
			if r.Spec.Drain.Behavior == "" {
				return behaviorDrain
			}
			return r.Spec.Drain.Behavior
		}
	}
	return behaviorDrain
}

// evicts is the drain's pod filter: only pods Cluster API would drain.
func (rs *ruleSet) evicts(p *corev1.Pod) bool { return rs.behavior(p) == behaviorDrain }

// waitCompleted names the WaitCompleted pods still running on the Node, ""
// when there are none: Cluster API waits for them to finish rather than
// evicting them, and so does sluice before it releases the Machine.
func (c *Controller) waitCompleted(ctx context.Context, m *unstructured.Unstructured, node *corev1.Node) string {
	rs, err := c.rules(ctx, m)
	if err != nil {
		return err.Error()
	}
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods); err != nil {
		return err.Error()
	}
	var waiting []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node.Name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if rs.behavior(p) == behaviorWaitCompleted {
			waiting = append(waiting, p.Namespace+"/"+p.Name)
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	slices.Sort(waiting)
	return fmt.Sprintf("sluice drained Node %s and waits for %d pod(s) to complete, as their drain behavior WaitCompleted asks: %s",
		node.Name, len(waiting), strings.Join(waiting, ", "))
}
