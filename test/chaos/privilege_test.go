package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// controllerNeeds is every permission the controller's service account
// holds, with the code that needs it. The chart grants these and nothing
// else: TestControllerLeastPrivilege fails on a grant missing here (remove it
// from the chart, or say here what needs it) and on a need the chart lacks.
// The chaos runs prove the other half: the controllers run as this account
// and no request of theirs may be forbidden.
var controllerNeeds = map[string][]string{
	// Watching nodes; cordon, claims, records and finalizers by patch; the
	// kwok provider creates a pool's nodes, updates one to lift its startup
	// taints, and deletes them.
	"nodes": {"create", "delete", "get", "list", "patch", "update", "watch"},
	// The drain engine's cache; delete only when evictions are disabled or a
	// deadline or terminationGracePeriod forces a pod out.
	"pods":          {"delete", "get", "list", "watch"},
	"pods/eviction": {"create"},
	// PDB arithmetic for the drain engine and the blockers it reports.
	"poddisruptionbudgets.policy": {"get", "list", "watch"},
	// Classifying a pod by its owner (DaemonSet pods stay; an owner that is
	// gone makes a pod unreplicated).
	"daemonsets.apps":             {"get", "list"},
	"replicasets.apps":            {"get", "list"},
	"statefulsets.apps":           {"get", "list"},
	"deployments.apps":            {"get", "list"},
	"events":                      {"create", "patch"},
	"nodepools.sluice.dev":        {"get", "list", "watch"},
	"nodepools.sluice.dev/status": {"patch"},
	// Leader election, in the controller's own namespace only.
	"leases.coordination.k8s.io": {"create", "get", "update"},
	// Each node's last drain timeline (server-side apply creates and
	// patches; the hourly pruning lists and deletes), in the controller's
	// own namespace only.
	"configmaps": {"create", "delete", "list", "patch"},
	// Without the cluster-api provider (as here), removing the pre-drain
	// hooks an earlier run with it left on Cluster API's Machines.
	"machines.cluster.x-k8s.io": {"list", "patch"},
}

// ownNamespaceOnly are the needs granted in the controller's namespace only.
var ownNamespaceOnly = []string{"leases.coordination.k8s.io", "configmaps"}

// everyoneMay is what every authenticated identity may do in a cluster
// (the system:basic-user and system:discovery roles).
var everyoneMay = []string{
	"selfsubjectaccessreviews.authorization.k8s.io",
	"selfsubjectrulesreviews.authorization.k8s.io",
	"selfsubjectreviews.authentication.k8s.io",
}

// TestControllerLeastPrivilege installs the chart's controller RBAC and asks
// the API server, as the controller's service account, what it may do: in
// its own namespace, and in another (no leases there).
func TestControllerLeastPrivilege(t *testing.T) {
	env := sandboxtest.New(t)
	poolClient(t, env) // installs the NodePool CRD, so its rules resolve
	kubectl := kubectlBinary(t)
	kubeconfig := controllerKubeconfig(t, env, env.Config.Host, nil)
	as := []string{"--kubeconfig", kubeconfig}

	for _, ns := range []string{controllerNamespace, env.Namespace} {
		out, err := exec.CommandContext(t.Context(), kubectl, append(as, "auth", "can-i", "--list", "-n", ns)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl auth can-i --list -n %s: %v\n%s", ns, err, out)
		}
		granted := parseCanI(t, string(out))
		for resource, verbs := range granted {
			if slices.Contains(everyoneMay, resource) {
				continue
			}
			want, known := controllerNeeds[resource]
			if slices.Contains(ownNamespaceOnly, resource) && ns != controllerNamespace {
				want, known = nil, false
			}
			if !known || !slices.Equal(verbs, want) {
				t.Errorf("in namespace %s the controller may %v %s; it needs %v", ns, verbs, resource, want)
			}
		}
		for resource, verbs := range controllerNeeds {
			if slices.Contains(ownNamespaceOnly, resource) && ns != controllerNamespace {
				continue
			}
			if got := granted[resource]; !slices.Equal(got, verbs) {
				t.Errorf("in namespace %s the controller needs %v on %s; the chart grants %v", ns, verbs, resource, got)
			}
		}
	}

	// What a stolen controller token must not reach, asked one by one.
	for _, q := range [][]string{
		{"get", "secrets", "-A"}, {"list", "secrets", "-A"}, {"create", "pods", "-A"},
		{"patch", "pods", "-A"}, {"update", "nodepools.sluice.dev"}, {"delete", "nodepools.sluice.dev"},
		{"create", "clusterrolebindings"}, {"impersonate", "serviceaccounts", "-A"},
		{"create", "serviceaccounts/token", "-A"}, {"patch", "nodes", "--subresource=status"}, {"delete", "namespaces"},
		{"update", "leases.coordination.k8s.io", "-n", "kube-system"},
	} {
		// The answer is on stdout; kubectl's warnings go to stderr.
		out, _ := exec.CommandContext(t.Context(), kubectl, append(append(as, "auth", "can-i"), q...)...).Output()
		if answer := strings.TrimSpace(string(out)); answer != "no" {
			t.Errorf("kubectl auth can-i %s as the controller: %q, want no", strings.Join(q, " "), answer)
		}
	}
}

// parseCanI reads `kubectl auth can-i --list`: resource -> sorted verbs,
// resource rules only.
func parseCanI(t *testing.T, out string) map[string][]string {
	t.Helper()
	granted := map[string][]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "Resources") {
		t.Fatalf("unexpected kubectl auth can-i --list output:\n%s", out)
	}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "[") {
			continue // a non-resource URL rule
		}
		open := strings.LastIndex(line, "[")
		verbs := strings.Fields(strings.Trim(line[open:], "[] "))
		if len(verbs) == 0 {
			continue
		}
		verbs = append(granted[fields[0]], verbs...)
		slices.Sort(verbs)
		granted[fields[0]] = slices.Compact(verbs)
	}
	return granted
}

func kubectlBinary(t *testing.T) string {
	t.Helper()
	dir, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(fmt.Errorf("the tools have no kubectl: %w", err))
	}
	return bin
}
