package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/test/bench/feed"
)

// The fleet's shape: every node holds podsPerNode pods (AKS's default
// maxPods with Azure CNI is 30, and the pools set it, so every node is full
// and consolidation, while it evaluates, finds nothing to move: the feed
// decides no evictions), three of them DaemonSet pods; the rest come from
// Deployments (four in five), StatefulSets and Jobs of the pool's teams.
const (
	fleetPools      = 100
	fleetNamespaces = 20
	fleetDaemonSets = 3
	fleetType       = "Standard_D8s_v5"
)

// fleet is a generated cluster held by a feed.
type fleet struct {
	nodes, pods, pdbs int
	pools             []*v1alpha1.NodePool
	largest           string // the name of the largest pool
}

// fleetPoolSizes splits nodes over the pools: the first holds a tenth of
// them, as a cluster's main pool does, the rest share what is left.
func fleetPoolSizes(nodes int) []int {
	sizes := make([]int, fleetPools)
	sizes[0] = nodes / 10
	rest := nodes - sizes[0]
	for i := 1; i < fleetPools; i++ {
		sizes[i] = rest / (fleetPools - 1)
		if i <= rest%(fleetPools-1) {
			sizes[i]++
		}
	}
	return sizes
}

func fleetPool(i int) *v1alpha1.NodePool {
	name := fmt.Sprintf("fleet-%03d", i)
	labels := map[string]string{"fleet.sluice.dev/pool": name, "team": fmt.Sprintf("team-%02d", i%fleetNamespaces)}
	pool := &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet.sluice.dev/pool": name}},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok, Kwok: &v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{}}},
			Template: &v1alpha1.NodeTemplate{Labels: labels, InstanceTypes: []string{fleetType}, Image: "AKSUbuntu-2204gen2containerd-202611.01.0",
				Kubelet: &v1alpha1.KubeletSpec{MaxPods: ptr.To(int32(podsPerNode))}},
			Disruption: &v1alpha1.DisruptionSpec{
				ConsolidationPolicy: v1alpha1.ConsolidateWhenEmptyOrUnderutilized, ConsolidateAfter: "30s", ExpireAfter: "720h",
				Budgets: []v1alpha1.Budget{{Nodes: "10%"},
					{Nodes: "0", Schedule: ptr.To("0 9 * * 1-5"), Duration: &metav1.Duration{Duration: 8 * time.Hour}, Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonUnderutilized}}},
			},
		},
	}
	if i%4 == 0 {
		pool.Spec.Repair = &v1alpha1.RepairSpec{}
	}
	return pool
}

