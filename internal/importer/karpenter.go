package importer

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Karpenter's names, from its v1 API (sigs.k8s.io/karpenter v1.14).
const (
	KarpenterAPIVersion = "karpenter.sh/v1"
	karpenterNodePool   = "NodePool"
	// LabelKarpenterNodePool is the label Karpenter puts on every node it
	// launched for a NodePool, naming it.
	LabelKarpenterNodePool = "karpenter.sh/nodepool"
	// AnnotationKarpenterDoNotDisrupt protects a pod or node from
	// Karpenter's voluntary disruption.
	AnnotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	labelInstanceType               = "node.kubernetes.io/instance-type"
	labelKarpenterCapacityType      = "karpenter.sh/capacity-type"
)

// Karpenter's defaults, which its CRD applies to a NodePool that leaves the
// fields out (a file not yet applied, as a test's input is).
const (
	karpenterDefaultExpireAfter      = "720h"
	karpenterDefaultConsolidateAfter = "0s"
	karpenterDefaultBudget           = "10%"
)

// KarpenterOptions say what Karpenter's NodePools cannot: which provider
// sluice's pools use, and which nodes they select.
type KarpenterOptions struct {
	// Provider is the imported pools' provider, name and settings; the
	// zero value is provider none.
	Provider v1alpha1.ProviderSpec
	// Selector, when set, is the imported pool's node selector, in place
	// of karpenter.sh/nodepool=NAME. It needs exactly one pool to import.
	Selector map[string]string
}

// karpenterPool is the part of Karpenter's v1 NodePool sluice reads; our own
// declaration of its documented fields, so sluice does not depend on
// Karpenter's module.
type karpenterPool struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Taints        []corev1.Taint `json:"taints"`
				StartupTaints []corev1.Taint `json:"startupTaints"`
				Requirements  []struct {
					Key       string   `json:"key"`
					Operator  string   `json:"operator"`
					Values    []string `json:"values"`
					MinValues *int     `json:"minValues"`
				} `json:"requirements"`
				NodeClassRef *struct {
					Group string `json:"group"`
					Kind  string `json:"kind"`
					Name  string `json:"name"`
				} `json:"nodeClassRef"`
				ExpireAfter            *string `json:"expireAfter"`
				TerminationGracePeriod *string `json:"terminationGracePeriod"`
			} `json:"spec"`
		} `json:"template"`
		Disruption *struct {
			ConsolidationPolicy string  `json:"consolidationPolicy"`
			ConsolidateAfter    *string `json:"consolidateAfter"`
			Budgets             []struct {
				Nodes    string   `json:"nodes"`
				Reasons  []string `json:"reasons"`
				Schedule *string  `json:"schedule"`
				Duration *string  `json:"duration"`
			} `json:"budgets"`
		} `json:"disruption"`
		Limits   map[string]resource.Quantity `json:"limits"`
		Weight   *int32                       `json:"weight"`
		Replicas *int64                       `json:"replicas"`
	} `json:"spec"`
}

// karpenterFields are the paths of a Karpenter v1 NodePool this importer
// knows; "*" below a path means its keys are free-form (labels, limits).
var karpenterFields = newFieldSet(
	"apiVersion", "kind", "metadata.*", "status.*",
	"spec", "spec.template", "spec.template.metadata", "spec.template.metadata.labels.*", "spec.template.metadata.annotations.*",
	"spec.template.spec", "spec.template.spec.taints[]", "spec.template.spec.taints[].key", "spec.template.spec.taints[].value",
	"spec.template.spec.taints[].effect", "spec.template.spec.taints[].timeAdded",
	"spec.template.spec.startupTaints[]", "spec.template.spec.startupTaints[].key", "spec.template.spec.startupTaints[].value",
	"spec.template.spec.startupTaints[].effect", "spec.template.spec.startupTaints[].timeAdded",
	"spec.template.spec.requirements[]", "spec.template.spec.requirements[].key", "spec.template.spec.requirements[].operator",
	"spec.template.spec.requirements[].values", "spec.template.spec.requirements[].minValues",
	"spec.template.spec.nodeClassRef", "spec.template.spec.nodeClassRef.group", "spec.template.spec.nodeClassRef.kind",
	"spec.template.spec.nodeClassRef.name", "spec.template.spec.expireAfter", "spec.template.spec.terminationGracePeriod",
	"spec.disruption", "spec.disruption.consolidationPolicy", "spec.disruption.consolidateAfter", "spec.disruption.budgets[]",
	"spec.disruption.budgets[].nodes", "spec.disruption.budgets[].reasons", "spec.disruption.budgets[].schedule",
	"spec.disruption.budgets[].duration", "spec.limits.*", "spec.weight", "spec.replicas",
)

