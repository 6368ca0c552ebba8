package importer

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func TestKarpenter(t *testing.T) {
	asg := v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAWSASG, AWS: &v1alpha1.AWSProviderSpec{AutoScalingGroups: []v1alpha1.AutoScalingGroup{{Name: "eks-batch"}}}}
	cases := []struct {
		file  string
		opts  KarpenterOptions
		check func(t *testing.T, p *v1alpha1.NodePool, res *Result)
	}{{
		file: "karpenter/general-purpose.yaml",
		check: func(t *testing.T, p *v1alpha1.NodePool, res *Result) {
			d := p.Spec.Disruption
			if d.ExpireAfter != "720h" || d.ConsolidateAfter != "1m" || d.ConsolidationPolicy != v1alpha1.ConsolidateWhenEmptyOrUnderutilized {
				t.Errorf("disruption %+v", d)
			}
			if len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" {
				t.Errorf("budgets %v, want Karpenter's default [{nodes: 10%%}]", d.Budgets)
			}
			if p.Spec.NodeSelector.MatchLabels[LabelKarpenterNodePool] != "general-purpose" {
				t.Errorf("selector %v", p.Spec.NodeSelector)
			}
			if p.Spec.Limits == nil || p.Spec.Limits.CPU.String() != "1k" {
				t.Errorf("limits %+v", p.Spec.Limits)
			}
			if p.Spec.Template.Capacity != v1alpha1.CapacityOnDemand {
				t.Errorf("capacity %q", p.Spec.Template.Capacity)
			}
			wantStatus(t, res, "spec.template.spec.expireAfter", Differs, "forceful", "budgets")
			wantStatus(t, res, "spec.template.spec.requirements[4] (karpenter.k8s.aws/instance-generation Gt", NotMapped, "scheduling requirements")
			wantStatus(t, res, "spec.template.spec.nodeClassRef", NotMapped, "EC2NodeClass default", "--provider")
			wantStatus(t, res, "spec.disruption.budgets (unset)", Mapped, "10%")
			wantStatus(t, res, "spec.disruption.budgets[0].reasons (none)", Differs, "Expired", "kubectl delete node")
			wantStatus(t, res, "spec.disruption.consolidationPolicy (provider none)", Differs, "consolidates nothing")
		},
	}, {
		file: "karpenter/budgets.yaml",
		check: func(t *testing.T, p *v1alpha1.NodePool, res *Result) {
			b := p.Spec.Disruption.Budgets
			if len(b) != 3 || b[0].Nodes != "20%" || len(b[0].Reasons) != 2 || b[0].Reasons[1] != v1alpha1.ReasonDrifted {
				t.Fatalf("budgets %v", b)
			}
			if b[2].Schedule == nil || *b[2].Schedule != "0 9 * * mon-fri" || b[2].Duration.Duration != 8*time.Hour || b[2].TimeZone != nil {
				t.Errorf("scheduled budget %s", b[2])
			}
			if got := p.Spec.Disruption.TerminationGracePeriod; got == nil || got.Duration != 48*time.Hour {
				t.Errorf("terminationGracePeriod %v", got)
			}
			if p.Annotations[contract.AnnotationDoNotDisrupt] != "true" {
				t.Errorf("annotations %v: karpenter.sh/do-not-disrupt on every node is the whole pool protected", p.Annotations)
			}
			tm := p.Spec.Template
			if tm.Capacity != v1alpha1.CapacitySpot || strings.Join(tm.InstanceTypes, ",") != "m5.xlarge,m5a.xlarge,m6i.xlarge" ||
				len(tm.Taints) != 1 || len(tm.StartupTaints) != 1 || tm.Labels["workload"] != "batch" {
				t.Errorf("template %+v", tm)
			}
			if p.Labels["team"] != "batch" {
				t.Errorf("labels %v", p.Labels)
			}
			wantStatus(t, res, "spec.weight", NotMapped, "weight")
			wantStatus(t, res, "spec.limits.nvidia.com/gpu", NotMapped, "cpu, memory and node count")
			wantStatus(t, res, "spec.template.spec.requirements[2]", NotMapped, "minValues")
			wantStatus(t, res, "spec.template.metadata.annotations[example.com/owner]", NotMapped, "no annotations")
			wantStatus(t, res, "spec.template.spec.terminationGracePeriod", Differs, "terminationGracePeriodSeconds")
			wantStatus(t, res, "spec.disruption.budgets (counting)", Differs, "any reason", "cordoned")
			wantStatus(t, res, "spec.disruption.budgets[2].schedule", Mapped, "UTC")
		},
	}, {
		file: "karpenter/minimal.yaml",
		check: func(t *testing.T, p *v1alpha1.NodePool, res *Result) {
			d := p.Spec.Disruption
			if d.ExpireAfter != "720h" || d.ConsolidateAfter != "0s" || d.ConsolidationPolicy != v1alpha1.ConsolidateWhenEmptyOrUnderutilized || d.Budgets[0].Nodes != "10%" {
				t.Errorf("disruption %+v: want Karpenter's defaults, not sluice's", d)
			}
			wantStatus(t, res, "spec.template.spec.expireAfter (unset: Karpenter's default 720h)", Differs)
			wantStatus(t, res, "spec.disruption (unset)", Mapped, "Karpenter's defaults")
		},
	}, {
		file: "karpenter/live-list.yaml",
		check: func(t *testing.T, p *v1alpha1.NodePool, res *Result) {
			if p.Spec.Disruption.ExpireAfter != v1alpha1.Never || p.Spec.Disruption.ConsolidationPolicy != v1alpha1.ConsolidateWhenEmptyOrUnderutilized {
				t.Errorf("disruption %+v", p.Spec.Disruption)
			}
			if p.Annotations != nil {
				t.Errorf("annotations %v: Karpenter's hash annotations are its own", p.Annotations)
			}
			wantStatus(t, res, "spec.disruption.consolidationPolicy", Differs, "Balanced", "minSavings")
			wantStatus(t, res, "spec.template.spec.requirements[0] (karpenter.sh/capacity-type In [spot on-demand])", NotMapped, "one capacity type")
			wantStatus(t, res, "metadata.annotations[karpenter.sh/nodepool-hash]", NotMapped, "Karpenter's own")
			wantStatus(t, res, "metadata.creationTimestamp", NotMapped, "API server")
			wantStatus(t, res, "status", NotMapped)
		},
	}, {
		file: "karpenter/budgets.yaml",
		opts: KarpenterOptions{Provider: asg, Selector: map[string]string{"eks.amazonaws.com/nodegroup": "batch"}},
		check: func(t *testing.T, p *v1alpha1.NodePool, res *Result) {
			if p.Spec.Provider.Name != v1alpha1.ProviderAWSASG || p.Spec.NodeSelector.MatchLabels["eks.amazonaws.com/nodegroup"] != "batch" {
				t.Errorf("provider %+v, selector %v", p.Spec.Provider, p.Spec.NodeSelector)
			}
			if p.Spec.Template.Labels["eks.amazonaws.com/nodegroup"] != "batch" {
				t.Errorf("template labels %v: a managed pool's template must carry its selector's labels", p.Spec.Template.Labels)
			}
			wantStatus(t, res, "spec.nodeSelector", Differs, "belong to the pool")
			for _, e := range res.Report {
				if strings.Contains(e.Field, "(provider none)") {
					t.Errorf("a pool with a provider reported as provider none: %+v", e)
				}
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			res, err := Karpenter(objects(t, c.file), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.NodePools) != 1 {
				t.Fatalf("%d pools", len(res.NodePools))
			}
			c.check(t, &res.NodePools[0], res)
			checkPools(t, c.file, res.NodePools)
			if t.Failed() {
				t.Log(reportText(res))
			}
		})
	}
}

