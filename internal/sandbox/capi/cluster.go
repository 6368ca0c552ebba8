package capi

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox"
)

// KubernetesVersion is the version the sandbox's Machines say they run.
const KubernetesVersion = "v1.34.4"

// CreateCluster makes a Cluster API Cluster in ns that is the sandbox itself:
// no infrastructure cluster (Cluster API then counts the infrastructure as
// provisioned), a SandboxControlPlane that says it is initialized and managed
// outside Cluster API (as a hosted control plane does, so Cluster API runs
// deletion hooks, drains and deletes Nodes), and the <name>-kubeconfig Secret
// pointing back at the sandbox's API server, through which Cluster API
// watches the "workload cluster's" Nodes.
func CreateCluster(ctx context.Context, sb *sandbox.Sandbox, ns, name string) error {
	cfg := sb.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kubeconfig, err := os.ReadFile(sb.Kubeconfig())
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns,
			Labels: map[string]string{clusterapi.LabelClusterName: name}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig},
	}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the cluster's kubeconfig Secret: %w", err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return err
	}
	port, _ := strconv.ParseInt(u.Port(), 10, 32)
	endpoint := map[string]any{"host": u.Hostname(), "port": port}
	cp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": InfraGroup + "/v1alpha1", "kind": "SandboxControlPlane",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"controlPlaneEndpoint": endpoint, "version": KubernetesVersion},
	}}
	cp, err = dyn.Resource(ControlPlanes).Namespace(ns).Create(ctx, cp, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the SandboxControlPlane: %w", err)
	}
	cp.Object["status"] = map[string]any{
		"initialization":              map[string]any{"controlPlaneInitialized": true},
		"externalManagedControlPlane": true,
		"version":                     KubernetesVersion,
	}
	if _, err := dyn.Resource(ControlPlanes).Namespace(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking the SandboxControlPlane initialized: %w", err)
	}
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": clusterapi.Group + "/" + clusterapi.Version, "kind": "Cluster",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"controlPlaneEndpoint": endpoint,
			"controlPlaneRef":      map[string]any{"apiGroup": InfraGroup, "kind": "SandboxControlPlane", "name": name},
		},
	}}
	if _, err := dyn.Resource(clusterapi.Clusters).Namespace(ns).Create(ctx, cluster, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the Cluster: %w", err)
	}
	return nil
}

// Workers is a MachineDeployment's worth of machines: the template its
// Machines boot from and the bootstrap data their kubelets join with.
type Workers struct {
	Namespace, Cluster, Name string
	Replicas                 int
	// Taints and Labels are what the bootstrap data tells the kubelet to
	// register the Node with (a KubeadmConfigTemplate's
	// joinConfiguration.nodeRegistration).
	Taints []corev1.Taint
	Labels map[string]string
	// BootDelay is how long a machine takes from its KwokMachine to its Node.
	BootDelay time.Duration
	// NodeDrainTimeout is the Machines' spec.deletion.nodeDrainTimeoutSeconds.
	NodeDrainTimeout time.Duration
}

// Create makes the bootstrap Secret, the KwokMachineTemplate (named
// <name>-<template>) and the MachineDeployment.
func (w Workers) Create(ctx context.Context, dyn dynamic.Interface, client kubernetes.Interface, template string) error {
	var join JoinConfig
	join.NodeRegistration.Taints = w.Taints
	if len(w.Labels) > 0 {
		var s string
		for k, v := range w.Labels {
			if s != "" {
				s += ","
			}
			s += k + "=" + v
		}
		join.NodeRegistration.KubeletExtraArgs = append(join.NodeRegistration.KubeletExtraArgs, struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		}{"node-labels", s})
	}
	data, err := yaml.Marshal(join)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-bootstrap", Namespace: w.Namespace,
			Labels: map[string]string{clusterapi.LabelClusterName: w.Cluster}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": data, "format": []byte("cloud-config")},
	}
	if _, err := client.CoreV1().Secrets(w.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the bootstrap Secret: %w", err)
	}
	if err := w.CreateTemplate(ctx, dyn, template); err != nil {
		return err
	}
	spec := map[string]any{
		"clusterName": w.Cluster,
		"version":     KubernetesVersion,
		"bootstrap":   map[string]any{"dataSecretName": w.Name + "-bootstrap"},
		"infrastructureRef": map[string]any{
			"apiGroup": InfraGroup, "kind": "KwokMachineTemplate", "name": w.Name + "-" + template,
		},
	}
	if w.NodeDrainTimeout > 0 {
		spec["deletion"] = map[string]any{"nodeDrainTimeoutSeconds": int64(w.NodeDrainTimeout / time.Second)}
	}
	md := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": clusterapi.Group + "/" + clusterapi.Version, "kind": "MachineDeployment",
		"metadata": map[string]any{"name": w.Name, "namespace": w.Namespace},
		"spec": map[string]any{
			"clusterName": w.Cluster,
			"replicas":    int64(w.Replicas),
			"template":    map[string]any{"spec": spec},
		},
	}}
	if _, err := dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace).Create(ctx, md, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating MachineDeployment %s: %w", w.Name, err)
	}
	return nil
}

// CreateTemplate makes the KwokMachineTemplate <name>-<template>; pointing
// the MachineDeployment at a new one is how a test starts Cluster API's own
// rollout.
func (w Workers) CreateTemplate(ctx context.Context, dyn dynamic.Interface, template string) error {
	spec := map[string]any{"instanceType": "kwok-4cpu-16gi"}
	if w.BootDelay > 0 {
		spec["bootDelay"] = w.BootDelay.String()
	}
	t := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": InfraGroup + "/v1alpha1", "kind": "KwokMachineTemplate",
		"metadata": map[string]any{"name": w.Name + "-" + template, "namespace": w.Namespace},
		"spec":     map[string]any{"template": map[string]any{"spec": spec}},
	}}
	if _, err := dyn.Resource(KwokMachineTemplates).Namespace(w.Namespace).Create(ctx, t, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating KwokMachineTemplate %s-%s: %w", w.Name, template, err)
	}
	return nil
}