// Karpenter maps Karpenter v1 NodePools, as unstructured objects (from a
// file or the cluster), to sluice NodePools. An object that is not a
// Karpenter v1 NodePool, or a field that cannot be read, is an error naming
// it; a field sluice has no equivalent for is reported, not an error.
func Karpenter(objects []map[string]any, opts KarpenterOptions) (*Result, error) {
	if len(objects) == 0 {
		return nil, fmt.Errorf("no Karpenter NodePool to import")
	}
	if len(opts.Selector) > 0 && len(objects) > 1 {
		return nil, fmt.Errorf("--selector names the nodes of one pool, but %d Karpenter NodePools were given: import them one at a time, or leave --selector out to select each pool's nodes by %s", len(objects), LabelKarpenterNodePool)
	}
	if opts.Provider.Manages() && len(opts.Selector) == 0 {
		return nil, fmt.Errorf("--provider %s makes the pool's machines, so give --selector: labels those machines carry (an Auto Scaling group's, a scale set's), which sluice also writes on each new one; %s is Karpenter's own label, and sluice does not put it on machines Karpenter did not launch", opts.Provider.Name, LabelKarpenterNodePool)
	}
	res := &Result{Report: []Entry{}}
	for i, obj := range objects {
		if err := checkKind(obj, KarpenterAPIVersion, karpenterNodePool); err != nil {
			return nil, fmt.Errorf("object %d: %w", i+1, err)
		}
		var in karpenterPool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &in); err != nil {
			return nil, fmt.Errorf("object %d: reading the Karpenter NodePool: %w", i+1, err)
		}
		if in.Metadata.Name == "" {
			return nil, fmt.Errorf("object %d: the Karpenter NodePool has no metadata.name", i+1)
		}
		rec := recorder{source: "NodePool " + in.Metadata.Name, entries: &res.Report}
		if KarpenterDisruptionOff(obj) {
			rec.differs("spec.disruption, spec.template.spec.expireAfter (turned off)", "spec.disruption",
				"this Karpenter NodePool's disruption is already off (budgets 0, expireAfter Never), so the sluice pool made from it disrupts nothing either: import the copy saved before turning it off (docs/import.md), or set the pool's budgets and expiry by hand")
		}
		for _, p := range unknownFields(obj, karpenterFields) {
			rec.notMapped(p, "not a field of Karpenter's v1 NodePool (v1.14) that this importer knows; check its spelling, or map it by hand")
		}
		pool, err := mapKarpenter(&in, obj, opts, rec)
		if err != nil {
			return nil, fmt.Errorf("NodePool %s: %w", in.Metadata.Name, err)
		}
		res.NodePools = append(res.NodePools, *pool)
	}
	return res, nil
}

