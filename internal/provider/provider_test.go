package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestTemplateHash(t *testing.T) {
	empty := TemplateHash(nil)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(empty) {
		t.Fatalf("TemplateHash(nil) = %q, want 16 hex digits", empty)
	}
	maxPods110 := TemplateHash(&v1alpha1.NodeTemplate{Kubelet: &v1alpha1.KubeletSpec{MaxPods: ptr.To[int32](110)}})
	for _, tc := range []struct {
		name     string
		template *v1alpha1.NodeTemplate
		want     string // "" when it must differ from both empty and maxPods110
	}{
		{"nil template", nil, empty},
		{"nil kubelet", &v1alpha1.NodeTemplate{}, empty},
		{"empty kubelet", &v1alpha1.NodeTemplate{Kubelet: &v1alpha1.KubeletSpec{}}, empty},
		// Only the kubelet settings count: the rest can be read from a Node.
		{"other fields", &v1alpha1.NodeTemplate{Image: "ami-1", InstanceTypes: []string{"m6i.large"}, Labels: map[string]string{"a": "b"}}, empty},
		{"maxPods 110", &v1alpha1.NodeTemplate{Kubelet: &v1alpha1.KubeletSpec{MaxPods: ptr.To[int32](110)}}, maxPods110},
		{"maxPods 110, other image", &v1alpha1.NodeTemplate{Image: "x", Kubelet: &v1alpha1.KubeletSpec{MaxPods: ptr.To[int32](110)}}, maxPods110},
		{"maxPods 30", &v1alpha1.NodeTemplate{Kubelet: &v1alpha1.KubeletSpec{MaxPods: ptr.To[int32](30)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TemplateHash(tc.template)
			if got != TemplateHash(tc.template) {
				t.Fatalf("not stable")
			}
			switch {
			case tc.want != "" && got != tc.want:
				t.Errorf("TemplateHash = %s, want %s", got, tc.want)
			case tc.want == "" && (got == empty || got == maxPods110):
				t.Errorf("TemplateHash = %s, the same as another template's", got)
			}
		})
	}
	// A stored hash must keep its meaning across releases: this is what every
	// node made before now carries.
	if want := "44136fa355b3678a"; empty != want {
		t.Errorf("TemplateHash(nil) = %s, was %s: nodes made before would all look drifted", empty, want)
	}
}

type fakeProvider struct{ Provider }

func TestSetFor(t *testing.T) {
	kwok := &fakeProvider{}
	set := Set{v1alpha1.ProviderKwok: kwok}
	pool := func(name v1alpha1.ProviderName) *v1alpha1.NodePool {
		return &v1alpha1.NodePool{Spec: v1alpha1.NodePoolSpec{Provider: v1alpha1.ProviderSpec{Name: name}}}
	}
	for _, tc := range []struct {
		name string
		set  Set
		pool *v1alpha1.NodePool
		want Provider
	}{
		{"kwok", set, pool(v1alpha1.ProviderKwok), kwok},
		{"none", set, pool(v1alpha1.ProviderNone), nil},
		{"unset", set, pool(""), nil},
		{"no pool", set, nil, nil},
		{"not in the set", Set{}, pool(v1alpha1.ProviderKwok), nil},
		{"nil set", nil, pool(v1alpha1.ProviderKwok), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.set.For(tc.pool)
			if ok != (tc.want != nil) || got != tc.want {
				t.Errorf("For = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	refusal := &Error{Code: CodeQuotaExceeded, Message: "over quota"}
	for _, tc := range []struct {
		name     string
		err      error
		notFound bool
		refusal  *Error
	}{
		{"nil", nil, false, nil},
		{"plain", errors.New("boom"), false, nil},
		{"not found", fmt.Errorf("machine x: %w", ErrNotFound), true, nil},
		{"refusal", refusal, false, refusal},
		{"wrapped refusal", fmt.Errorf("creating machine: %w", refusal), false, refusal},
		{"context", context.Canceled, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsNotFound(tc.err); got != tc.notFound {
				t.Errorf("IsNotFound = %v, want %v", got, tc.notFound)
			}
			got, ok := AsError(tc.err)
			if ok != (tc.refusal != nil) || got != tc.refusal {
				t.Errorf("AsError = %v, %v; want %v", got, ok, tc.refusal)
			}
		})
	}
	if got, want := refusal.Error(), "QuotaExceeded: over quota"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestIDKey(t *testing.T) {
	node := "azure:///subscriptions/6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-web-1234-vmss/virtualMachines/7"
	arm := "azure:///subscriptions/6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d/resourceGroups/MC_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-web-1234-vmss/virtualMachines/7"
	if IDKey(node) != IDKey(arm) {
		t.Errorf("the Node's and Azure's forms of one providerID differ:\n  %s\n  %s", IDKey(node), IDKey(arm))
	}
	if IDKey(arm) == IDKey(strings.Replace(arm, "/7", "/8", 1)) {
		t.Error("two instances have the same key")
	}
	if got := IDKey("kwok://Web-ABC"); got != "kwok://Web-ABC" {
		t.Errorf("a kwok providerID became %q; only Azure's are case-insensitive", got)
	}
}
