package gcpmig

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// kubeletKeys are the template metadata items a node's kubelet flags are
// read from: a startup script, cloud-init user data, or kube-up's kube-env.
var kubeletKeys = []string{"startup-script", "user-data", "kube-env"}

// CheckRegistration reads each of the pool's groups' instance template and
// names the groups whose kubelet would join without the unregistered
// taint. The provider never writes the kubelet's flags: the taint is the
// user's to put in the template's startup script (or user data) as
// --register-with-taints. A template whose metadata starts no kubelet (an
// image that bakes the flags in, a startup-script-url) cannot be told: the
// answer wraps provider.ErrCannotTell, as it does for a pool that names no
// groups (Create refuses it, saying why): nothing was read, so the pool is
// not said to register tainted.
func (p *Provider) CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	spec, err := p.remember(pool)
	if err != nil {
		return "", fmt.Errorf("%w: %w", err, provider.ErrCannotTell)
	}
	var missing, unseen []string
	for _, g := range groupsOf(spec) {
		igm, err := p.getGroup(ctx, g)
		if err != nil {
			return "", err
		}
		t, err := p.template(ctx, g.project, igm.GetInstanceTemplate())
		if err != nil {
			return "", err
		}
		if why := gkeOwned(igm, t); why != "" {
			return "", gkeRefusal(g, why)
		}
		switch registers(t.metadata) {
		case unknown:
			unseen = append(unseen, g.String()+" (template "+t.name+")")
		case without:
			missing = append(missing, g.String()+" (template "+t.name+")")
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("the startup script of group %s does not start the kubelet with --register-with-taints=%s=true:NoExecute: add it to the instance template's kubelet flags",
			strings.Join(missing, ", "), contract.TaintUnregistered), nil
	}
	if len(unseen) > 0 {
		return "", fmt.Errorf("the instance template of group %s starts no kubelet in its metadata (%s), so gcp-mig cannot see its flags: "+
			"make sure the kubelet runs with --register-with-taints=%s=true:NoExecute: %w",
			strings.Join(unseen, ", "), strings.Join(kubeletKeys, ", "), contract.TaintUnregistered, provider.ErrCannotTell)
	}
	return "", nil
}

type registration int

const (
	unknown registration = iota
	without
	with
)

// registers says whether the kubelet flags in a template's metadata
// register the unregistered taint: with, without (a kubelet is started
// there without it), or unknown (no kubelet is started there).
func registers(metadata map[string]string) registration {
	seen := false
	for _, k := range kubeletKeys {
		v := metadata[k]
		if strings.Contains(v, "kubelet") || strings.Contains(v, "kubeadm") || strings.Contains(v, "--register-with-taints") {
			seen = true
		}
		if hasUnregisteredTaint(v) {
			return with
		}
	}
	if seen {
		return without
	}
	return unknown
}

// taintsFlag is --register-with-taints and its value, in a script or YAML.
var taintsFlag = regexp.MustCompile(`--register-with-taints[= ]["']?([^\s"']+)`)

// hasUnregisteredTaint says whether a script's last --register-with-taints
// (the kubelet keeps the last it is given) holds the unregistered taint
// with the NoExecute effect.
func hasUnregisteredTaint(script string) bool {
	all := taintsFlag.FindAllStringSubmatch(script, -1)
	if len(all) == 0 {
		return false
	}
	for _, t := range strings.Split(all[len(all)-1][1], ",") {
		keyValue, effect, _ := strings.Cut(strings.TrimSpace(t), ":")
		key, _, _ := strings.Cut(keyValue, "=")
		if key == contract.TaintUnregistered && effect == "NoExecute" {
			return true
		}
	}
	return false
}

// gkeGroupName is how GKE names a node pool's group:
// gke-<cluster>-<pool>-<hash>-grp.
var gkeGroupName = regexp.MustCompile(`^gke-.+-[0-9a-f]{8}-grp$`)

// gkeOwned says why the group is a GKE node pool's, "" when it is not: GKE
// labels its nodes' templates goog-gke-node, writes its cluster's identity
// into their metadata (cluster-uid and cluster-location, keys GKE's
// NodeConfig reserves), and names the group after its cluster and pool.
func gkeOwned(igm *computepb.InstanceGroupManager, t *template) string {
	switch _, labelled := t.labels["goog-gke-node"]; {
	case labelled:
		return "its instance template " + t.name + " carries GKE's label goog-gke-node"
	case t.metadata["cluster-uid"] != "" && t.metadata["cluster-location"] != "":
		return "its instance template " + t.name + " holds a GKE cluster's cluster-uid and cluster-location"
	case gkeGroupName.MatchString(igm.GetName()):
		return "it is named as GKE names a node pool's group"
	}
	return ""
}

func gkeRefusal(g ref, why string) error {
	return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
		"instance group %s belongs to a GKE node pool (%s): GKE reconciles its size, template and instances, so gcp-mig does not make or remove its machines. "+
			"Resize and upgrade it with GKE's node pool operations (gcloud container node-pools), and let sluice drain and maintain its nodes with provider none", g, why)}
}
