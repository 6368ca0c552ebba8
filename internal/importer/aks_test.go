package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func aksFile(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "aks", "user-pool.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestAKS(t *testing.T) {
	res, err := AKS(aksFile(t), AKSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := res.NodePools[0]
	if p.Name != "user" || p.Spec.NodeSelector.MatchLabels[LabelAKSAgentPool] != "user" {
		t.Errorf("name %s, selector %v", p.Name, p.Spec.NodeSelector)
	}
	aks := p.Spec.Provider.AKS
	if p.Spec.Provider.Name != v1alpha1.ProviderAKS || aks == nil || aks.SubscriptionID != "6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d" ||
		aks.ResourceGroup != "rg-prod" || aks.Cluster != "aks-prod" || aks.AgentPool != "user" {
		t.Errorf("provider %+v %+v", p.Spec.Provider, aks)
	}
	u := p.Spec.Upgrade
	if u == nil || *u.MaxSurge != intstr.FromString("33%") || *u.MaxUnavailable != intstr.FromInt32(0) ||
		u.DrainTimeout.Duration != 45*time.Minute || u.NodeSoakDuration.Duration != 5*time.Minute || u.UndrainableNodeBehavior != v1alpha1.UndrainableCordon {
		t.Errorf("upgrade %+v", u)
	}
	tm := p.Spec.Template
	if tm.Image != "AKSUbuntu-2204gen2containerd-202611.01.0" || tm.InstanceTypes[0] != "Standard_D4s_v5" || *tm.Kubelet.MaxPods != 110 ||
		len(tm.Taints) != 1 || tm.Taints[0].Value != "web" || tm.Labels["workload"] != "web" {
		t.Errorf("template %+v", tm)
	}
	if p.Spec.Limits == nil || *p.Spec.Limits.Nodes != 20 {
		t.Errorf("limits %+v", p.Spec.Limits)
	}
	wantStatus(t, res, "upgradeSettings.maxSurge", Mapped)
	wantStatus(t, res, "upgradeSettings.undrainableNodeBehavior", Differs, "sluice.dev/upgrade-status")
	wantStatus(t, res, "count", NotMapped)
	wantStatus(t, res, "orchestratorVersion", NotMapped, "az aks nodepool upgrade")
	wantStatus(t, res, "availabilityZones", NotMapped)
	checkPools(t, "user-pool.json", res.NodePools)

	// Every field of the input is in the report (null ones say nothing).
	var in map[string]any
	if err := json.Unmarshal(skipCommentLines(aksFile(t)), &in); err != nil {
		t.Fatal(err)
	}
	for k, v := range in {
		found := v == nil
		for _, e := range res.Report {
			found = found || strings.Contains(e.Field, k)
		}
		if !found {
			t.Errorf("field %s is not in the report", k)
		}
	}
}

func TestAKSVariants(t *testing.T) {
	// ARM's own shape (settings under properties), autoscaled, spot, a
	// percentage of unavailable nodes, and provider none.
	arm := `{"id": "/subscriptions/6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/spot1",
	  "name": "spot1", "properties": {"vmSize": "Standard_D8s_v5", "scaleSetPriority": "Spot", "enableAutoScaling": true, "minCount": 1, "maxCount": 9,
	  "nodeInitializationTaints": ["init=1:NoExecute"], "upgradeSettings": {"maxSurge": "1", "maxUnavailable": "10%", "maxBlockedNodes": "20%", "newThing": 1}}}`
	res, err := AKS([]byte(arm), AKSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := res.NodePools[0]
	if p.Spec.Template.Capacity != v1alpha1.CapacitySpot || len(p.Spec.Template.StartupTaints) != 1 {
		t.Errorf("template %+v", p.Spec.Template)
	}
	wantStatus(t, res, "upgradeSettings.maxUnavailable", Differs, "rounds a percentage up")
	wantStatus(t, res, "upgradeSettings.maxBlockedNodes", NotMapped, "percentage")
	wantStatus(t, res, "upgradeSettings.newThing", NotMapped)
	wantStatus(t, res, "enableAutoScaling", NotMapped, "--disable-cluster-autoscaler")
	checkPools(t, "arm", res.NodePools)

	noSurge := strings.Replace(arm, `"maxSurge": "1"`, `"maxSurge": "0"`, 1)
	if res, err = AKS([]byte(noSurge), AKSOptions{}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "upgradeSettings.maxUnavailable", Differs, "cannot be upgraded at all")

	res, err = AKS(aksFile(t), AKSOptions{Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderNone}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NodePools[0].Spec.Provider.AKS != nil {
		t.Errorf("provider %+v, want none", res.NodePools[0].Spec.Provider)
	}
	wantStatus(t, res, "upgradeSettings", Differs, "provider none")
	checkPools(t, "provider none", res.NodePools)
}

func TestAKSBadInput(t *testing.T) {
	id := `"id": "/subscriptions/6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/p"`
	cases := []struct{ in, want string }{
		{`not json`, "reading the agent pool's JSON"},
		{`[{"name": "a"}]`, "one object"},
		{`{"vmSize": "x"}`, "no name"},
		{`{"name": "p", "id": "nope"}`, `id "nope"`},
		{`{"name": "p", ` + id + `, "nodeTaints": ["nocolon"]}`, "key=value:Effect"},
		{`{"name": "p", ` + id + `, "nodeTaints": ["a=b:Sometimes"]}`, "NoSchedule"},
		{`{"name": "p", ` + id + `, "scaleSetPriority": "Cheap"}`, `scaleSetPriority "Cheap"`},
		{`{"name": "p", ` + id + `, "upgradeSettings": {"maxSurge": "lots"}}`, `maxSurge "lots"`},
		{`{"name": "p", ` + id + `, "upgradeSettings": {"undrainableNodeBehavior": "Panic"}}`, `undrainableNodeBehavior "Panic"`},
	}
	for _, c := range cases {
		if _, err := AKS([]byte(c.in), AKSOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AKS(%s): %v, want an error holding %q", c.in, err, c.want)
		}
	}
}
