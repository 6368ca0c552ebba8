package disruption_test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// t0 is when the tests' nodes are created and their pods start.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type nodeOpt func(*corev1.Node)

// node is a node created at t0, changed by opts.
func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func label(k, v string) nodeOpt {
	return func(n *corev1.Node) { metav1.SetMetaDataLabel(&n.ObjectMeta, k, v) }
}

func annotate(k, v string) nodeOpt {
	return func(n *corev1.Node) { metav1.SetMetaDataAnnotation(&n.ObjectMeta, k, v) }
}

func tainted(k, v string, e corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: e}) }
}

func created(at time.Time) nodeOpt {
	return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(at) }
}

func deleting(n *corev1.Node) {
	at := metav1.NewTime(t0)
	n.DeletionTimestamp = &at
	n.Finalizers = []string{"sluice.dev/termination"}
}

type podOpt func(*corev1.Pod)

// pod is a running pod that started at t0, changed by opts.
func pod(namespace, name string, opts ...podOpt) *corev1.Pod {
	started := metav1.NewTime(t0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func podAnnotated(k, v string) podOpt {
	return func(p *corev1.Pod) { metav1.SetMetaDataAnnotation(&p.ObjectMeta, k, v) }
}

func inPhase(phase corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = phase }
}

func notStarted(p *corev1.Pod) {
	p.Status.Phase, p.Status.StartTime = corev1.PodPending, nil
}

func terminating(p *corev1.Pod) {
	at := metav1.NewTime(t0)
	p.DeletionTimestamp = &at
}

type poolOpt func(*v1alpha1.NodePool)

func nodePool(opts ...poolOpt) *v1alpha1.NodePool {
	p := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func paused(p *v1alpha1.NodePool) { p.Spec.Disruption = &v1alpha1.DisruptionSpec{Paused: true} }

func poolAnnotated(k, v string) poolOpt {
	return func(p *v1alpha1.NodePool) { metav1.SetMetaDataAnnotation(&p.ObjectMeta, k, v) }
}

func expireAfter(d string) poolOpt {
	return func(p *v1alpha1.NodePool) { p.Spec.Disruption = &v1alpha1.DisruptionSpec{ExpireAfter: d} }
}

func template(t *v1alpha1.NodeTemplate) poolOpt {
	return func(p *v1alpha1.NodePool) { p.Spec.Template = t }
}