// TestKarpenterManyPools: one sluice pool per Karpenter pool, each selecting
// its own nodes.
func TestKarpenterManyPools(t *testing.T) {
	var in []map[string]any
	for _, f := range karpenterFiles(t) {
		in = append(in, objects(t, f)...)
	}
	res, err := Karpenter(in, KarpenterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(res.NodePools), ","); got != "balanced,general-purpose,minimal,spot-batch" {
		t.Errorf("pools %s", got)
	}
	checkPools(t, "all", res.NodePools)
	if _, err := Karpenter(in, KarpenterOptions{Selector: map[string]string{"a": "b"}}); err == nil || !strings.Contains(err.Error(), "one pool") {
		t.Errorf("--selector with %d pools: %v, want a refusal", len(in), err)
	}
	if _, err := Karpenter(in[:1], KarpenterOptions{Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok}}); err == nil || !strings.Contains(err.Error(), "give --selector") {
		t.Errorf("a provider without --selector: %v, want a refusal (the template would carry Karpenter's label)", err)
	}
}

// TestKarpenterUnknownFields: a field this importer does not know is
// reported by its path, not dropped in silence.
func TestKarpenterUnknownFields(t *testing.T) {
	obj := objects(t, "karpenter/minimal.yaml")[0]
	spec := obj["spec"].(map[string]any)
	spec["surprise"] = true
	spec["template"].(map[string]any)["spec"].(map[string]any)["kubelet"] = map[string]any{"maxPods": 20}
	res, err := Karpenter([]map[string]any{obj}, KarpenterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "spec.surprise", NotMapped, "not a field")
	wantStatus(t, res, "spec.template.spec.kubelet", NotMapped, "not a field")
}