// buildFleet fills srv with a cluster of n nodes: the pools, their nodes as
// the kwok provider registers them with the status a kubelet reports, the
// workloads with their controllers, pods and PodDisruptionBudgets as the API
// server holds them once the controllers have run.
func buildFleet(b *testing.B, srv *feed.Server, n int) *fleet {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fleet{nodes: n}
	var base []runtime.Object
	for i := range fleetNamespaces {
		base = append(base, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%02d", i)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
	}
	for _, ns := range []string{"kube-system", "monitoring", "logging"} {
		base = append(base, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
	}
	base = append(base, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "business-critical"}, Value: 100000})
	sizes := fleetPoolSizes(n)
	for i := range fleetPools {
		pool := fleetPool(i)
		f.pools = append(f.pools, pool)
		base = append(base, pool)
	}
	f.largest = f.pools[0].Name
	if err := srv.Add(base...); err != nil {
		b.Fatal(err)
	}

	// The nodes, made by the kwok provider through the feed as it makes them
	// through an API server.
	clientset, err := kubernetes.NewForConfig(srv.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	p := kwok.New(clientset, clock.RealClock{}, kwok.Options{Registered: true})
	go func() { _ = p.Run(ctx) }()
	for i, pool := range f.pools {
		for range sizes[i] {
			if _, err := p.Create(ctx, pool, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	var nodes []corev1.Node
	waitUntil(b, 5*time.Minute, fmt.Sprintf("%d nodes registered with the feed", n), func() bool {
		list, err := clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		nodes = list.Items
		return len(nodes) == n
	})
	cancel()
	byPool := map[string][]string{}
	for i := range nodes {
		node := &nodes[i]
		kubeletStatus(node)
		// As the controller leaves a node of a pool it runs the provider of.
		node.Finalizers = append(node.Finalizers, contract.FinalizerTermination)
		byPool[node.Labels[provider.LabelNodePool]] = append(byPool[node.Labels[provider.LabelNodePool]], node.Name)
		if err := srv.Add(node); err != nil {
			b.Fatal(err)
		}
	}

	var objs []runtime.Object
	for d, ds := range []struct{ ns, name, cpu string }{{"kube-system", "kube-proxy", "100m"}, {"monitoring", "node-exporter", "50m"}, {"logging", "fluent-bit", "50m"}}[:fleetDaemonSets] {
		objs = append(objs, daemonSetPods(ds.ns, ds.name, ds.cpu, d, nodes)...)
	}
	for i, pool := range f.pools {
		names := byPool[pool.Name]
		slices.Sort(names)
		objs = append(objs, poolWorkloads(pool, i, names)...)
	}
	for _, obj := range objs {
		switch obj.(type) {
		case *corev1.Pod:
			f.pods++
		case *policyv1.PodDisruptionBudget:
			f.pdbs++
		}
	}
	if err := srv.Add(objs...); err != nil {
		b.Fatal(err)
	}
	return f
}

// kubeletStatus gives a node what a kubelet reports: its conditions, its
// addresses and endpoint, and the images it has pulled.
func kubeletStatus(n *corev1.Node) {
	beat := metav1.NewTime(n.CreationTimestamp.Add(-time.Minute))
	for _, c := range []struct {
		t      corev1.NodeConditionType
		s      corev1.ConditionStatus
		reason string
	}{{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"}, {corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"}, {corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"}} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c.t, Status: c.s, Reason: c.reason,
			Message: "kubelet reports " + strings.ToLower(c.reason), LastHeartbeatTime: beat, LastTransitionTime: beat})
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.240.0.1"}, {Type: corev1.NodeHostName, Address: n.Name}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	n.Status.Phase = ""
	for i := range 24 {
		name := fmt.Sprintf("mcr.microsoft.com/oss/kubernetes/image-%02d", i)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{name + "@sha256:" + strings.Repeat("ab", 32), name + ":v1.34." + fmt.Sprint(i)},
			SizeBytes: int64(10_000_000 + i*1_000_000)})
	}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &beat,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{},"f:images":{},"f:nodeInfo":{}}}`)}}}
}

// daemonSetPods is one DaemonSet and its pod on every node, as its
// controller makes them: each pinned to its node by affinity, tolerating
// every taint.
func daemonSetPods(ns, name, cpu string, d int, nodes []corev1.Node) []runtime.Object {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("ds-%d", d)), Generation: 1},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(len(nodes)), CurrentNumberScheduled: int32(len(nodes)),
			NumberReady: int32(len(nodes)), NumberAvailable: int32(len(nodes)), UpdatedNumberScheduled: int32(len(nodes)), ObservedGeneration: 1}}
	objs := []runtime.Object{ds}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, UID: ds.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	for i := range nodes {
		p := fleetPod(ns, fmt.Sprintf("%s-%s", name, suffix(i, 5)), nodes[i].Name, owner,
			map[string]string{"app": name, "controller-revision-hash": "6f9c7d8b4", "pod-template-generation": "1"}, cpu, "64Mi", 1, i)
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodes[i].Name}}}}}}}}
		p.Spec.PriorityClassName, p.Spec.Priority = "system-node-critical", ptr.To(int32(2000001000))
		objs = append(objs, p)
	}
	return objs
}

// poolWorkloads fills the pool's nodes with its team's workloads: per
// node, podsPerNode less the DaemonSets' pods.
func poolWorkloads(pool *v1alpha1.NodePool, i int, nodes []string) []runtime.Object {
	ns := pool.Spec.Template.Labels["team"]
	slots := len(nodes) * (podsPerNode - fleetDaemonSets)
	var objs []runtime.Object
	next := 0
	place := func() string { node := nodes[next%len(nodes)]; next++; return node }
	w := 0
	for slots > 0 {
		kind, replicas := "Deployment", 20
		switch w % 10 {
		case 8:
			kind, replicas = "StatefulSet", 5
		case 9:
			kind, replicas = "Job", 5
		}
		replicas = min(replicas, slots)
		slots -= replicas
		name := fmt.Sprintf("%s-%s-%03d", strings.TrimPrefix(pool.Name, "fleet-"), strings.ToLower(kind[:3]), w)
		objs = append(objs, workload(ns, name, kind, replicas, i*1000+w, pool, place)...)
		w++
	}
	return objs
}

// workload is one controller of kind with its pods (and, for a Deployment,
// its ReplicaSet), and the PodDisruptionBudget a Deployment or StatefulSet
// has.
func workload(ns, name, kind string, replicas, seq int, pool *v1alpha1.NodePool, place func() string) []runtime.Object {
	uid := types.UID(fmt.Sprintf("w-%d", seq))
	labels := map[string]string{"app": name, "app.kubernetes.io/name": name, "app.kubernetes.io/part-of": pool.Spec.Template.Labels["team"]}
	var (
		objs  []runtime.Object
		owner metav1.OwnerReference
	)
	// What the pool's nodes hold (27 such pods, a tenth of them a
	// StatefulSet's) stays within a Standard_D8s_v5's allocatable, as the
	// scheduler would have kept it.
	cpu, mem := "150m", "384Mi"
	switch kind {
	case "Deployment":
		hash := fmt.Sprintf("%x", 0x5d8f7c6b9+seq)
		rs := name + "-" + hash
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Generation: 1, Labels: labels},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: int32(replicas), ReadyReplicas: int32(replicas), AvailableReplicas: int32(replicas), UpdatedReplicas: int32(replicas)}},
			&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rs, UID: uid + "-rs", Generation: 1,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: uid, Controller: ptr.To(true)}}},
				Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name, "pod-template-hash": hash}}},
				Status: appsv1.ReplicaSetStatus{Replicas: int32(replicas), ReadyReplicas: int32(replicas), AvailableReplicas: int32(replicas), ObservedGeneration: 1}})
		owner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: uid + "-rs", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
		labels = withLabel(labels, "pod-template-hash", hash)
	case "StatefulSet":
		cpu, mem = "500m", "1Gi"
		objs = append(objs, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Generation: 1},
			Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, ServiceName: name},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: int32(replicas), ReadyReplicas: int32(replicas), AvailableReplicas: int32(replicas)}})
		owner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	case "Job":
		cpu, mem = "100m", "256Mi"
		objs = append(objs, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Generation: 1},
			Spec:   batchv1.JobSpec{Parallelism: ptr.To(int32(replicas)), Completions: ptr.To(int32(replicas * 4))},
			Status: batchv1.JobStatus{Active: int32(replicas)}})
		owner = metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
		labels = withLabel(withLabel(labels, "batch.kubernetes.io/job-name", name), "batch.kubernetes.io/controller-uid", string(uid))
	}
	for r := range replicas {
		podName, podLabels := name+"-"+suffix(seq*100+r, 5), labels
		if kind == "StatefulSet" {
			podName = fmt.Sprintf("%s-%d", name, r)
			podLabels = withLabel(withLabel(labels, "statefulset.kubernetes.io/pod-name", podName), "apps.kubernetes.io/pod-index", fmt.Sprint(r))
		}
		p := fleetPod(ns, podName, place(), owner, podLabels, cpu, mem, 1+seq%2, seq*100+r)
		p.Spec.NodeSelector = map[string]string{"fleet.sluice.dev/pool": pool.Name}
		switch kind {
		case "StatefulSet":
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + podName}}})
			p.Spec.PriorityClassName, p.Spec.Priority = "business-critical", ptr.To(int32(100000))
		case "Job":
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		default:
			if seq%3 == 0 {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}}}}
			}
		}
		objs = append(objs, p)
	}
	if kind != "Job" {
		budget := intstr.FromString("25%")
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &budget, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: int32(replicas), CurrentHealthy: int32(replicas),
				DesiredHealthy: int32(replicas - (replicas+3)/4), DisruptionsAllowed: int32((replicas + 3) / 4),
				Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason, ObservedGeneration: 1}}}}
		objs = append(objs, pdb)
	}
	return objs
}

// fleetPod is a pod as the API server holds it once it runs: the defaults
// admission and the API server add (service account token volume, the
// not-ready and unreachable tolerations, termination message paths, pull
// policy, DNS policy, scheduler), the manager entries, and the status a
// kubelet writes.
func fleetPod(ns, name, node string, owner metav1.OwnerReference, labels map[string]string, cpu, mem string, containers, seq int) *corev1.Pod {
	started := metav1.NewTime(time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC).Add(time.Duration(seq%3600) * time.Second))
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, GenerateName: strings.TrimRight(name, "0123456789abcdefghijklmnopqrstuvwxyz")[:max(1, len(name)-5)],
			UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", seq, seq)), Labels: labels, CreationTimestamp: started,
			Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{owner},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &started, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{},"f:ownerReferences":{}},"f:spec":{"f:containers":{},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &started, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", SecurityContext: &corev1.PodSecurityContext{},
			TerminationGracePeriodSeconds: ptr.To(int64(30)), EnableServiceLinks: ptr.To(true), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), Priority: ptr.To(int32(0)),
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-" + suffix(seq, 5), VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To(int32(420)), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}}}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, HostIP: "10.240.0.1", PodIP: fmt.Sprintf("10.244.%d.%d", seq/250%250, seq%250+2), StartTime: &started,
			HostIPs: []corev1.HostIP{{IP: "10.240.0.1"}}, PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", seq/250%250, seq%250+2)}}},
	}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: started})
	}
	for c := range containers {
		cname := []string{"app", "istio-proxy"}[c]
		if c > 0 {
			// A sidecar asks for little.
			requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: cname, Image: fmt.Sprintf("registry.example.com/%s/%s:1.%d.0", ns, cname, seq%7), ImagePullPolicy: corev1.PullIfNotPresent,
			Args:  []string{"--port=8080", "--log-level=info"},
			Env:   []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}, {Name: "LOG_FORMAT", Value: "json"}},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{Requests: requests,
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
				PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
				PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-" + suffix(seq, 5), ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
			TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: cname, Ready: true, Started: ptr.To(true),
			Image: p.Spec.Containers[c].Image, ImageID: p.Spec.Containers[c].Image + "@sha256:" + strings.Repeat("cd", 32),
			ContainerID: fmt.Sprintf("containerd://%064x", seq*4+c), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}})
	}
	return p
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
}

// suffix is a generated name's random-looking tail, n letters long.
func suffix(i, n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	out := make([]byte, n)
	x := uint64(i)*2654435761 + 97
	for j := range out {
		out[j] = alphabet[x%uint64(len(alphabet))]
		x /= uint64(len(alphabet))
		x += uint64(j) * 7919
	}
	return string(out)
}