func mapKarpenter(in *karpenterPool, raw map[string]any, opts KarpenterOptions, rec recorder) (*v1alpha1.NodePool, error) {
	out := newNodePool(in.Metadata.Name)
	out.Spec.Provider = opts.Provider
	out.Spec.Provider.Name = opts.Provider.NameOrNone()
	mapKarpenterMetadata(in, raw, out, rec)

	selector := map[string]string{LabelKarpenterNodePool: in.Metadata.Name}
	why := "the nodes Karpenter launched for the pool carry " + LabelKarpenterNodePool + "=" + in.Metadata.Name
	if len(opts.Selector) > 0 {
		selector, why = opts.Selector, "--selector"
	}
	out.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: selector}
	rec.mappedBecause("metadata.name", "metadata.name, spec.nodeSelector", why)

	spec := &in.Spec.Template.Spec
	tmpl := &v1alpha1.NodeTemplate{}
	mapKarpenterTemplateMetadata(in, out, tmpl, rec)
	if len(spec.Taints) > 0 {
		tmpl.Taints = stripTimeAdded(spec.Taints)
		rec.mapped("spec.template.spec.taints", "spec.template.taints")
	}
	if len(spec.StartupTaints) > 0 {
		tmpl.StartupTaints = stripTimeAdded(spec.StartupTaints)
		rec.mapped("spec.template.spec.startupTaints", "spec.template.startupTaints")
	}
	mapKarpenterRequirements(in, tmpl, rec)
	if spec.NodeClassRef != nil {
		rec.notMappedf("spec.template.spec.nodeClassRef", "%s %s is Karpenter's cloud launch settings; sluice's pool makes machines through its provider (--provider, here %s) %s",
			spec.NodeClassRef.Kind, spec.NodeClassRef.Name, out.Spec.Provider.NameOrNone(), providerNote(out.Spec.Provider))
	}
	if out.Spec.Provider.Manages() {
		if tmpl.Labels == nil {
			tmpl.Labels = map[string]string{}
		}
		for k, v := range selector {
			if _, ok := tmpl.Labels[k]; !ok {
				tmpl.Labels[k] = v
				rec.differs("spec.nodeSelector", "spec.template.labels["+k+"]", "added so that the machines the "+string(out.Spec.Provider.Name)+" provider makes belong to the pool (a managed pool's template must satisfy its selector)")
			}
		}
	}
	if !equality.Semantic.DeepEqual(tmpl, &v1alpha1.NodeTemplate{}) {
		out.Spec.Template = tmpl
	}

	d, err := mapKarpenterDisruption(in, out.Spec.Provider, rec)
	if err != nil {
		return nil, err
	}
	out.Spec.Disruption = d
	out.Spec.Limits = mapKarpenterLimits(in, rec)
	if in.Spec.Weight != nil {
		rec.notMappedf("spec.weight", "sluice does not choose a pool for pending pods, so pools have no weight; a node that several pools select follows the oldest pool")
	}
	if in.Spec.Replicas != nil {
		rec.notMappedf("spec.replicas", "a static pool of %d nodes: sluice keeps no node count of its own (the provider's group does: an Auto Scaling group's desired capacity, a scale set's capacity)", *in.Spec.Replicas)
	}
	return out, nil
}

// mapKarpenterMetadata carries the pool's own labels over and accounts for
// the rest of its metadata and status.
func mapKarpenterMetadata(in *karpenterPool, raw map[string]any, out *v1alpha1.NodePool, rec recorder) {
	if len(in.Metadata.Labels) > 0 {
		out.Labels = in.Metadata.Labels
		rec.mapped("metadata.labels", "metadata.labels")
	}
	for _, k := range sortedKeys(in.Metadata.Annotations) {
		switch {
		case k == corev1.LastAppliedConfigAnnotation:
			rec.notMapped("metadata.annotations["+k+"]", "kubectl's record of its last apply of the Karpenter NodePool")
		case strings.HasPrefix(k, "karpenter.sh/"):
			rec.notMapped("metadata.annotations["+k+"]", "Karpenter's own bookkeeping")
		default:
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = in.Metadata.Annotations[k]
			rec.mapped("metadata.annotations["+k+"]", "metadata.annotations["+k+"]")
		}
	}
	var server []string
	meta, _ := raw["metadata"].(map[string]any)
	for _, k := range sortedKeys(meta) {
		if k != "name" && k != "labels" && k != "annotations" {
			server = append(server, k)
		}
	}
	if len(server) > 0 {
		rec.notMapped("metadata."+strings.Join(server, ", metadata."), "set by the API server (or Karpenter) for the Karpenter object")
	}
	if _, ok := raw["status"]; ok {
		rec.notMapped("status", "what Karpenter observed, not configuration; sluice writes its own pool's status")
	}
}

