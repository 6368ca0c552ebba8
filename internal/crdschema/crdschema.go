// Package crdschema checks objects against a CustomResourceDefinition in
// process, the way the API server does when one is created: the schema's
// defaults applied, then its OpenAPI validation and its CEL rules. It lets a
// command refuse what `kubectl apply` would refuse before anything is
// written, and lets a test prove that an input is a real object of someone
// else's CRD (Karpenter's NodePool) without a control plane.
//
// It does not check what only a server can: object metadata beyond the
// schema, admission, ratcheting of updates.
package crdschema

import (
	"context"
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Validator checks objects of one version of one CRD.
type Validator struct {
	// Kind and APIVersion are what the objects must say they are.
	Kind, APIVersion string

	structural *schema.Structural
	openAPI    validation.SchemaValidator
	rules      *cel.Validator
}

// New reads a CRD manifest (YAML or JSON) and prepares its version's schema.
func New(crd []byte, version string) (*Validator, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crd, &def); err != nil {
		return nil, fmt.Errorf("reading the CustomResourceDefinition: %w", err)
	}
	for _, v := range def.Spec.Versions {
		if v.Name != version {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("CRD %s version %s has no schema", def.Name, version)
		}
		var internal apiextensionsinternal.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, fmt.Errorf("converting the schema of CRD %s: %w", def.Name, err)
		}
		structural, err := schema.NewStructural(&internal)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: the schema is not structural: %w", def.Name, err)
		}
		openAPI, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: building its validator: %w", def.Name, err)
		}
		return &Validator{
			Kind:       def.Spec.Names.Kind,
			APIVersion: def.Spec.Group + "/" + version,
			structural: structural,
			openAPI:    openAPI,
			rules:      cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}, nil
	}
	return nil, fmt.Errorf("CRD %s has no version %s", def.Name, version)
}

// Default applies the schema's defaults to obj in place, as the API server
// does before it validates and stores an object.
func (v *Validator) Default(obj map[string]any) { defaulting.Default(obj, v.structural) }

// Validate checks obj as the API server would on create: it defaults a copy,
// then applies the schema's OpenAPI validation and CEL rules. The errors name
// each field at fault with the schema's own message.
func (v *Validator) Validate(ctx context.Context, obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	if kind, _ := obj["kind"].(string); kind != v.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+v.Kind))
	}
	if apiVersion, _ := obj["apiVersion"].(string); apiVersion != v.APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, "must be "+v.APIVersion))
	}
	defaulted := runtime.DeepCopyJSON(obj)
	v.Default(defaulted)
	errs = append(errs, validation.ValidateCustomResource(nil, defaulted, v.openAPI)...)
	celErrs, _ := v.rules.Validate(ctx, nil, v.structural, defaulted, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}
