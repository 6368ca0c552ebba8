package aksagentpool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var (
	_ provider.RegistrationChecker = (*Provider)(nil)
	_ provider.TemplateChecker     = (*Provider)(nil)
)

// previewAPIVersion is the AKS API version CheckRegistration reads an agent
// pool's nodeInitializationTaints at: the field is in AKS's preview API
// versions only, not in the GA one (2025-02-01) armcontainerservice/v6
// speaks, and AKS answers a field only at the API versions that have it.
const previewAPIVersion = "2025-10-02-preview"

// CheckRegistration reads the agent pool's nodeInitializationTaints, the
// taints AKS gives a new node once and never puts back, and says why the
// pool's new machines will join without the unregistered taint when the
// field does not hold it. It cannot see the scale set model AKS writes the
// field into: a pool whose field changed since its last node image upgrade
// still makes nodes with the old taints.
func (p *Provider) CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	r, err := specRef(pool)
	if err != nil {
		return "", err
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return "", err
	}
	init, err := p.initializationTaints(ctx, cl, r)
	if err != nil {
		return "", err
	}
	want := provider.Unregistered.ToString()
	for _, t := range init {
		if got, ok := parseTaint(t); ok && got.MatchTaint(&provider.Unregistered) && got.Value == provider.Unregistered.Value {
			return "", nil
		}
	}
	return fmt.Sprintf("agent pool %s's nodeInitializationTaints (%s) do not hold %s, so its new nodes join without it: "+
		"add it with az aks update --resource-group %s --name %s --node-init-taints %s (aks-preview; it sets every pool's) or the managed cluster's ARM template, "+
		"then az aks nodepool upgrade --node-image-only --resource-group %s --cluster-name %s --name %s for AKS to write it into the pool's scale set",
		r, strings.Join(init, ", "), want, r.resourceGroup, r.cluster, want, r.resourceGroup, r.cluster, r.agentPool), nil
}

// specRef is the pool's agent pool, or an error wrapping
// provider.ErrCannotTell when the spec does not name one (Create refuses
// such a pool, saying why): an empty answer would claim it registers well.
func specRef(pool *v1alpha1.NodePool) (ref, error) {
	s := pool.Spec.Provider.AKS
	if s == nil || s.SubscriptionID == "" || s.ResourceGroup == "" || s.Cluster == "" || s.AgentPool == "" {
		return ref{}, fmt.Errorf("NodePool %s names no AKS agent pool (provider.aks needs subscriptionID, resourceGroup, cluster and agentPool): %w",
			pool.Name, provider.ErrCannotTell)
	}
	return refOfSpec(s), nil
}

// initializationTaints reads the agent pool at previewAPIVersion through
// the SDK's pipeline (credential, retries, throttle) and returns its
// nodeInitializationTaints as AKS spells them.
func (p *Provider) initializationTaints(ctx context.Context, cl *clients, r ref) ([]string, error) {
	path := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.ContainerService/managedClusters/%s/agentPools/%s",
		url.PathEscape(r.subscription), url.PathEscape(r.resourceGroup), url.PathEscape(r.cluster), url.PathEscape(r.agentPool))
	req, err := runtime.NewRequest(ctx, http.MethodGet, runtime.JoinPaths(cl.raw.Endpoint(), path))
	if err != nil {
		return nil, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", previewAPIVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header.Set("Accept", "application/json")
	resp, err := cl.raw.Pipeline().Do(req)
	if err == nil && !runtime.HasStatusCode(resp, http.StatusOK) {
		err = runtime.NewResponseError(resp)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return nil, fmt.Errorf("agent pool %s at API version %s: %s: %w", r, previewAPIVersion, message(re), provider.ErrCannotTell)
	}
	if err != nil {
		return nil, refusal("reading the nodeInitializationTaints of agent pool "+r.String(), err)
	}
	var pool struct {
		Properties struct {
			NodeInitializationTaints []string `json:"nodeInitializationTaints"`
		} `json:"properties"`
	}
	if err := runtime.UnmarshalAsJSON(resp, &pool); err != nil {
		return nil, fmt.Errorf("reading agent pool %s: %w", r, err)
	}
	return pool.Properties.NodeInitializationTaints, nil
}

