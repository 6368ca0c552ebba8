package nodepool

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/doctor"
)

// The NodePool condition that says whether the pool's new machines join
// with sluice.dev/unregistered, as the pool's provider reads it from the
// cloud (its launch template, its scale set model), and its reasons.
const (
	ConditionRegistration = "Registration"
	// ReasonTainted: they do.
	ReasonTainted = "Tainted"
	// ReasonTaintMissing: they do not; the message names what lacks it.
	ReasonTaintMissing = "TaintMissing"
	// ReasonCannotTell: the cloud does not show it (an AKS node pool's set).
	ReasonCannotTell = "CannotTell"
	// ReasonTemplateDiffers: they join with the taint, but the cloud gives
	// them labels or taints other than the pool's template (an AKS agent
	// pool's own); the message names the difference.
	ReasonTemplateDiffers = "TemplateDiffers"
	// ReasonCheckFailed: the cloud could not be asked.
	ReasonCheckFailed = "CheckFailed"
)

// Codes of the pool findings `sluice doctor` adds to the drain's.
const (
	// CodeRegisteredLate: a pool's machines join without
	// sluice.dev/unregistered, so pods may land before the pool's template.
	CodeRegisteredLate = "RegisteredLate"
	// CodeTaintMissing: the provider read from the cloud that a pool's new
	// machines will join without sluice.dev/unregistered.
	CodeTaintMissing = "TaintMissing"
	// CodeTemplateDiffers: the cloud gives a pool's new machines labels or
	// taints of its own that differ from the template (an AKS agent pool's).
	CodeTemplateDiffers = "TemplateDiffers"
	// CodeKarpenterNodes: Karpenter also manages (and disrupts) some of a
	// pool's nodes.
	CodeKarpenterNodes = "KarpenterNodes"
	// CodeClusterAutoscaler: cluster-autoscaler may scale down the nodes of
	// a pool sluice consolidates.
	CodeClusterAutoscaler = "ClusterAutoscaler"
)

// Labels and taints by which another autoscaler's hand shows on a node.
const (
	labelKarpenterNodePool = "karpenter.sh/nodepool"
	labelKarpenterLegacy   = "karpenter.sh/provisioner-name"
	// cluster-autoscaler taints a node it is about to remove, and one it
	// considers removing.
	taintCAToBeDeleted     = "ToBeDeletedByClusterAutoscaler"
	taintCADeletionCand    = "DeletionCandidateOfClusterAutoscaler"
	labelClusterAutoscaler = "app.kubernetes.io/name"
)

// Coexistence finds what in the cluster works against the pools: machines
// that join (or, as the provider read, will join) without the unregistered
// taint, and nodes another autoscaler also removes (Karpenter's, or
// cluster-autoscaler's where sluice consolidates and the node does not opt
// out of it).
func Coexistence(pools []v1alpha1.NodePool, nodes []corev1.Node, pods []corev1.Pod) []doctor.Finding {
	return CoexistenceWith(pools, nodes, pods, nil)
}

// CoexistenceWith is Coexistence knowing which Karpenter NodePools have their
// disruption turned off (quiet, by name: every budget 0 and no expiry, as
// docs/import.md's migration asks): their nodes in a sluice pool are sluice's
// alone to disrupt, and are not reported.
func CoexistenceWith(pools []v1alpha1.NodePool, nodes []corev1.Node, pods []corev1.Pod, quiet map[string]bool) []doctor.Finding {
	byPool := tallyNodes(pools, nodes, clusterAutoscalerRuns(pods), quiet)
	var out []doctor.Finding
	for i := range pools {
		t := byPool[pools[i].Name]
		if t == nil {
			t = &tally{}
		}
		out = append(out, t.findings(&pools[i])...)
	}
	return out
}

// tally is what Coexistence noted of one pool's nodes.
type tally struct{ late, karpenter, caExposed, caTainted []string }

// tallyNodes notes, per pool, its nodes that registered late, that
// Karpenter launched, and that cluster-autoscaler is removing or (when it
// runs, ca) may remove.
func tallyNodes(pools []v1alpha1.NodePool, nodes []corev1.Node, ca bool, karpenterQuiet map[string]bool) map[string]*tally {
	m := NewMatcher(pools)
	byPool := map[string]*tally{}
	for i := range nodes {
		n := &nodes[i]
		pool, _ := m.For(n)
		if pool == nil {
			continue
		}
		t := byPool[pool.Name]
		if t == nil {
			t = &tally{}
			byPool[pool.Name] = t
		}
		if a, ok := provider.Registered(n); ok && a.Late {
			t.late = append(t.late, n.Name)
		}
		if kp := n.Labels[labelKarpenterNodePool]; (kp != "" && !karpenterQuiet[kp]) || n.Labels[labelKarpenterLegacy] != "" {
			t.karpenter = append(t.karpenter, n.Name)
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taintCAToBeDeleted || t.Key == taintCADeletionCand }) {
			t.caTainted = append(t.caTainted, n.Name)
		} else if ca && pool.Consolidates() && n.Annotations[provider.AnnotationScaleDownDisabled] != "true" {
			t.caExposed = append(t.caExposed, n.Name)
		}
	}
	return byPool
}