func mapKarpenterTemplateMetadata(in *karpenterPool, out *v1alpha1.NodePool, tmpl *v1alpha1.NodeTemplate, rec recorder) {
	md := &in.Spec.Template.Metadata
	if len(md.Labels) > 0 {
		tmpl.Labels = map[string]string{}
		for k, v := range md.Labels {
			tmpl.Labels[k] = v
		}
		rec.differs("spec.template.metadata.labels", "spec.template.labels",
			"a node missing one of these labels has drifted in sluice (Karpenter drifts on them too); "+providerNote(out.Spec.Provider))
	}
	for _, k := range sortedKeys(md.Annotations) {
		field := "spec.template.metadata.annotations[" + k + "]"
		if k == AnnotationKarpenterDoNotDisrupt && md.Annotations[k] == "true" {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[contract.AnnotationDoNotDisrupt] = "true"
			rec.mappedBecause(field, "metadata.annotations["+contract.AnnotationDoNotDisrupt+"]",
				"every node of the pool carries it, so the whole pool is protected from voluntary disruption; sluice also honours "+AnnotationKarpenterDoNotDisrupt+" on each node and pod itself")
			continue
		}
		rec.notMapped(field, "sluice's template has no annotations: sluice never writes annotations onto the nodes it makes, beyond its own")
	}
}

// mapKarpenterRequirements maps what a sluice template can say (instance
// types, one capacity type) and reports the rest.
func mapKarpenterRequirements(in *karpenterPool, tmpl *v1alpha1.NodeTemplate, rec recorder) {
	for i, r := range in.Spec.Template.Spec.Requirements {
		field := fmt.Sprintf("spec.template.spec.requirements[%d] (%s %s %v)", i, r.Key, r.Operator, r.Values)
		switch {
		case r.MinValues != nil:
			rec.notMapped(field, "minValues (keep at least this many distinct values, for flexibility) has no sluice equivalent, nor do scheduling requirements: the provider's group decides zones, architectures and families")
		case r.Key == labelInstanceType && r.Operator == "In" && len(r.Values) <= 20:
			tmpl.InstanceTypes = slices.Clone(r.Values)
			rec.differs(field, "spec.template.instanceTypes", "sluice's provider makes the first type it has capacity for, in this order; Karpenter picks the cheapest that fits the pending pods")
		case r.Key == labelKarpenterCapacityType && r.Operator == "In" && len(r.Values) == 1 && (r.Values[0] == "spot" || r.Values[0] == "on-demand"):
			tmpl.Capacity = v1alpha1.CapacityType(r.Values[0])
			rec.mapped(field, "spec.template.capacity")
		case r.Key == labelKarpenterCapacityType:
			rec.notMapped(field, "a sluice pool buys one capacity type, spot or on-demand: import it as two pools (one per capacity type) by hand, or pick one")
		default:
			rec.notMapped(field, "sluice's template holds no scheduling requirements: zones, architectures and instance families come from the provider's group (launch template, scale set); drift compares only labels, taints, instance type, capacity type and image")
		}
	}
}

