// Package kube holds the small pieces of Kubernetes plumbing sluice's commands
// share: client construction from kubeconfig flags and an event recorder.
package kube

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
)

// Recorder writes Kubernetes Events synchronously, one request each, so a
// short-lived command loses none when it exits (client-go's broadcaster
// queues them and may drop the tail). Node events go to the default
// namespace, where `kubectl describe node` finds them, as the kubelet's do.
type Recorder struct {
	client    kubernetes.Interface
	clock     clock.PassiveClock
	component string
	instance  string
	timeout   time.Duration
}

var _ record.EventRecorder = (*Recorder)(nil)

// NewRecorder returns a Recorder that signs its events as component.
func NewRecorder(client kubernetes.Interface, clk clock.PassiveClock, component string) *Recorder {
	host, _ := os.Hostname()
	return &Recorder{client: client, clock: clk, component: component, instance: host, timeout: 5 * time.Second}
}

// Event records an event; errors are dropped, as events are best effort.
func (r *Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	ref, err := reference.GetReference(scheme.Scheme, obj)
	if err != nil {
		return
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.NewTime(r.clock.Now())
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x%s", ref.Name, now.UnixNano(), utilrand.String(4))},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		Type:                eventtype,
		Source:              corev1.EventSource{Component: r.component, Host: r.instance},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: contract.Prefix + r.component,
		ReportingInstance:   r.instance,
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	_, _ = r.client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
}

// Eventf records a formatted event.
func (r *Recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf records a formatted event; annotations are not kept.
func (r *Recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Eventf(obj, eventtype, reason, messageFmt, args...)
}