// findings are the pool's, from its Registration condition and its tally.
func (t *tally) findings(p *v1alpha1.NodePool) []doctor.Finding {
	var out []doctor.Finding
	object := "NodePool " + p.Name
	warn := func(code, message, fix string) {
		out = append(out, doctor.Finding{Severity: doctor.SeverityWarning, Code: code, Object: object, Message: message, Fix: fix})
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, ConditionRegistration); c != nil && c.Status == metav1.ConditionFalse {
		switch c.Reason {
		case ReasonTemplateDiffers:
			warn(CodeTemplateDiffers, c.Message, "make the pool's template.labels and template.taints what the cloud gives its machines, or change the cloud's (an AKS agent pool: az aks nodepool update --labels / --node-taints)")
		default:
			warn(CodeTaintMissing, "new machines will join without the "+contract.TaintUnregistered+" taint: "+c.Message, RegistrationFix(p.Spec.Provider.NameOrNone()))
		}
	}
	if len(t.late) > 0 {
		warn(CodeRegisteredLate, fmt.Sprintf("%d node(s) joined without the %s:NoExecute taint (%s): pods could land on them before they had the pool's labels and taints",
			len(t.late), contract.TaintUnregistered, names(t.late)), RegistrationFix(p.Spec.Provider.NameOrNone()))
	}
	if len(t.karpenter) > 0 {
		warn(CodeKarpenterNodes, fmt.Sprintf("Karpenter manages %d of the pool's nodes (%s): it drifts, expires and consolidates them by its own budgets, which sluice's do not limit",
			len(t.karpenter), names(t.karpenter)),
			"turn Karpenter's disruption off on its NodePool (budgets [{nodes: \"0\"}] and expireAfter: Never, docs/import.md), select only nodes Karpenter does not launch (a nodeSelector that excludes karpenter.sh/nodepool), or leave them to Karpenter")
	}
	if len(t.caTainted) > 0 {
		warn(CodeClusterAutoscaler, fmt.Sprintf("cluster-autoscaler is removing or considering %d of the pool's nodes (%s, tainted %s or %s): it drains outside sluice's budgets",
			len(t.caTainted), names(t.caTainted), taintCAToBeDeleted, taintCADeletionCand),
			"turn cluster-autoscaler's scale-down off for the pool's group (its node-group options), or annotate the nodes "+provider.AnnotationScaleDownDisabled+"=true")
	}
	if len(t.caExposed) > 0 {
		warn(CodeClusterAutoscaler, fmt.Sprintf("cluster-autoscaler runs and may scale down %d node(s) of a pool sluice consolidates (%s): the two would remove nodes by different rules",
			len(t.caExposed), names(t.caExposed)),
			"annotate them "+provider.AnnotationScaleDownDisabled+"=true (sluice does so for every node it registers), or turn consolidation off for the pool (consolidateAfter: Never)")
	}
	return out
}

// RegistrationFix says how to make a provider's machines join tainted.
func RegistrationFix(p v1alpha1.ProviderName) string {
	flag := "--register-with-taints=" + contract.TaintUnregistered + "=true:NoExecute"
	switch p {
	case v1alpha1.ProviderAWSASG:
		return "use an AL2023 (nodeadm) launch template, to which sluice adds the taint, or add " + flag + " to the kubelet's flags in the launch template's user data (docs/providers.md#registration)"
	case v1alpha1.ProviderAzureVMSS:
		return "on AKS: use the aks-agentpool provider; on a self-managed scale set: add " + flag + " to the kubelet's flags in the model's user data (docs/providers.md#registration)"
	case v1alpha1.ProviderAKS:
		return "az aks update --node-init-taints " + contract.TaintUnregistered + "=true:NoExecute (a preview feature; AKS writes it into a pool at its next node image upgrade: docs/providers.md#registration)"
	case v1alpha1.ProviderGCPMIG:
		return "add " + flag + " to the kubelet's flags in the instance template's metadata (its startup script or kube-env), as a new template the group uses (docs/providers.md#registration)"
	}
	return "add " + flag + " to the kubelet's flags of the pool's machines (docs/providers.md#registration)"
}

// clusterAutoscalerRuns says whether a cluster-autoscaler pod runs.
func clusterAutoscalerRuns(pods []corev1.Pod) bool {
	return slices.ContainsFunc(pods, func(p corev1.Pod) bool {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			return false
		}
		if p.Labels[labelClusterAutoscaler] == "cluster-autoscaler" || p.Labels["app"] == "cluster-autoscaler" {
			return true
		}
		return slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool {
			return strings.Contains(c.Image, "/cluster-autoscaler:") || strings.HasPrefix(c.Image, "cluster-autoscaler:")
		})
	})
}

// names lists up to three names and how many more.
func names(list []string) string {
	if len(list) <= 3 {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:3], ", "), len(list)-3)
}
