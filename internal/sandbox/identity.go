package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// fieldManager owns the fields ApplyManifests sets.
const fieldManager = "sluice-sandbox"

// ApplyManifests server-side-applies every object in manifests, a multi-document
// YAML stream, in order, as `kubectl apply --server-side --force-conflicts`
// would. Namespaced objects must name their namespace: a sandbox has no
// kubeconfig default worth relying on. Documents holding only comments are
// skipped.
func ApplyManifests(ctx context.Context, cfg *rest.Config, manifests string) error {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a dynamic client: %w", err)
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading manifest document %d: %w", i, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return fmt.Errorf("parsing manifest document %d: %w", i, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := apply(ctx, dyn, mapper, obj); err != nil {
			return fmt.Errorf("applying manifest document %d: %w", i, err)
		}
	}
}

// AgentConfig returns a copy of base that authenticates as the service account
// with a fresh token from the TokenRequest API, bound to pod as the kubelet's
// projected token for a pod running there would be. The copy keeps base's
// server and CA but none of its credentials (client certificate, token,
// impersonation), so the API server sees only the service account, with the
// node the pod is bound to in its extra info. A nil pod mints an unbound token,
// as a long-lived or copied-out token would be. ttl is the token's lifetime;
// the API server refuses less than ten minutes, and zero takes its default.
func AgentConfig(ctx context.Context, client kubernetes.Interface, base *rest.Config, namespace, serviceAccount string, pod *corev1.Pod, ttl time.Duration) (*rest.Config, error) {
	req := &authenticationv1.TokenRequest{}
	if ttl > 0 {
		req.Spec.ExpirationSeconds = ptr.To(int64(ttl / time.Second))
	}
	what := "an unbound token"
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
		}
		what = fmt.Sprintf("a token bound to pod %s/%s", pod.Namespace, pod.Name)
	}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting %s for service account %s/%s: %w", what, namespace, serviceAccount, err)
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// apply server-side-applies one object, resolving its resource through mapper.
func apply(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	if gvk.Version == "" || gvk.Kind == "" || obj.GetName() == "" {
		return fmt.Errorf("an object needs apiVersion, kind and metadata.name; got apiVersion %q, kind %q, name %q",
			obj.GetAPIVersion(), gvk.Kind, obj.GetName())
	}
	name := gvk.Kind + " " + obj.GetName()
	if obj.GetNamespace() != "" {
		name = gvk.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// The kind may come from a CRD applied earlier in the same stream.
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("%s: finding the resource for %s: %w", name, gvk, err)
	}
	var resource dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s: a namespaced object needs metadata.namespace", name)
		}
		resource = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%s: encoding: %w", name, err)
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}
	if _, err := resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