func mapKarpenterDisruption(in *karpenterPool, prov v1alpha1.ProviderSpec, rec recorder) (*v1alpha1.DisruptionSpec, error) {
	d := &v1alpha1.DisruptionSpec{}
	if err := mapKarpenterExpiry(in, prov, d, rec); err != nil {
		return nil, err
	}
	dis := in.Spec.Disruption
	if dis == nil {
		d.ConsolidateAfter = karpenterDefaultConsolidateAfter
		d.ConsolidationPolicy = v1alpha1.ConsolidateWhenEmptyOrUnderutilized
		d.Budgets = []v1alpha1.Budget{{Nodes: karpenterDefaultBudget}}
		rec.mappedBecause("spec.disruption (unset)", "spec.disruption", "Karpenter's defaults: consolidationPolicy WhenEmptyOrUnderutilized, consolidateAfter 0s, budgets [{nodes: 10%}]")
		karpenterBudgetsDiffer(d.Budgets, rec)
		consolidationNote(prov, rec)
		return d, nil
	}
	if err := mapKarpenterConsolidation(in, d, rec); err != nil {
		return nil, err
	}
	consolidationNote(prov, rec)
	budgets, err := mapKarpenterBudgets(in, rec)
	if err != nil {
		return nil, err
	}
	d.Budgets = budgets
	karpenterBudgetsDiffer(d.Budgets, rec)
	return d, nil
}

// mapKarpenterExpiry maps expireAfter (Karpenter's default when unset) and
// terminationGracePeriod.
func mapKarpenterExpiry(in *karpenterPool, prov v1alpha1.ProviderSpec, d *v1alpha1.DisruptionSpec, rec recorder) error {
	spec := &in.Spec.Template.Spec
	expire, field := karpenterDefaultExpireAfter, "spec.template.spec.expireAfter (unset: Karpenter's default 720h)"
	if spec.ExpireAfter != nil {
		expire, field = *spec.ExpireAfter, "spec.template.spec.expireAfter"
	}
	if expire == v1alpha1.Never {
		d.ExpireAfter = v1alpha1.Never
		rec.mapped(field, "spec.disruption.expireAfter")
	} else {
		if _, err := time.ParseDuration(expire); err != nil {
			return fmt.Errorf("spec.template.spec.expireAfter %q: use a duration such as 720h, or Never", expire)
		}
		d.ExpireAfter = expire
		rec.differs(field, "spec.disruption.expireAfter", "Karpenter's expiry is forceful: an expired node goes whatever the budgets say, bounded only by terminationGracePeriod; sluice's waits for the budgets (reason Expired), honours do-not-disrupt, and replaces the node before draining it"+whenNone(prov, " (with provider none sluice only reports expired nodes: Events WouldExpired, status.expired)"))
	}
	if spec.TerminationGracePeriod != nil {
		v, err := time.ParseDuration(*spec.TerminationGracePeriod)
		if err != nil {
			return fmt.Errorf("spec.template.spec.terminationGracePeriod %q: use a duration such as 48h", *spec.TerminationGracePeriod)
		}
		d.TerminationGracePeriod = &metav1.Duration{Duration: v}
		rec.differs("spec.template.spec.terminationGracePeriod", "spec.disruption.terminationGracePeriod",
			"both delete the pods left on a draining node once the period has passed, PodDisruptionBudgets or not; Karpenter also deletes each pod early enough for its own terminationGracePeriodSeconds to end by then, and ignores do-not-disrupt from the start of a forceful drain; sluice deletes what is left at the end")
	}
	return nil
}

