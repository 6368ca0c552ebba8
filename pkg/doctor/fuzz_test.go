package doctor

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "k8s.io/apimachinery/pkg/util/json"
)

// FuzzDiagnose runs doctor on a cluster decoded from arbitrary JSON: nodes,
// pods and budgets whose annotations, owners, resources, selectors and
// minAvailable/maxUnavailable any user could have written. Nothing may
// panic, and the report keeps its shape: errors first, counted right, on
// nodes of the cluster.
func FuzzDiagnose(f *testing.F) {
	for _, seed := range []string{
		`{"nodes": [{"metadata": {"name": "n1", "labels": {"kubernetes.azure.com/scalesetpriority": "spot"}}, "spec": {"unschedulable": true},
		   "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}},
		  {"metadata": {"name": "n2", "annotations": {"sluice.dev/cordoned-by": "maintenance/e1", "sluice.dev/maintenance": "{\"event\": \"e1\", \"type\": \"Redeploy\"}",
		   "maintenance.sluice.dev/events": "{\"source\": \"azure\", \"events\": []}"}}, "spec": {"unschedulable": true},
		   "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "30"}, "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletDown"}]}}],
		 "pods": [{"metadata": {"namespace": "shop", "name": "web-1", "labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": true}]},
		   "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 600, "containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
		     "volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/data"}}]}, "status": {"phase": "Running"}},
		  {"metadata": {"namespace": "shop", "name": "solo", "deletionTimestamp": "2026-11-21T08:00:00Z", "finalizers": ["x"],
		   "annotations": {"sluice.dev/do-not-disrupt": "true", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}, "spec": {"nodeName": "n1"}},
		  {"metadata": {"namespace": "kube-system", "name": "ds-1", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gone", "controller": true}]},
		   "spec": {"nodeName": "n2"}, "status": {"phase": "Pending"}}],
		 "pdbs": [{"metadata": {"namespace": "shop", "name": "web"}, "spec": {"minAvailable": "90%", "selector": {"matchLabels": {"app": "web"}}},
		   "status": {"expectedPods": 1, "desiredHealthy": 1, "currentHealthy": 1}},
		  {"metadata": {"namespace": "shop", "name": "all"}, "spec": {"maxUnavailable": 0, "selector": {}}},
		  {"metadata": {"namespace": "shop", "name": "bad"}, "spec": {"minAvailable": "x%", "selector": {"matchExpressions": [{"key": "app", "operator": "in"}]}}},
		  {"metadata": {"namespace": "shop", "name": "nosel"}, "spec": {"minAvailable": -3}}]}`,
		`{"nodes": [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "-1", "memory": "1e400", "pods": "0"}}}], "pods": [{"spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1e9"}}}]}}]}`,
		`{"nodes": [{}], "pods": [{}], "pdbs": [{}]}`, `{}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cluster struct {
			Nodes []corev1.Node                  `json:"nodes"`
			Pods  []corev1.Pod                   `json:"pods"`
			PDBs  []policyv1.PodDisruptionBudget `json:"pdbs"`
		}
		if kjson.Unmarshal(data, &cluster) != nil || len(cluster.Nodes)+len(cluster.Pods)+len(cluster.PDBs) > 50 {
			return
		}
		r := Diagnose(Input{Nodes: cluster.Nodes, Pods: cluster.Pods, PDBs: cluster.PDBs, Now: now})
		rank := map[Severity]int{SeverityError: 0, SeverityWarning: 1, SeverityInfo: 2}
		errors, warnings := 0, 0
		for i, f := range r.Findings {
			if _, known := rank[f.Severity]; !known || f.Code == "" || f.Message == "" || i > 0 && rank[r.Findings[i-1].Severity] > rank[f.Severity] {
				t.Fatalf("finding %d of %s: %+v", i, data, f)
			}
			if f.Node != "" && !slices.ContainsFunc(cluster.Nodes, func(n corev1.Node) bool { return n.Name == f.Node }) {
				t.Fatalf("finding on a node not in the cluster: %+v", f)
			}
			switch f.Severity {
			case SeverityError:
				errors++
			case SeverityWarning:
				warnings++
			}
		}
		if r.Errors != errors || r.Warnings != warnings {
			t.Fatalf("%s: %d errors, %d warnings counted as %d, %d", data, errors, warnings, r.Errors, r.Warnings)
		}
	})
}
