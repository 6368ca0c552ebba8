package controller

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripPod replaces a pod, before the cache keeps it, with a copy holding
// only what sluice reads, so the controller's memory stays flat however
// large the pods' specs are (at 30,000 pods every kilobyte a pod keeps is
// 30 MB). Kept: metadata without managed fields or the last-applied
// annotation; of the spec, the node, priority, grace period, what placement
// needs (resources, host ports, node selector, affinity, tolerations, spread
// constraints, overhead), the volumes that hold data (emptyDir, claims,
// ephemeral; not projected tokens, secrets or config maps), and each
// container's name, resources, readiness and startup probes (how long a
// start may take) and restart policy (sidecars); of the status, what a drain
// and its diagnosis read (phase, the Ready, ContainersReady, PodScheduled and
// DisruptionTarget conditions, each container's readiness, restarts and why
// it waits). Dropped: commands, environment, mounts, images, security
// contexts, what probes ask (their timing stays), liveness and lifecycle
// hooks, IPs, the runtime's IDs, container start times.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	meta := p.ObjectMeta
	meta.ManagedFields, meta.GenerateName = nil, ""
	if _, ok := meta.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		meta.Annotations = maps.Clone(meta.Annotations)
		delete(meta.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: meta}
	spec, in := &out.Spec, &p.Spec
	spec.NodeName, spec.Priority, spec.PriorityClassName = in.NodeName, in.Priority, in.PriorityClassName
	spec.TerminationGracePeriodSeconds, spec.RestartPolicy, spec.SchedulerName = in.TerminationGracePeriodSeconds, in.RestartPolicy, in.SchedulerName
	spec.NodeSelector, spec.Affinity, spec.Tolerations = in.NodeSelector, in.Affinity, in.Tolerations
	spec.TopologySpreadConstraints, spec.Overhead, spec.HostNetwork = in.TopologySpreadConstraints, in.Overhead, in.HostNetwork
	spec.Containers, spec.InitContainers = slimContainers(in.Containers), slimContainers(in.InitContainers)
	for _, v := range in.Volumes {
		if v.EmptyDir != nil || v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				EmptyDir: v.EmptyDir, PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral}})
		}
	}
	st, ins := &out.Status, &p.Status
	st.Phase, st.Reason, st.Message, st.StartTime = ins.Phase, ins.Reason, ins.Message, ins.StartTime
	for _, c := range ins.Conditions {
		if keep, ok := keptConditions[c.Type]; ok && (keep == "" || c.Status != keep) {
			c.LastProbeTime = metav1.Time{}
			st.Conditions = append(st.Conditions, c)
		}
	}
	st.NominatedNodeName = ins.NominatedNodeName
	st.ContainerStatuses, st.InitContainerStatuses = slimStatuses(ins.ContainerStatuses), slimStatuses(ins.InitContainerStatuses)
	podValues.sharePod(out)
	return out, nil
}

// keptConditions are the pod conditions sluice reads, each kept unless
// its status is the one given: whether the pod counts as healthy for its
// budget (Ready, and since when), whether the scheduler could not place it
// (PodScheduled, read only when False), and whether something is already
// disrupting it (DisruptionTarget).
var keptConditions = map[corev1.PodConditionType]corev1.ConditionStatus{
	corev1.PodReady: "", corev1.PodScheduled: corev1.ConditionTrue, corev1.DisruptionTarget: "",
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		// Placement counts requests; limits and claims decide nothing here.
		out[i] = corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests},
			ReadinessProbe: probeTiming(c.ReadinessProbe), StartupProbe: probeTiming(c.StartupProbe), RestartPolicy: c.RestartPolicy}
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				out[i].Ports = append(out[i].Ports, port)
			}
		}
	}
	return out
}

// probeTiming is what sluice reads of a probe: how long it may take to
// pass (a start's allowance), not what it asks.
func probeTiming(p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	return &corev1.Probe{InitialDelaySeconds: p.InitialDelaySeconds, TimeoutSeconds: p.TimeoutSeconds, PeriodSeconds: p.PeriodSeconds,
		SuccessThreshold: p.SuccessThreshold, FailureThreshold: p.FailureThreshold}
}

// slimStatuses keeps of each container's status its readiness, restarts,
// and why it waits (a crash loop, an image that will not pull); when it
// started or how it ended is read nowhere. Pods that run well then all hold
// the same statuses, which the sharer keeps once.
func slimStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, Started: s.Started, RestartCount: s.RestartCount}
		if w := s.State.Waiting; w != nil {
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason}
		}
	}
	return out
}

// stripNode drops a node's image list (often the largest part of it), its
// managed fields and last-applied annotation.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	delete(n.Annotations, corev1.LastAppliedConfigAnnotation)
	n.Status.Images = nil
	return n, nil
}