// mapKarpenterConsolidation maps the consolidation policy and delay.
func mapKarpenterConsolidation(in *karpenterPool, d *v1alpha1.DisruptionSpec, rec recorder) error {
	dis := in.Spec.Disruption
	switch p := dis.ConsolidationPolicy; p {
	case "", string(v1alpha1.ConsolidateWhenEmpty), string(v1alpha1.ConsolidateWhenEmptyOrUnderutilized):
		d.ConsolidationPolicy = v1alpha1.ConsolidationPolicy(p)
		if p == "" {
			d.ConsolidationPolicy = v1alpha1.ConsolidateWhenEmptyOrUnderutilized
		}
		rec.mapped("spec.disruption.consolidationPolicy", "spec.disruption.consolidationPolicy")
	case "Balanced":
		d.ConsolidationPolicy = v1alpha1.ConsolidateWhenEmptyOrUnderutilized
		rec.differs("spec.disruption.consolidationPolicy", "spec.disruption.consolidationPolicy",
			"sluice has no Balanced policy: it becomes WhenEmptyOrUnderutilized, where spec.disruption.consolidation.minSavings (default 10%) is what keeps a replacement from being made for a small saving")
	default:
		return fmt.Errorf("spec.disruption.consolidationPolicy %q: Karpenter v1 knows WhenEmpty, WhenEmptyOrUnderutilized and Balanced", p)
	}
	if dis.ConsolidateAfter == nil {
		d.ConsolidateAfter = karpenterDefaultConsolidateAfter
		rec.mappedBecause("spec.disruption.consolidateAfter (unset)", "spec.disruption.consolidateAfter", "0s, as Karpenter's schema defaults it")
	} else {
		if *dis.ConsolidateAfter != v1alpha1.Never {
			if _, err := time.ParseDuration(*dis.ConsolidateAfter); err != nil {
				return fmt.Errorf("spec.disruption.consolidateAfter %q: use a duration such as 30s, or Never", *dis.ConsolidateAfter)
			}
		}
		d.ConsolidateAfter = *dis.ConsolidateAfter
		rec.mapped("spec.disruption.consolidateAfter", "spec.disruption.consolidateAfter")
	}
	if in.Spec.Replicas != nil {
		rec.notMapped("spec.disruption.consolidationPolicy, consolidateAfter (with replicas)", "Karpenter ignores them for a static pool; sluice applies them as written")
	}
	return nil
}

// mapKarpenterBudgets maps the budgets, Karpenter's default when none.
func mapKarpenterBudgets(in *karpenterPool, rec recorder) ([]v1alpha1.Budget, error) {
	dis := in.Spec.Disruption
	var out []v1alpha1.Budget
	if len(dis.Budgets) == 0 {
		out = []v1alpha1.Budget{{Nodes: karpenterDefaultBudget}}
		rec.mappedBecause("spec.disruption.budgets (unset)", "spec.disruption.budgets", "Karpenter's default, one budget of 10%")
	}
	for i, b := range dis.Budgets {
		field := fmt.Sprintf("spec.disruption.budgets[%d]", i)
		budget := v1alpha1.Budget{Nodes: b.Nodes, Schedule: b.Schedule}
		if budget.Nodes == "" {
			budget.Nodes = karpenterDefaultBudget
		}
		for _, r := range b.Reasons {
			budget.Reasons = append(budget.Reasons, v1alpha1.DisruptionReason(r))
		}
		if b.Duration != nil {
			v, err := time.ParseDuration(*b.Duration)
			if err != nil {
				return nil, fmt.Errorf("%s.duration %q: use a duration such as 8h", field, *b.Duration)
			}
			budget.Duration = &metav1.Duration{Duration: v}
		}
		out = append(out, budget)
		target := "spec.disruption.budgets[" + strconv.Itoa(i) + "]"
		rec.mapped(field+".nodes", target+".nodes")
		if len(b.Reasons) > 0 {
			rec.mapped(field+".reasons", target+".reasons")
		}
		if b.Schedule != nil {
			rec.mappedBecause(field+".schedule", target+".schedule", "Karpenter reads the schedule in UTC; sluice's timeZone defaults to UTC")
		}
		if b.Duration != nil {
			rec.mapped(field+".duration", target+".duration")
		}
	}
	return out, nil
}

