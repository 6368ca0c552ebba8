package nodepool

import (
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The API server applies the CRD's defaults and Go code applies
// v1alpha1's: they must agree, or a pool read back from the cluster and one
// built in Go would behave differently.
func TestCRDDefaultsMatchGo(t *testing.T) {
	m := maintenanceSchema(t)
	var approve bool
	decodeDefault(t, m, "approveEarly", &approve)
	if approve != v1alpha1.DefaultApproveEarly {
		t.Errorf("CRD approveEarly default %v, Go default %v", approve, v1alpha1.DefaultApproveEarly)
	}
	var margin string
	decodeDefault(t, m, "deadlineMargin", &margin)
	if d, err := time.ParseDuration(margin); err != nil || d != v1alpha1.DefaultDeadlineMargin {
		t.Errorf("CRD deadlineMargin default %q, Go default %v", margin, v1alpha1.DefaultDeadlineMargin)
	}
	var onDeadline v1alpha1.OnDeadlineAction
	decodeDefault(t, m, "onDeadline", &onDeadline)
	if onDeadline != v1alpha1.DefaultOnDeadline {
		t.Errorf("CRD onDeadline default %q, Go default %q", onDeadline, v1alpha1.DefaultOnDeadline)
	}
	var user v1alpha1.UserInitiatedPolicy
	decodeDefault(t, m, "userInitiated", &user)
	if user != v1alpha1.DefaultUserInitiated {
		t.Errorf("CRD userInitiated default %q, Go default %q", user, v1alpha1.DefaultUserInitiated)
	}
	// The action table lives in MaintenanceSpec.ActionFor alone: a schema
	// default would write it into every stored object, where a later change
	// of the table could never reach it.
	for name, p := range m.Properties["actions"].Properties {
		if p.Default != nil {
			t.Errorf("CRD sets a default for actions.%s (%s); the defaults belong to ActionFor", name, p.Default.Raw)
		}
	}
}

// The disruption and provider defaults the API server writes are the ones
// the Go code falls back to when a field is unset.
func TestCRDDisruptionDefaultsMatchGo(t *testing.T) {
	spec := specSchema(t)
	d := spec.Properties["disruption"]
	var budgets []v1alpha1.Budget
	decodeDefault(t, d, "budgets", &budgets)
	if len(budgets) != 1 || budgets[0].Nodes != v1alpha1.DefaultBudget.Nodes || len(budgets[0].Reasons) != 0 || budgets[0].Schedule != nil {
		t.Errorf("CRD budgets default %+v, Go default %+v", budgets, v1alpha1.DefaultBudget)
	}
	if got := (*v1alpha1.DisruptionSpec)(nil).BudgetsOrDefault(); len(got) != 1 || got[0].Nodes != budgets[0].Nodes {
		t.Errorf("BudgetsOrDefault() = %+v, CRD default %+v", got, budgets)
	}
	var expire string
	decodeDefault(t, d, "expireAfter", &expire)
	if _, expires := (&v1alpha1.DisruptionSpec{ExpireAfter: expire}).ExpireAfterDuration(); expire != v1alpha1.Never || expires {
		t.Errorf("CRD expireAfter default %q: want Never, which Go reads as never expiring", expire)
	}
	var boot string
	decodeDefault(t, spec.Properties["provider"].Properties["kwok"], "bootDelay", &boot)
	if d, err := time.ParseDuration(boot); err != nil || d != v1alpha1.DefaultKwokBootDelay {
		t.Errorf("CRD kwok bootDelay default %q, Go default %v", boot, v1alpha1.DefaultKwokBootDelay)
	}
	var provider v1alpha1.ProviderSpec
	if p := spec.Properties["provider"]; p.Default == nil || json.Unmarshal(p.Default.Raw, &provider) != nil || provider.Manages() {
		t.Errorf("CRD provider default %v: want {name: none}, which manages no machine", p.Default)
	}
}

func specSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	crds, err := chartCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Name != "nodepools.sluice.dev" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == v1alpha1.SchemeGroupVersion.Version {
				return v.Schema.OpenAPIV3Schema.Properties["spec"]
			}
		}
	}
	t.Fatal("the chart ships no nodepools.sluice.dev/v1alpha1 CRD")
	return apiextensionsv1.JSONSchemaProps{}
}

func maintenanceSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	return specSchema(t).Properties["maintenance"]
}

func decodeDefault(t *testing.T, m apiextensionsv1.JSONSchemaProps, field string, into any) {
	t.Helper()
	p, ok := m.Properties[field]
	if !ok || p.Default == nil {
		t.Fatalf("CRD: %s has no default", field)
	}
	if err := json.Unmarshal(p.Default.Raw, into); err != nil {
		t.Fatalf("CRD: %s default %s: %v", field, p.Default.Raw, err)
	}
}
