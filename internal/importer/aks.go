package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// LabelAKSAgentPool is the label AKS puts on every node of an agent pool,
// naming it.
const LabelAKSAgentPool = "kubernetes.azure.com/agentpool"

// AKSOptions say what the agent pool's JSON does not.
type AKSOptions struct {
	// Provider, when its Name is set, replaces the aks-agentpool provider
	// the pool's id names (such as provider none, to only report).
	Provider v1alpha1.ProviderSpec
}

// aksPool is the part of an agent pool, as `az aks nodepool show` prints it
// (properties at the top) or as ARM returns it (under properties), that
// sluice reads.
type aksPool struct {
	Name             string            `json:"name"`
	ID               string            `json:"id"`
	VMSize           string            `json:"vmSize"`
	Count            *int32            `json:"count"`
	MaxPods          *int32            `json:"maxPods"`
	EnableAutoScale  *bool             `json:"enableAutoScaling"`
	MinCount         *int32            `json:"minCount"`
	MaxCount         *int32            `json:"maxCount"`
	NodeLabels       map[string]string `json:"nodeLabels"`
	NodeTaints       []string          `json:"nodeTaints"`
	NodeInitTaints   []string          `json:"nodeInitializationTaints"`
	NodeImageVersion string            `json:"nodeImageVersion"`
	ScaleSetPriority string            `json:"scaleSetPriority"`
	UpgradeSettings  *struct {
		MaxSurge                  string `json:"maxSurge"`
		MaxUnavailable            string `json:"maxUnavailable"`
		MaxBlockedNodes           string `json:"maxBlockedNodes"`
		DrainTimeoutInMinutes     *int   `json:"drainTimeoutInMinutes"`
		NodeSoakDurationInMinutes *int   `json:"nodeSoakDurationInMinutes"`
		UndrainableNodeBehavior   string `json:"undrainableNodeBehavior"`
	} `json:"upgradeSettings"`
}

// aksRead are the agent pool's fields the mapping reads; every other field
// is reported as not mapped.
var aksRead = map[string]bool{
	"name": true, "id": true, "vmSize": true, "count": true, "maxPods": true, "enableAutoScaling": true, "minCount": true,
	"maxCount": true, "nodeLabels": true, "nodeTaints": true, "nodeInitializationTaints": true, "nodeImageVersion": true,
	"scaleSetPriority": true, "upgradeSettings": true,
}

var aksUpgradeRead = map[string]bool{
	"maxSurge": true, "maxUnavailable": true, "maxBlockedNodes": true, "drainTimeoutInMinutes": true,
	"nodeSoakDurationInMinutes": true, "undrainableNodeBehavior": true,
}

