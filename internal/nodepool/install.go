package nodepool

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	chart "github.com/sluice-dev/sluice/charts/sluice"
)

// FieldManager owns the fields sluice applies to the API server.
const FieldManager = "sluice"

// establishTimeout bounds the wait for a CRD to be served when the caller's
// context has no deadline of its own.
const establishTimeout = time.Minute

// Install applies the CRDs the Helm chart ships (server-side, taking over
// fields another manager set) and waits until the API server serves them. It
// may run again: an unchanged CRD is left as it is.
func Install(ctx context.Context, client apiextensionsclient.Interface) error {
	crds, err := chartCRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, crd.manifest,
			metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)})
		if err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, establishTimeout)
	defer cancel()
	for _, crd := range crds {
		if err := waitEstablished(ctx, client, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

// chartCRD is one CRD the chart ships: decoded, and as the JSON manifest
// to apply, which is exactly the chart's file.
type chartCRD struct {
	*apiextensionsv1.CustomResourceDefinition
	manifest []byte
}

func chartCRDs() ([]chartCRD, error) {
	docs := chart.CRDs()
	out := make([]chartCRD, 0, len(docs))
	for _, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("decoding the chart's CRD: %w", err)
		}
		manifest, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("converting CRD %s to JSON: %w", crd.Name, err)
		}
		out = append(out, chartCRD{CustomResourceDefinition: crd, manifest: manifest})
	}
	return out, nil
}

// waitEstablished waits until the CRD is Established, and gives up at once
// when the API server refuses its names (another CRD holds them).
func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			switch {
			case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
				return false, fmt.Errorf("CRD %s: names not accepted: %s", name, c.Message)
			case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
				return true, nil
			case c.Type == apiextensionsv1.Established:
				last = c.Reason + ": " + c.Message
			}
		}
		return false, nil
	})
	if err != nil {
		if last != "" {
			return fmt.Errorf("waiting for CRD %s to be established (last seen: %s): %w", name, last, err)
		}
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}
