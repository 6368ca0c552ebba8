package crdschema_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/crdschema"
)

func nodePoolCRD(t *testing.T) *crdschema.Validator {
	t.Helper()
	for _, crd := range chart.CRDs() {
		if bytes.Contains(crd, []byte("name: nodepools.sluice.dev")) {
			v, err := crdschema.New(crd, "v1alpha1")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no NodePool CRD in the chart")
	return nil
}

func pool(spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "sluice.dev/v1alpha1", "kind": "NodePool", "metadata": map[string]any{"name": "p"}, "spec": spec}
}

// TestValidate: the schema, its CEL rules and its defaults all apply, as
// the API server applies them.
func TestValidate(t *testing.T) {
	v := nodePoolCRD(t)
	selector := map[string]any{"matchLabels": map[string]any{"pool": "a"}}
	cases := []struct {
		name string
		obj  map[string]any
		want string // "" for valid
	}{
		{"minimal", pool(map[string]any{"nodeSelector": selector}), ""},
		{"schema: a pattern", pool(map[string]any{"nodeSelector": selector, "disruption": map[string]any{"budgets": []any{map[string]any{"nodes": "150%"}}}}), "spec.disruption.budgets[0].nodes"},
		{"CEL: an empty selector", pool(map[string]any{"nodeSelector": map[string]any{}}), "nodeSelector must not be empty"},
		// provider is left out: only its default (none) makes the rule bite.
		{"CEL after defaults: reboot with provider none", pool(map[string]any{"nodeSelector": selector, "reboot": map[string]any{}}), "reboot needs a provider"},
		{"kind", map[string]any{"apiVersion": "sluice.dev/v1alpha1", "kind": "Pool", "spec": map[string]any{"nodeSelector": selector}}, "kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := v.Validate(context.Background(), c.obj)
			switch {
			case c.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs.ToAggregate())
			case c.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), c.want)):
				t.Errorf("got %v, want an error holding %q", errs.ToAggregate(), c.want)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := crdschema.New([]byte("kind: [oops"), "v1"); err == nil {
		t.Error("read a CRD that is not YAML")
	}
	if _, err := crdschema.New(chart.CRDs()[0], "v9"); err == nil || !strings.Contains(err.Error(), "no version v9") {
		t.Errorf("a missing version: %v", err)
	}
}