// karpenterBudgetsDiffer states, once per pool, how sluice's budgets count
// differently from Karpenter's.
func karpenterBudgetsDiffer(budgets []v1alpha1.Budget, rec recorder) {
	rec.differs("spec.disruption.budgets (counting)", "spec.disruption.budgets",
		"both count a node out of service for any reason against every reason's budget (the reasons are coupled); Karpenter counts nodes being deleted or NotReady, sluice also counts cordoned nodes (anyone's cordon), nodes marked for replacement and nodes drained for cloud maintenance, so the same numbers may allow fewer voluntary disruptions in sluice")
	for i, b := range budgets {
		if len(b.Reasons) == 0 {
			rec.differs(fmt.Sprintf("spec.disruption.budgets[%d].reasons (none)", i), fmt.Sprintf("spec.disruption.budgets[%d]", i),
				"a budget without reasons limits Empty, Underutilized and Drifted in Karpenter (expiry is not budgeted there); in sluice it limits every reason: Expired, Upgrade and RebootRequired too, and a person's kubectl delete node")
		}
	}
}

func consolidationNote(prov v1alpha1.ProviderSpec, rec recorder) {
	if !prov.Manages() {
		rec.differs("spec.disruption.consolidationPolicy (provider none)", "spec.disruption",
			"with provider none sluice never removes or replaces a machine: it consolidates nothing and only reports the nodes it would expire or replace; give --provider to act on them")
	}
}

func mapKarpenterLimits(in *karpenterPool, rec recorder) *v1alpha1.Limits {
	if len(in.Spec.Limits) == 0 {
		return nil
	}
	l := &v1alpha1.Limits{}
	for _, k := range sortedKeys(in.Spec.Limits) {
		q := in.Spec.Limits[k]
		field := "spec.limits." + k
		switch k {
		case string(corev1.ResourceCPU):
			l.CPU = &q
			rec.mapped(field, "spec.limits.cpu")
		case string(corev1.ResourceMemory):
			l.Memory = &q
			rec.mapped(field, "spec.limits.memory")
		case "nodes":
			v := q.Value()
			if v < 0 || v > math.MaxInt32 {
				rec.notMappedf(field, "%s nodes is out of range", q.String())
				continue
			}
			n := int32(v)
			l.Nodes = &n
			rec.mapped(field, "spec.limits.nodes")
		default:
			rec.notMapped(field, "sluice limits a pool's cpu, memory and node count only")
		}
	}
	return l
}

// providerNote says what the pool's provider does with the template.
func providerNote(p v1alpha1.ProviderSpec) string {
	if !p.Manages() {
		return "(provider none: sluice makes no machines, and only reports drifted nodes)"
	}
	return "(the " + string(p.Name) + " provider registers each new machine with the template's labels and taints)"
}

func whenNone(p v1alpha1.ProviderSpec, s string) string {
	if p.Manages() {
		return ""
	}
	return s
}

// stripTimeAdded drops what the API server writes on a taint.
func stripTimeAdded(taints []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, len(taints))
	for i, t := range taints {
		out[i] = corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
	}
	return out
}

// KarpenterDisruptionOff says whether a Karpenter v1 NodePool (as the
// cluster serves it) has its voluntary disruption turned off, as the
// migration asks before sluice takes its nodes: expireAfter Never (expiry
// is not held by budgets), and for each budgeted reason (Empty,
// Underutilized, Drifted) a budget of 0 nodes that is always active.
func KarpenterDisruptionOff(obj map[string]any) bool {
	var in karpenterPool
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &in) != nil {
		return false
	}
	if e := in.Spec.Template.Spec.ExpireAfter; e == nil || *e != v1alpha1.Never {
		return false
	}
	if in.Spec.Disruption == nil {
		return false
	}
	for _, reason := range []string{"Empty", "Underutilized", "Drifted"} {
		held := false
		for _, b := range in.Spec.Disruption.Budgets {
			if b.Schedule == nil && (b.Nodes == "0" || b.Nodes == "0%") && (len(b.Reasons) == 0 || slices.Contains(b.Reasons, reason)) {
				held = true
			}
		}
		if !held {
			return false
		}
	}
	return true
}
