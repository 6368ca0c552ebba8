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

func maintenanceSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
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
				return v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["maintenance"]
			}
		}
	}
	t.Fatal("the chart ships no nodepools.sluice.dev/v1alpha1 CRD")
	return apiextensionsv1.JSONSchemaProps{}
}

func decodeDefault(t *testing.T, m apiextensionsv1.JSONSchemaProps, field string, into any) {
	t.Helper()
	p, ok := m.Properties[field]
	if !ok || p.Default == nil {
		t.Fatalf("CRD: maintenance.%s has no default", field)
	}
	if err := json.Unmarshal(p.Default.Raw, into); err != nil {
		t.Fatalf("CRD: maintenance.%s default %s: %v", field, p.Default.Raw, err)
	}
}
