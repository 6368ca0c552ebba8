// Package capi runs Cluster API's core controllers against a sandbox, as an
// install of Cluster API does (its CRDs, its RBAC, its webhooks served with a
// certificate from the sandbox's CA), beside a small infrastructure provider
// of ours whose machines are kwok Nodes. docs/design/cluster-api.md says what
// is Cluster API's own and what is ours.
package capi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/sandbox"
)

// ToolsEnv names the variable holding the directory hack/tools/capi.sh
// prints: bin/capi-manager, crds/, webhook/ and rbac/.
const ToolsEnv = "SLUICE_CAPI"

// Namespace is where the manager's service account lives, as clusterctl
// installs it.
const Namespace = "capi-system"

// Manager is Cluster API's core controller manager running against a sandbox.
type Manager struct {
	sb       *sandbox.Sandbox
	client   kubernetes.Interface
	webhooks []string // kind/name of the webhook configurations applied
}

// Start installs Cluster API's CRDs, RBAC and webhook configurations from
// tools (the directory capi.sh prints) and runs its manager as a sandbox
// component, returning once its webhooks answer.
func Start(ctx context.Context, sb *sandbox.Sandbox, tools string) (*Manager, error) {
	cfg := sb.RESTConfig()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m := &Manager{sb: sb, client: client}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	webhookPort, healthPort, diagPort := ports[0], ports[1], ports[2]
	ca, err := os.ReadFile(sb.CAFile())
	if err != nil {
		return nil, fmt.Errorf("reading the sandbox CA: %w", err)
	}
	caBundle := base64.StdEncoding.EncodeToString(ca)
	base := fmt.Sprintf("https://127.0.0.1:%d", webhookPort)

	if err := sandbox.ApplyManifests(ctx, cfg, rbac); err != nil {
		return nil, fmt.Errorf("installing Cluster API's namespace and service account: %w", err)
	}
	roles, err := readObjects(filepath.Join(tools, "rbac"))
	if err != nil {
		return nil, err
	}
	for _, r := range roles {
		// clusterctl's kustomization prefixes every name with capi- and
		// labels manager-role into the aggregated role the manager is bound to.
		r.SetName("capi-" + r.GetName())
		if r.GetName() == "capi-manager-role" {
			r.SetLabels(map[string]string{"cluster.x-k8s.io/aggregate-to-manager": "true"})
		}
	}
	crds, err := readObjects(filepath.Join(tools, "crds"))
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		// What the kustomization's webhook_in_* patches and cert-manager's CA
		// injection write, with the Service replaced by loopback.
		if err := unstructured.SetNestedMap(c.Object, map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig":             map[string]any{"url": base + "/convert", "caBundle": caBundle},
			},
		}, "spec", "conversion"); err != nil {
			return nil, err
		}
	}
	if err := apply(ctx, sb, append(roles, crds...)); err != nil {
		return nil, fmt.Errorf("installing Cluster API's roles and CRDs: %w", err)
	}
	kubeconfig, err := m.serviceAccountKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(sb.Dir(), "capi-webhook-certs")
	if err := servingCerts(sb, certDir); err != nil {
		return nil, err
	}
	bin := filepath.Join(tools, "bin", "capi-manager")
	args := []string{
		"--kubeconfig=" + kubeconfig,
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-cert-dir=" + certDir,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", diagPort),
		"--insecure-diagnostics",
		// Machines, MachineSets and MachineDeployments are requeued on every
		// change anyway; a shorter resync only helps a test that waits on a
		// periodic check.
		"--sync-period=1m",
		"--v=2",
	}
	if err := sb.Launch("capi-manager", bin, args); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sb.WaitHealthy(ctx, "capi-manager", fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)); err != nil {
		return nil, err
	}
	hooks, err := readObjects(filepath.Join(tools, "webhook"))
	if err != nil {
		return nil, err
	}
	for _, h := range hooks {
		h.SetName("capi-" + h.GetName())
		if err := pointAt(h, base, caBundle); err != nil {
			return nil, err
		}
		m.webhooks = append(m.webhooks, h.GetKind()+"/"+h.GetName())
	}
	if err := apply(ctx, sb, hooks); err != nil {
		return nil, fmt.Errorf("installing Cluster API's webhook configurations: %w", err)
	}
	return m, nil
}

// Stop removes the webhook configurations, so that the API server does not
// call a webhook that is gone; the sandbox stops the process itself.
func (m *Manager) Stop(ctx context.Context) {
	for _, w := range m.webhooks {
		kind, name, _ := strings.Cut(w, "/")
		adm := m.client.AdmissionregistrationV1()
		switch kind {
		case "MutatingWebhookConfiguration":
			_ = adm.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		case "ValidatingWebhookConfiguration":
			_ = adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
}

// rbac is the namespace, service account and binding clusterctl's manifests
// give the manager (names prefixed as its kustomization prefixes them).
const rbac = `
apiVersion: v1
kind: Namespace
metadata:
  name: capi-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: capi-manager
  namespace: capi-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: capi-manager-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: capi-aggregated-manager-role
subjects:
- kind: ServiceAccount
  name: capi-manager
  namespace: capi-system
`

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// manager's service account, as its pod's projected token would.
func (m *Manager) serviceAccountKubeconfig(ctx context.Context) (string, error) {
	cfg, err := sandbox.AgentConfig(ctx, m.client, m.sb.RESTConfig(), Namespace, "capi-manager", nil, 24*time.Hour)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: m.sb.CAFile()}
	kc.AuthInfos["capi-manager"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["capi"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "capi-manager"}
	kc.CurrentContext = "capi"
	path := filepath.Join(m.sb.Dir(), "capi-manager.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing the Cluster API manager's kubeconfig: %w", err)
	}
	return path, nil
}

// servingCerts puts the sandbox's serving certificate where the manager's
// webhook server reads it (tls.crt, tls.key), as cert-manager's Secret would.
func servingCerts(sb *sandbox.Sandbox, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	crt, key := sb.ServingCert()
	for src, dst := range map[string]string{crt: "tls.crt", key: "tls.key"} {
		b, err := os.ReadFile(src) //nolint:gosec // the sandbox's own files
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// pointAt rewrites each webhook of a configuration from the in-cluster
// Service to base, with the CA bundle cert-manager would inject.
func pointAt(cfg *unstructured.Unstructured, base, caBundle string) error {
	hooks, _, err := unstructured.NestedSlice(cfg.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: webhook %d is not an object", cfg.GetName(), i)
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		hook["clientConfig"] = map[string]any{"url": base + path, "caBundle": caBundle}
		hooks[i] = hook
	}
	return unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks")
}

// readObjects reads every YAML document of every file in dir.
func readObjects(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Cluster API manifests in %s (run hack/tools/capi.sh and set %s to the directory it prints)", dir, ToolsEnv)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // the tools directory capi.sh wrote
		if err != nil {
			return nil, err
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return nil, fmt.Errorf("parsing %s: %w", f, err)
			}
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

// apply server-side-applies objs through the sandbox's own manifest applier.
func apply(ctx context.Context, sb *sandbox.Sandbox, objs []*unstructured.Unstructured) error {
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return sandbox.ApplyManifests(ctx, sb.RESTConfig(), b.String())
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port) //nolint:forcetypeassert // a TCP listener
	}
	return ports, nil
}
