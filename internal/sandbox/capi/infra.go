package capi

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// InfraGroup is the API group of the sandbox's infrastructure provider.
const InfraGroup = "infrastructure.sandbox.sluice.dev"

// The provider's resources, for the InfraMachine, InfraMachineTemplate and
// ControlPlane contracts it serves.
var (
	KwokMachines         = schema.GroupVersionResource{Group: InfraGroup, Version: "v1alpha1", Resource: "kwokmachines"}
	KwokMachineTemplates = schema.GroupVersionResource{Group: InfraGroup, Version: "v1alpha1", Resource: "kwokmachinetemplates"}
	ControlPlanes        = schema.GroupVersionResource{Group: InfraGroup, Version: "v1alpha1", Resource: "sandboxcontrolplanes"}
)

// finalizer keeps a KwokMachine until its Node is gone, as a cloud provider's
// finalizer keeps an InfraMachine until its VM is.
const finalizer = contract.FinalizerSandboxMachine

// infraCRDs are the provider's CRDs, labelled with the Cluster API contract
// they follow (v1beta2, as the contract's "CRD labels" rule asks), and the
// ClusterRole that Cluster API's aggregated role picks up so its controllers
// may read and own them.
const infraCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kwokmachines.infrastructure.sandbox.sluice.dev
  labels: {cluster.x-k8s.io/v1beta2: v1alpha1}
spec:
  group: infrastructure.sandbox.sluice.dev
  names: {kind: KwokMachine, listKind: KwokMachineList, plural: kwokmachines, singular: kwokmachine}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kwokmachinetemplates.infrastructure.sandbox.sluice.dev
  labels: {cluster.x-k8s.io/v1beta2: v1alpha1}
spec:
  group: infrastructure.sandbox.sluice.dev
  names: {kind: KwokMachineTemplate, listKind: KwokMachineTemplateList, plural: kwokmachinetemplates, singular: kwokmachinetemplate}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sandboxcontrolplanes.infrastructure.sandbox.sluice.dev
  labels: {cluster.x-k8s.io/v1beta2: v1alpha1}
spec:
  group: infrastructure.sandbox.sluice.dev
  names: {kind: SandboxControlPlane, listKind: SandboxControlPlaneList, plural: sandboxcontrolplanes, singular: sandboxcontrolplane}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capi-sandbox-infrastructure
  labels: {cluster.x-k8s.io/aggregate-to-manager: "true"}
rules:
- apiGroups: [infrastructure.sandbox.sluice.dev]
  resources: [kwokmachines, kwokmachinetemplates, sandboxcontrolplanes]
  verbs: [create, delete, get, list, patch, update, watch]
