// Package chart gives Go code the parts of the sluice Helm chart it must agree
// with, so tests and the sandbox install exactly the CRDs `helm install`
// would. The chart's .helmignore keeps this file out of the packaged chart.
package chart

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

//go:embed crds/*.yaml
var crds embed.FS

//go:embed templates/agent-policy.yaml
var agentPolicy string

//go:embed templates/controller-rbac.yaml
var controllerRBAC string

// CRDs returns the chart's CustomResourceDefinition manifests, one YAML
// document each, in file name order.
func CRDs() [][]byte {
	names, err := fs.Glob(crds, "crds/*.yaml")
	if err != nil {
		panic(err) // The pattern is a constant and valid.
	}
	out := make([][]byte, 0, len(names))
	for _, name := range names {
		b, err := crds.ReadFile(name)
		if err != nil {
			panic(err) // Embedded files are always readable.
		}
		out = append(out, b)
	}
	return out
}

// AgentPolicy returns the agent's ServiceAccount, RBAC and own-node
// ValidatingAdmissionPolicy exactly as the chart installs them into
// namespace. The template uses no Helm feature but the release namespace.
func AgentPolicy(namespace string) (string, error) {
	out := strings.ReplaceAll(agentPolicy, "{{ .Release.Namespace }}", namespace)
	if i := strings.Index(out, "{{"); i >= 0 {
		return "", fmt.Errorf("templates/agent-policy.yaml uses templating beyond the release namespace: %q", out[i:min(len(out), i+40)])
	}
	return out, nil
}

// AgentPolicyNamed is AgentPolicy with every object and the service account
// it admits named name instead of sluice-agent: the same policy, for agents
// that must live beside a release of the chart (the sandbox's own).
func AgentPolicyNamed(namespace, name string) (string, error) {
	out, err := AgentPolicy(namespace)
	return strings.ReplaceAll(out, "sluice-agent", name), err
}

// ControllerRBAC returns the controller's ServiceAccount, ClusterRole,
// leader-election Role and their bindings exactly as the chart installs them
// into namespace, less the chart's common labels and the service account's
// optional annotations (the other templating the file uses).
func ControllerRBAC(namespace string) (string, error) {
	var keep []string
	lines := strings.Split(controllerRBAC, "\n")
	skipping := false // the service account's optional annotations (default none)
	for i, line := range lines {
		if strings.Contains(line, ".Values.controller.serviceAccountAnnotations") {
			skipping = true
		}
		if skipping {
			skipping = !strings.Contains(line, "{{- end }}")
			continue
		}
		if strings.Contains(line, `include "sluice.labels"`) {
			continue
		}
		if strings.TrimSpace(line) == "labels:" && i+1 < len(lines) && strings.Contains(lines[i+1], `include "sluice.labels"`) {
			continue
		}
		keep = append(keep, line)
	}
	out := strings.ReplaceAll(strings.Join(keep, "\n"), "{{ .Release.Namespace }}", namespace)
	if i := strings.Index(out, "{{"); i >= 0 {
		return "", fmt.Errorf("templates/controller-rbac.yaml uses templating beyond the release namespace, labels and annotations: %q", out[i:min(len(out), i+40)])
	}
	return out, nil
}
