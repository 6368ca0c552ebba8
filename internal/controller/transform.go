package controller

import (
	corev1 "k8s.io/api/core/v1"
)

// stripPod drops what sluice never reads of a pod before the cache keeps it,
// so the controller's memory stays flat however large the pods' specs are:
// managed fields, the last-applied annotation, each container's command,
// environment, mounts and liveness/lifecycle hooks, and the runtime's IDs.
// Kept: metadata, owners, volumes (emptyDir), priority, grace period, node,
// resources, readiness and startup probes (how long a start may take), and
// the status a drain and its diagnosis read.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	delete(p.Annotations, corev1.LastAppliedConfigAnnotation)
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			c := &cs[i]
			c.Command, c.Args, c.Env, c.EnvFrom, c.VolumeMounts, c.VolumeDevices = nil, nil, nil, nil, nil, nil
			c.LivenessProbe, c.Lifecycle, c.SecurityContext, c.WorkingDir = nil, nil, nil, ""
		}
	}
	p.Spec.EphemeralContainers = nil
	for _, ss := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range ss {
			s := &ss[i]
			s.ImageID, s.ContainerID, s.LastTerminationState = "", "", corev1.ContainerState{}
			s.AllocatedResources, s.Resources, s.VolumeMounts, s.User, s.AllocatedResourcesStatus = nil, nil, nil, nil, nil
		}
	}
	return p, nil
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