func TestKarpenterBadInput(t *testing.T) {
	minimal := func(edit func(spec map[string]any)) []map[string]any {
		obj := objects(t, "karpenter/minimal.yaml")[0]
		if edit != nil {
			edit(obj["spec"].(map[string]any))
		}
		return []map[string]any{obj}
	}
	cases := []struct {
		name string
		in   []map[string]any
		want string
	}{
		{"nothing", nil, "no Karpenter NodePool"},
		{"v1beta1", []map[string]any{{"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": map[string]any{"name": "x"}}}, "upgrade it to karpenter.sh/v1"},
		{"another kind", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap"}}, "v1 ConfigMap is not a karpenter.sh/v1 NodePool"},
		{"no kind", []map[string]any{{"spec": map[string]any{}}}, "apiVersion and kind missing"},
		{"no name", []map[string]any{{"apiVersion": "karpenter.sh/v1", "kind": "NodePool"}}, "no metadata.name"},
		{"bad expireAfter", minimal(func(s map[string]any) {
			s["template"].(map[string]any)["spec"].(map[string]any)["expireAfter"] = "a month"
		}), `expireAfter "a month"`},
		{"bad policy", minimal(func(s map[string]any) {
			s["disruption"] = map[string]any{"consolidationPolicy": "Always", "consolidateAfter": "1m"}
		}), `consolidationPolicy "Always"`},
		{"bad budget duration", minimal(func(s map[string]any) {
			s["disruption"] = map[string]any{"consolidateAfter": "1m", "budgets": []any{map[string]any{"nodes": "1", "schedule": "@daily", "duration": "all day"}}}
		}), `budgets[0].duration "all day"`},
		{"wrong type", minimal(func(s map[string]any) { s["weight"] = "heavy" }), "reading the Karpenter NodePool"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Karpenter(c.in, KarpenterOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v (result %v), want an error holding %q", err, res != nil, c.want)
			}
		})
	}
}

func TestKarpenterDisruptionOff(t *testing.T) {
	off := func(edit func(spec map[string]any)) map[string]any {
		obj := objects(t, "karpenter/minimal.yaml")[0]
		spec := obj["spec"].(map[string]any)
		spec["template"].(map[string]any)["spec"].(map[string]any)["expireAfter"] = "Never"
		spec["disruption"] = map[string]any{"consolidateAfter": "0s", "budgets": []any{map[string]any{"nodes": "0"}}}
		if edit != nil {
			edit(spec)
		}
		return obj
	}
	budgets := func(b ...any) func(map[string]any) {
		return func(s map[string]any) { s["disruption"].(map[string]any)["budgets"] = b }
	}
	cases := []struct {
		name string
		obj  map[string]any
		want bool
	}{
		{"as the migration asks", off(nil), true},
		{"0% is 0", off(budgets(map[string]any{"nodes": "0%"})), true},
		{"one budget per reason", off(budgets(map[string]any{"nodes": "0", "reasons": []any{"Empty", "Underutilized"}}, map[string]any{"nodes": "0", "reasons": []any{"Drifted"}})), true},
		{"expiry still on (Karpenter's default)", off(func(s map[string]any) {
			delete(s["template"].(map[string]any)["spec"].(map[string]any), "expireAfter")
		}), false},
		{"drift still allowed", off(budgets(map[string]any{"nodes": "0", "reasons": []any{"Empty", "Underutilized"}})), false},
		{"0 only in a window", off(budgets(map[string]any{"nodes": "0", "schedule": "@daily", "duration": "1h"})), false},
		{"no budgets: Karpenter's default 10%", off(func(s map[string]any) { delete(s, "disruption") }), false},
	}
	for _, c := range cases {
		if got := KarpenterDisruptionOff(c.obj); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	res, err := Karpenter([]map[string]any{off(nil)}, KarpenterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "spec.disruption, spec.template.spec.expireAfter (turned off)", Differs, "saved before")
	if errs := karpenterCRD(t).Validate(t.Context(), off(nil)); len(errs) > 0 {
		t.Errorf("the migration's Karpenter NodePool is refused by Karpenter's CRD: %v", errs.ToAggregate())
	}
}

// TestKarpenterKnowsEveryField walks Karpenter v1.14.1's own NodePool schema:
// every field it declares under spec is one the importer maps or reports by
// name, so a field Karpenter adds shows up here first.
func TestKarpenterKnowsEveryField(t *testing.T) {
	crd := karpenterCRDManifest(t)
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd, &def); err != nil {
		t.Fatal(err)
	}
	root := def.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	var walk func(s apiextensionsv1.JSONSchemaProps, path string)
	walk = func(s apiextensionsv1.JSONSchemaProps, path string) {
		if karpenterFields[path+".*"] {
			return
		}
		if !karpenterFields[path] {
			t.Errorf("Karpenter's schema has %s, which the importer does not know", path)
			return
		}
		for name, child := range s.Properties {
			walk(child, fieldPath(path, name, child))
		}
		if s.Items != nil && s.Items.Schema != nil {
			for name, child := range s.Items.Schema.Properties {
				walk(child, fieldPath(path, name, child))
			}
		}
	}
	for name, child := range root.Properties {
		walk(child, fieldPath("spec", name, child))
	}
}

// fieldPath names a field as karpenterFields does: a list of objects as
// "name[]".
func fieldPath(parent, name string, s apiextensionsv1.JSONSchemaProps) string {
	p := parent + "." + name
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil && s.Items.Schema.Type == "object" {
		p += "[]"
	}
	return p
}