// CheckTemplate compares the agent pool's nodeLabels and nodeTaints, which
// AKS gives its nodes and keeps on them, with the pool's template. Labels
// the template asks for must be in nodeLabels with the same value, except
// the ones the nodes get elsewhere: AKS's own (kubernetes.azure.com/...,
// which nodeLabels may not hold), the kubelet's and the cloud provider's
// (kubernetes.io and k8s.io domains); nodeLabels may hold more. Taints must
// be the same set both ways, since a taint repels pods whichever side has
// it.
func (p *Provider) CheckTemplate(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	r, err := specRef(pool)
	if err != nil {
		return "", err
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return "", err
	}
	got, err := cl.pools.Get(ctx, r.resourceGroup, r.cluster, r.agentPool, nil)
	if err != nil {
		return "", refusal("reading agent pool "+r.String(), err)
	}
	var want v1alpha1.NodeTemplate
	if pool.Spec.Template != nil {
		want = *pool.Spec.Template
	}
	labels, taints := map[string]string{}, []string{}
	if props := got.Properties; props != nil {
		for k, v := range props.NodeLabels {
			labels[k] = str(v)
		}
		for _, t := range props.NodeTaints {
			taints = append(taints, str(t))
		}
	}
	diffs := labelDiffs(want.Labels, labels)
	diffs = append(diffs, taintDiffs(want.Taints, taints)...)
	if len(diffs) == 0 {
		return "", nil
	}
	return fmt.Sprintf("agent pool %s differs from the template: %s; AKS keeps its own on the nodes, so change the template or the agent pool (az aks nodepool update --labels / --node-taints)",
		r, strings.Join(diffs, ", ")), nil
}

// notAKSs says whether a label reaches a node elsewhere than from the agent
// pool's nodeLabels.
func notAKSs(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, domain := range []string{"kubernetes.azure.com", "kubernetes.io", "k8s.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return key == provider.LabelNodePool || key == provider.LabelCapacityType
}

func labelDiffs(want, have map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if notAKSs(k) {
			continue
		}
		v, ok := have[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("label %s=%s not in nodeLabels", k, want[k]))
		case v != want[k]:
			out = append(out, fmt.Sprintf("label %s is %s in nodeLabels, %s in the template", k, v, want[k]))
		}
	}
	return out
}

func taintDiffs(want []corev1.Taint, have []string) []string {
	var out []string
	var parsed []corev1.Taint
	for _, s := range have {
		t, ok := parseTaint(s)
		if !ok {
			out = append(out, fmt.Sprintf("nodeTaints holds %q, not a taint", s))
			continue
		}
		parsed = append(parsed, t)
	}
	same := func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }
	for _, t := range want {
		if !slices.ContainsFunc(parsed, func(h corev1.Taint) bool { return same(h, t) }) {
			out = append(out, fmt.Sprintf("taint %s not in nodeTaints", t.ToString()))
		}
	}
	for _, h := range parsed {
		if !slices.ContainsFunc(want, func(t corev1.Taint) bool { return same(h, t) }) {
			out = append(out, fmt.Sprintf("nodeTaints' %s not in the template", h.ToString()))
		}
	}
	return out
}

// parseTaint reads a taint as AKS spells it, key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, bool) {
	kv, effect, found := strings.Cut(strings.TrimSpace(s), ":")
	k, v, _ := strings.Cut(kv, "=")
	e := corev1.TaintEffect(effect)
	if !found || k == "" || e != corev1.TaintEffectNoSchedule && e != corev1.TaintEffectPreferNoSchedule && e != corev1.TaintEffectNoExecute {
		return corev1.Taint{}, false
	}
	return corev1.Taint{Key: k, Value: v, Effect: e}, true
}