`

// Infra is the sandbox's infrastructure provider: for each KwokMachine
// Cluster API creates it makes the Node a kubelet would register (named after
// the machine, providerID kwok://<name>, with the taints and labels its
// bootstrap data asks for and nothing else), after the template's boot delay,
// and deletes the Node when the KwokMachine goes.
type Infra struct {
	dyn    dynamic.Interface
	client kubernetes.Interface
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[string]
	lister cache.GenericLister
}

// StartInfra installs the provider's CRDs and runs its controller until ctx
// ends.
func StartInfra(ctx context.Context, sb *sandbox.Sandbox, log *slog.Logger) (*Infra, error) {
	cfg := sb.RESTConfig()
	if err := sandbox.ApplyManifests(ctx, cfg, infraCRDs); err != nil {
		return nil, fmt.Errorf("installing the sandbox infrastructure provider's CRDs: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := waitServed(ctx, dyn); err != nil {
		return nil, err
	}
	in := &Infra{dyn: dyn, client: client, log: log,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 2*time.Second))}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, time.Minute)
	inf := factory.ForResource(KwokMachines)
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			in.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	in.lister = inf.Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); in.queue.ShutDown() }()
	for range 4 {
		go in.work(ctx)
	}
	return in, nil
}

func waitServed(ctx context.Context, dyn dynamic.Interface) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = dyn.Resource(KwokMachines).List(ctx, metav1.ListOptions{Limit: 1})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the KwokMachine CRD is not served: %w (last: %w)", err, last)
	}
	return nil
}

func (in *Infra) work(ctx context.Context) {
	for {
		key, shut := in.queue.Get()
		if shut {
			return
		}
		after, err := in.reconcile(ctx, key)
		switch {
		case apierrors.IsConflict(err):
			in.queue.AddRateLimited(key) // Cluster API wrote it meanwhile: read it again
		case err != nil:
			in.log.Info("kwokmachine", "key", key, "err", err)
			in.queue.AddRateLimited(key)
		case after > 0:
			in.queue.Forget(key)
			in.queue.AddAfter(key, after)
		default:
			in.queue.Forget(key)
		}
		in.queue.Done(key)
	}
}

// reconcile brings one KwokMachine's Node in line with it; it returns how
// long to wait when the machine is still booting.
func (in *Infra) reconcile(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := strings.Cut(key, "/")
	res := in.dyn.Resource(KwokMachines).Namespace(ns)
	km, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if km.GetDeletionTimestamp() != nil {
		if err := in.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
		return 0, removeFinalizer(ctx, res, km)
	}
	if !hasFinalizer(km) {
		km.SetFinalizers(append(km.GetFinalizers(), finalizer))
		km, err = res.Update(ctx, km, metav1.UpdateOptions{})
		if err != nil {
			return 0, err
		}
	}
	if provisioned, _, _ := unstructured.NestedBool(km.Object, "status", "initialization", "provisioned"); provisioned {
		return 0, nil
	}
	machine, err := in.owner(ctx, km)
	if err != nil || machine == nil {
		return time.Second, err // Cluster API sets the owner reference after creating it
	}
	secret, _, _ := unstructured.NestedString(machine.Object, "spec", "bootstrap", "dataSecretName")
	if secret == "" {
		return time.Second, nil
	}
	boot, _, _ := unstructured.NestedString(km.Object, "spec", "bootDelay")
	if d, err := time.ParseDuration(boot); err == nil {
		if left := time.Until(km.GetCreationTimestamp().Add(d)); left > 0 {
			return left, nil
		}
	}
	join, err := in.bootstrap(ctx, ns, secret)
	if err != nil {
		return 0, err
	}
	typ, _, _ := unstructured.NestedString(km.Object, "spec", "instanceType")
	zone, _, _ := unstructured.NestedString(machine.Object, "spec", "failureDomain")
	node := buildNode(name, typ, zone, join)
	if _, err := in.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	if err := unstructured.SetNestedField(km.Object, node.Spec.ProviderID, "spec", "providerID"); err != nil {
		return 0, err
	}
	if km, err = res.Update(ctx, km, metav1.UpdateOptions{}); err != nil {
		return 0, err
	}
	_ = unstructured.SetNestedField(km.Object, true, "status", "initialization", "provisioned")
	_ = unstructured.SetNestedSlice(km.Object, []any{map[string]any{"type": "InternalIP", "address": "10.0.0.1"}}, "status", "addresses")
	_, err = res.UpdateStatus(ctx, km, metav1.UpdateOptions{})
	return 0, err
}

// owner is the Machine that owns the KwokMachine, nil before Cluster API set
// the reference.
func (in *Infra) owner(ctx context.Context, km *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	for _, ref := range km.GetOwnerReferences() {
		if ref.Kind == "Machine" && strings.HasPrefix(ref.APIVersion, "cluster.x-k8s.io/") {
			return in.dyn.Resource(clusterapi.Machines).Namespace(km.GetNamespace()).Get(ctx, ref.Name, metav1.GetOptions{})
		}
	}
	return nil, nil
}

// JoinConfig is the part of a bootstrap data Secret's value the sandbox's
// "kubelet" reads: the fields of a kubeadm JoinConfiguration's
// nodeRegistration that decide how the Node registers.
type JoinConfig struct {
	NodeRegistration struct {
		Taints           []corev1.Taint `json:"taints,omitempty"`
		KubeletExtraArgs []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"kubeletExtraArgs,omitempty"`
	} `json:"nodeRegistration"`
}

func (in *Infra) bootstrap(ctx context.Context, ns, name string) (*JoinConfig, error) {
	s, err := in.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading bootstrap data %s/%s: %w", ns, name, err)
	}
	var j JoinConfig
	if err := yaml.Unmarshal(s.Data["value"], &j); err != nil {
		return nil, fmt.Errorf("bootstrap data %s/%s: %w", ns, name, err)
	}
	return &j, nil
}

// buildNode is the Node the machine's kubelet registers: its name, the
// well-known labels a kubelet and a cloud provider set, the labels and taints
// the bootstrap data gives the kubelet, and a fixed capacity.
func buildNode(name, typ, zone string, j *JoinConfig) *corev1.Node {
	if typ == "" {
		typ = "kwok-4cpu-16gi"
	}
	labels := map[string]string{
		corev1.LabelHostname:           name,
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelInstanceTypeStable: typ,
	}
	if zone != "" {
		labels[corev1.LabelTopologyZone] = zone
	}
	for _, a := range j.NodeRegistration.KubeletExtraArgs {
		if a.Name != "node-labels" {
			continue
		}
		for _, kv := range strings.Split(a.Value, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = v
			}
		}
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{ProviderID: "kwok://" + name, Taints: j.NodeRegistration.Taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.34.4", OperatingSystem: "linux", Architecture: "amd64"}},
	}
}

func hasFinalizer(o *unstructured.Unstructured) bool {
	for _, f := range o.GetFinalizers() {
		if f == finalizer {
			return true
		}
	}
	return false
}

func removeFinalizer(ctx context.Context, res dynamic.ResourceInterface, o *unstructured.Unstructured) error {
	var keep []string
	for _, f := range o.GetFinalizers() {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	if len(keep) == len(o.GetFinalizers()) {
		return nil
	}
	o.SetFinalizers(keep)
	_, err := res.Update(ctx, o, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
