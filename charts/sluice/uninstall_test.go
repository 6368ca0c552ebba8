package chart

import (
	"reflect"
	"slices"
	"testing"
)

// helm uninstall runs `sluice uninstall` first: a pre-delete hook Job, with
// its own identity made just before it (a lower hook weight), allowed to
// scale only sluice's Deployment, delete only sluice's DaemonSet, and update
// nodes; every hook object is removed once it succeeded. Off with
// uninstallHook.enabled=false.
func TestUninstallHook(t *testing.T) {
	objs := objects(t, helm(t, "template", "sluice", ".", "-n", "sluice-system"))
	job := objs["Job/sluice-uninstall"]
	if job == nil {
		t.Fatal("no Job sluice-uninstall rendered by default")
	}
	containers := at(job, "spec", "template", "spec", "containers").([]any)
	if args := at(containers[0], "args"); !reflect.DeepEqual(args, []any{"uninstall", "--namespace=sluice-system"}) {
		t.Errorf("the hook runs %v; want sluice uninstall --namespace=sluice-system", args)
	}
	if sa := at(job, "spec", "template", "spec", "serviceAccountName"); sa != "sluice-uninstall" {
		t.Errorf("the hook runs as %v; want sluice-uninstall", sa)
	}
	for _, key := range []string{"ServiceAccount/sluice-uninstall", "ClusterRole/sluice-uninstall", "ClusterRoleBinding/sluice-uninstall",
		"Role/sluice-uninstall", "RoleBinding/sluice-uninstall", "Job/sluice-uninstall"} {
		o := objs[key]
		if o == nil {
			t.Errorf("%s not rendered", key)
			continue
		}
		a, _ := at(o, "metadata", "annotations").(map[string]any)
		weight := "-10"
		if key == "Job/sluice-uninstall" {
			weight = "0"
		}
		if a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-weight"] != weight || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s annotations %v; want a pre-delete hook of weight %s, deleted once it succeeded", key, a, weight)
		}
	}
	if rules := at(objs["ClusterRole/sluice-uninstall"], "rules"); !reflect.DeepEqual(rules, []any{
		map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes"}, "verbs": []any{"get", "list", "update"}},
		map[string]any{"apiGroups": []any{"cluster.x-k8s.io"}, "resources": []any{"machines"}, "verbs": []any{"list", "patch"}},
	}) {
		t.Errorf("the hook's ClusterRole rules = %v; want nodes get, list, update and Cluster API machines list, patch only", rules)
	}
	for _, r := range at(objs["Role/sluice-uninstall"], "rules").([]any) {
		res := at(r, "resources").([]any)
		if slices.Contains(res, any("deployments")) || slices.Contains(res, any("daemonsets")) {
			if names, _ := at(r, "resourceNames").([]any); len(names) != 1 {
				t.Errorf("the hook may change %v of any name; want only sluice's own", res)
			}
		}
	}

	off := objects(t, helm(t, "template", "sluice", ".", "-n", "sluice-system", "--set", "uninstallHook.enabled=false"))
	for key := range off {
		if slices.Contains([]string{"Job/sluice-uninstall", "ClusterRole/sluice-uninstall"}, key) {
			t.Errorf("%s rendered with uninstallHook.enabled=false", key)
		}
	}
}
