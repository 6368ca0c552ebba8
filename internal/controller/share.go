package controller

import (
	"encoding/json"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
)

// sharer lets the cached pods of one template share what they hold alike,
// instead of each keeping its own copy as the decoder made it: the labels
// and annotations, the owner references, the tolerations, node selector,
// affinity, spread constraints and volumes, the slimmed container lists and
// the statuses of containers that run well, and the short strings
// (namespace, node, scheduler, container names). What is left per pod is
// its own: its name, UID, times, Ready condition and the Pod struct itself.
//
// It is safe because nothing writes into a cached object: the cache's
// objects are shared already (every reader copies before it changes one),
// so two pods sharing a map is no different from two readers sharing a pod.
//
// What it remembers is bounded: past shareLimit distinct values it forgets
// them all and starts over (pods already cached keep what they share), so
// values unique to one pod, such as a StatefulSet pod's name label, cannot
// make it grow without end.
type sharer struct {
	mu     sync.Mutex
	values map[string]any
}

// shareLimit bounds what the sharer remembers. At 150,000 pods a tenth of
// them (a StatefulSet's, each with its own name label and claim) hold values
// of their own: the limit leaves room for those and the templates' values
// alike, about 10 MB of keys.
const shareLimit = 100000

var podValues = &sharer{values: map[string]any{}}

// share returns the value already kept that encodes as v does, keeping v
// when there is none. kind keeps values of different types apart.
func share[T any](s *sharer, kind string, v T) T {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	key := kind + "\x00" + string(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.values[key].(T); ok {
		return kept
	}
	if len(s.values) >= shareLimit {
		clear(s.values)
	}
	s.values[key] = v
	return v
}

// str returns the one copy of s the process keeps.
func str(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// sharePod points p's repeated parts at the copies other pods already hold.
// p must be a fresh object no one else has seen (stripPod's copy).
func (s *sharer) sharePod(p *corev1.Pod) {
	m := &p.ObjectMeta
	m.Namespace = str(m.Namespace)
	if len(m.Labels) > 0 {
		m.Labels = share(s, "labels", m.Labels)
	}
	if len(m.Annotations) > 0 {
		m.Annotations = share(s, "annotations", m.Annotations)
	}
	if len(m.OwnerReferences) > 0 {
		m.OwnerReferences = share(s, "owners", m.OwnerReferences)
	}
	spec := &p.Spec
	spec.NodeName, spec.SchedulerName, spec.PriorityClassName = str(spec.NodeName), str(spec.SchedulerName), str(spec.PriorityClassName)
	if len(spec.Tolerations) > 0 {
		spec.Tolerations = share(s, "tolerations", spec.Tolerations)
	}
	if len(spec.NodeSelector) > 0 {
		spec.NodeSelector = share(s, "nodeSelector", spec.NodeSelector)
	}
	if spec.Affinity != nil {
		spec.Affinity = share(s, "affinity", spec.Affinity)
	}
	if len(spec.TopologySpreadConstraints) > 0 {
		spec.TopologySpreadConstraints = share(s, "spread", spec.TopologySpreadConstraints)
	}
	if len(spec.Volumes) > 0 {
		spec.Volumes = share(s, "volumes", spec.Volumes)
	}
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			cs[i].Name = str(cs[i].Name)
			if len(cs[i].Resources.Requests) > 0 {
				cs[i].Resources.Requests = share(s, "requests", cs[i].Resources.Requests)
			}
		}
	}
	// Whole container lists, once slimmed, are alike across a template's
	// pods; so are the statuses of containers that run well.
	if len(spec.Containers) > 0 {
		spec.Containers = share(s, "containers", spec.Containers)
	}
	if len(spec.InitContainers) > 0 {
		spec.InitContainers = share(s, "initContainers", spec.InitContainers)
	}
	st := &p.Status
	if len(st.ContainerStatuses) > 0 {
		st.ContainerStatuses = share(s, "statuses", st.ContainerStatuses)
	}
	if len(st.InitContainerStatuses) > 0 {
		st.InitContainerStatuses = share(s, "initStatuses", st.InitContainerStatuses)
	}
}