// aksAgentPoolID reads an agent pool's ARM id.
var aksAgentPoolID = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)/agentPools/([^/]+)$`)

// AKS maps an AKS agent pool's JSON to a sluice NodePool: its nodes by the
// agentpool label, the aks-agentpool provider from its id, its node shape
// as the template, and its upgradeSettings as spec.upgrade.
func AKS(raw []byte, opts AKSOptions) (*Result, error) {
	var top map[string]any
	if err := json.Unmarshal(skipCommentLines(raw), &top); err != nil {
		return nil, fmt.Errorf("reading the agent pool's JSON (one object, as az aks nodepool show -o json prints it): %w", err)
	}
	// ARM's own form nests the settings under properties; az flattens them.
	fields := top
	if props, ok := top["properties"].(map[string]any); ok {
		fields = map[string]any{}
		for k, v := range props {
			fields[k] = v
		}
		for _, k := range []string{"name", "id"} {
			if v, ok := top[k]; ok {
				fields[k] = v
			}
		}
	}
	b, _ := json.Marshal(fields)
	var in aksPool
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("reading the agent pool's JSON: %w", err)
	}
	if in.Name == "" {
		return nil, fmt.Errorf("the JSON has no name: give the agent pool as `az aks nodepool show --cluster-name C -g RG -n POOL -o json` prints it")
	}
	res := &Result{Report: []Entry{}}
	rec := recorder{source: "agent pool " + in.Name, entries: &res.Report}
	out := newNodePool(strings.ToLower(in.Name))
	out.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{LabelAKSAgentPool: in.Name}}
	rec.mappedBecause("name", "metadata.name, spec.nodeSelector", "AKS labels every node of the pool "+LabelAKSAgentPool+"="+in.Name)

	if err := mapAKSProvider(&in, opts, out, rec); err != nil {
		return nil, err
	}
	if err := mapAKSTemplate(&in, out, rec); err != nil {
		return nil, err
	}
	if err := mapAKSUpgrade(&in, fields, out, rec); err != nil {
		return nil, err
	}
	mapAKSScale(&in, out, rec)
	for _, k := range sortedKeys(top) {
		if k == "properties" {
			continue
		}
		if !aksRead[k] {
			rec.notMapped(k, aksNotMappedReason(k))
		}
	}
	if props, ok := top["properties"].(map[string]any); ok {
		for _, k := range sortedKeys(props) {
			if !aksRead[k] {
				rec.notMapped("properties."+k, aksNotMappedReason(k))
			}
		}
	}
	res.NodePools = []v1alpha1.NodePool{*out}
	return res, nil
}

func mapAKSProvider(in *aksPool, opts AKSOptions, out *v1alpha1.NodePool, rec recorder) error {
	if opts.Provider.Name != "" {
		out.Spec.Provider = opts.Provider
		rec.notMappedf("id", "--provider %s replaces the aks-agentpool provider the pool's id names", opts.Provider.Name)
		return nil
	}
	m := aksAgentPoolID.FindStringSubmatch(in.ID)
	if m == nil {
		return fmt.Errorf("id %q is not an agent pool's ARM id (/subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/managedClusters/C/agentPools/P): give the JSON az aks nodepool show prints, or --provider", in.ID)
	}
	out.Spec.Provider = v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAKS, AKS: &v1alpha1.AKSProviderSpec{
		SubscriptionID: m[1], ResourceGroup: m[2], Cluster: m[3], AgentPool: m[4],
	}}
	rec.mappedBecause("id", "spec.provider.aks", "the aks-agentpool provider, changed through the AKS API; it must be the only writer of the pool's count")
	return nil
}

func mapAKSTemplate(in *aksPool, out *v1alpha1.NodePool, rec recorder) error {
	t := &v1alpha1.NodeTemplate{}
	if len(in.NodeLabels) > 0 {
		t.Labels = in.NodeLabels
		rec.mapped("nodeLabels", "spec.template.labels")
	}
	if out.Spec.Provider.Manages() {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[LabelAKSAgentPool] = in.Name
		rec.mappedBecause("name (template)", "spec.template.labels["+LabelAKSAgentPool+"]", "AKS gives every new node of the pool this label, and a managed pool's template must satisfy its selector")
	}
	var err error
	if t.Taints, err = aksTaints("nodeTaints", in.NodeTaints); err != nil {
		return err
	}
	if len(t.Taints) > 0 {
		rec.mapped("nodeTaints", "spec.template.taints")
	}
	if t.StartupTaints, err = aksTaints("nodeInitializationTaints", in.NodeInitTaints); err != nil {
		return err
	}
	if len(t.StartupTaints) > 0 {
		rec.differs("nodeInitializationTaints", "spec.template.startupTaints", "AKS puts them on a new node for something else to remove; sluice never compares them for drift, and a replacement serves only once they are gone")
	}
	if in.VMSize != "" {
		t.InstanceTypes = []string{in.VMSize}
		rec.mapped("vmSize", "spec.template.instanceTypes")
	}
	switch in.ScaleSetPriority {
	case "", "Regular":
		if in.ScaleSetPriority != "" {
			t.Capacity = v1alpha1.CapacityOnDemand
			rec.mapped("scaleSetPriority", "spec.template.capacity")
		}
	case "Spot":
		t.Capacity = v1alpha1.CapacitySpot
		rec.mapped("scaleSetPriority", "spec.template.capacity")
	default:
		return fmt.Errorf("scaleSetPriority %q: AKS knows Regular and Spot", in.ScaleSetPriority)
	}
	if in.NodeImageVersion != "" {
		t.Image = in.NodeImageVersion
		rec.differs("nodeImageVersion", "spec.template.image", "a node on another image has drifted; with spec.upgrade set, changing the image rolls the pool as an upgrade (surge, drain timeout, soak)")
	}
	if in.MaxPods != nil {
		t.Kubelet = &v1alpha1.KubeletSpec{MaxPods: in.MaxPods}
		rec.mapped("maxPods", "spec.template.kubelet.maxPods")
	}
	out.Spec.Template = t
	return nil
}

// aksTaints reads AKS's "key=value:Effect" taints.
func aksTaints(field string, in []string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, s := range in {
		kv, effect, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("%s %q: AKS writes a taint as key=value:Effect", field, s)
		}
		k, v, _ := strings.Cut(kv, "=")
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			out = append(out, corev1.Taint{Key: k, Value: v, Effect: e})
		default:
			return nil, fmt.Errorf("%s %q: the effect must be NoSchedule, PreferNoSchedule or NoExecute", field, s)
		}
	}
	return out, nil
}

func mapAKSUpgrade(in *aksPool, fields map[string]any, out *v1alpha1.NodePool, rec recorder) error {
	u := in.UpgradeSettings
	if u == nil {
		return nil
	}
	up := &v1alpha1.UpgradeSpec{}
	if err := mapAKSCounts(in, up, rec); err != nil {
		return err
	}
	if m := u.DrainTimeoutInMinutes; m != nil {
		up.DrainTimeout = &metav1.Duration{Duration: time.Duration(*m) * time.Minute}
		rec.mapped("upgradeSettings.drainTimeoutInMinutes", "spec.upgrade.drainTimeout")
	}
	if m := u.NodeSoakDurationInMinutes; m != nil {
		up.NodeSoakDuration = &metav1.Duration{Duration: time.Duration(*m) * time.Minute}
		rec.mapped("upgradeSettings.nodeSoakDurationInMinutes", "spec.upgrade.nodeSoakDuration")
	}
	switch b := v1alpha1.UndrainableNodeBehavior(u.UndrainableNodeBehavior); b {
	case "":
	case v1alpha1.UndrainableSchedule, v1alpha1.UndrainableCordon:
		up.UndrainableNodeBehavior = b
		rec.differs("upgradeSettings.undrainableNodeBehavior", "spec.upgrade.undrainableNodeBehavior", "the same behaviour; the node is labelled "+contract.LabelUpgradeStatus+" (Blocked or Quarantined) instead of AKS's kubernetes.azure.com/upgrade-status")
	default:
		return fmt.Errorf("upgradeSettings.undrainableNodeBehavior %q: AKS knows Schedule and Cordon", u.UndrainableNodeBehavior)
	}
	if us, ok := fields["upgradeSettings"].(map[string]any); ok {
		for _, k := range sortedKeys(us) {
			if !aksUpgradeRead[k] {
				rec.notMapped("upgradeSettings."+k, "not an upgrade setting sluice has")
			}
		}
	}
	out.Spec.Upgrade = up
	if !out.Spec.Provider.Manages() {
		rec.differs("upgradeSettings", "spec.upgrade", "with provider none sluice rolls no upgrade: AKS's own upgrade (az aks nodepool upgrade) keeps doing it with the pool's settings")
	}
	return nil
}

// mapAKSCounts maps maxSurge, maxUnavailable and maxBlockedNodes.
func mapAKSCounts(in *aksPool, up *v1alpha1.UpgradeSpec, rec recorder) error {
	u := in.UpgradeSettings
	if u.MaxSurge != "" {
		v, err := aksIntOrPercent("upgradeSettings.maxSurge", u.MaxSurge)
		if err != nil {
			return err
		}
		up.MaxSurge = v
		rec.mapped("upgradeSettings.maxSurge", "spec.upgrade.maxSurge")
	}
	if u.MaxUnavailable != "" {
		v, err := aksIntOrPercent("upgradeSettings.maxUnavailable", u.MaxUnavailable)
		if err != nil {
			return err
		}
		up.MaxUnavailable = v
		if v.Type == intstr.String {
			why := "AKS rounds a percentage up, sluice rounds it down (10% of 15 nodes: AKS 2, sluice 1)"
			if up.MaxSurge != nil && up.MaxSurge.Type == intstr.Int && up.MaxSurge.IntVal == 0 {
				why += "; with maxSurge 0, a pool too small for the percentage to reach one node cannot be upgraded at all in sluice (the pool is Ready=False, InvalidUpgrade): give maxUnavailable as a number of nodes"
			}
			rec.differs("upgradeSettings.maxUnavailable", "spec.upgrade.maxUnavailable", why)
		} else {
			rec.mapped("upgradeSettings.maxUnavailable", "spec.upgrade.maxUnavailable")
		}
	}
	if u.MaxBlockedNodes != "" {
		n, err := strconv.ParseInt(u.MaxBlockedNodes, 10, 32)
		if err != nil || n < 0 {
			rec.notMappedf("upgradeSettings.maxBlockedNodes", "%q: sluice's maxBlockedNodes is a number of nodes, not a percentage; set it by hand", u.MaxBlockedNodes)
		} else {
			n32 := int32(n)
			up.MaxBlockedNodes = &n32
			rec.mapped("upgradeSettings.maxBlockedNodes", "spec.upgrade.maxBlockedNodes")
		}
	}
	return nil
}

// aksIntOrPercent reads "5" or "33%".
func aksIntOrPercent(field, s string) (*intstr.IntOrString, error) {
	if n, err := strconv.ParseInt(s, 10, 32); err == nil && n >= 0 {
		v := intstr.FromInt32(int32(n))
		return &v, nil
	}
	if p, err := strconv.Atoi(strings.TrimSuffix(s, "%")); err == nil && strings.HasSuffix(s, "%") && p >= 0 && p <= 100 {
		v := intstr.FromString(s)
		return &v, nil
	}
	return nil, fmt.Errorf("%s %q: a number of nodes (5) or a percentage (33%%)", field, s)
}

func mapAKSScale(in *aksPool, out *v1alpha1.NodePool, rec recorder) {
	if in.Count != nil {
		rec.notMappedf("count", "%d nodes now: sluice keeps no count of its own; the pool keeps the nodes it has and replaces them one for one", *in.Count)
	}
	if in.EnableAutoScale != nil && *in.EnableAutoScale {
		rec.notMapped("enableAutoScaling, minCount", "the cluster autoscaler writes the pool's count, and sluice's aks-agentpool provider must be its only writer: turn the autoscaler off on this pool (az aks nodepool update --disable-cluster-autoscaler) or import with --provider none")
	} else if in.EnableAutoScale != nil {
		rec.mappedBecause("enableAutoScaling (false)", "(nothing to set)", "no autoscaler writes the pool's count, as the aks-agentpool provider needs")
	}
	if (in.EnableAutoScale == nil || !*in.EnableAutoScale) && in.MinCount != nil {
		rec.notMapped("minCount", "used only with the cluster autoscaler")
	}
	if in.MaxCount != nil {
		n := *in.MaxCount
		out.Spec.Limits = &v1alpha1.Limits{Nodes: &n}
		rec.differs("maxCount", "spec.limits.nodes", "the most nodes the pool may have; sluice's replace-first needs room for one more node than the pool has")
	}
}

// aksNotMappedReason says why an agent pool field is left to AKS.
func aksNotMappedReason(k string) string {
	switch k {
	case "orchestratorVersion", "currentOrchestratorVersion":
		return "Kubernetes version upgrades stay with AKS (az aks nodepool upgrade --kubernetes-version); sluice rolls node images"
	case "provisioningState", "powerState", "etag", "type":
		return "AKS's state of the pool, not a setting"
	case "resourceGroup":
		return "the cluster's resource group, which spec.provider.aks takes from id"
	case "upgradeStrategy", "upgradeSettingsBlueGreen":
		return "sluice rolls a pool by surge (spec.upgrade), node by node"
	}
	return "a setting of the agent pool's machines that AKS applies; sluice's aks-agentpool provider leaves it to AKS"
}

// skipCommentLines drops the # lines before the JSON (a saved file's
// note of where it came from).
func skipCommentLines(raw []byte) []byte {
	for {
		trimmed := bytes.TrimLeft(raw, " \t\r\n")
		if !bytes.HasPrefix(trimmed, []byte("#")) {
			return trimmed
		}
		i := bytes.IndexByte(trimmed, '\n')
		if i < 0 {
			return nil
		}
		raw = trimmed[i+1:]
	}
}
