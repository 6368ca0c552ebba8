package controller

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// templatePod is a pod as the API server would hand it over: each one
// decoded afresh, so nothing in it is shared with any other.
func templatePod(name, hash, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop",
			Labels:          map[string]string{"app": "web", "pod-template-hash": hash},
			Annotations:     map[string]string{"prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-" + hash, UID: types.UID("u-web-" + hash), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "node-1", SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
			Containers: []corev1.Container{{Name: "app", Image: "web:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func strip(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := stripPod(p)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod)
}

func same(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Pods of one template share their labels, annotations, owners,
// tolerations and requests; pods that differ keep their own, and every pod
// still reads exactly what it was given.
func TestStrippedPodsOfOneTemplateShareWhatTheyHoldAlike(t *testing.T) {
	podValues = &sharer{values: map[string]any{}}
	a, b := strip(t, templatePod("web-1", "abc", "100m")), strip(t, templatePod("web-2", "abc", "100m"))
	for what, pair := range map[string][2]any{
		"labels":      {a.Labels, b.Labels},
		"annotations": {a.Annotations, b.Annotations},
		"owners":      {a.OwnerReferences, b.OwnerReferences},
		"tolerations": {a.Spec.Tolerations, b.Spec.Tolerations},
		"requests":    {a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests},
		"containers":  {a.Spec.Containers, b.Spec.Containers},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s: two pods of one template keep two copies", what)
		}
	}
	c := strip(t, templatePod("web-3", "def", "200m"))
	if same(a.Labels, c.Labels) || same(a.OwnerReferences, c.OwnerReferences) || same(a.Spec.Containers[0].Resources.Requests, c.Spec.Containers[0].Resources.Requests) {
		t.Error("pods of another template share the first template's labels, owners or requests")
	}
	if !same(a.Annotations, c.Annotations) || !same(a.Spec.Tolerations, c.Spec.Tolerations) {
		t.Error("annotations and tolerations equal across templates are not shared")
	}
	for _, p := range []*corev1.Pod{a, b, c} {
		want := strip(t, templatePod(p.Name, p.Labels["pod-template-hash"], p.Spec.Containers[0].Resources.Requests.Cpu().String()))
		if !equality.Semantic.DeepEqual(p, want) {
			t.Errorf("pod %s reads differently once shared", p.Name)
		}
	}
	if got := c.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "200m" {
		t.Errorf("web-3 requests %s, want 200m", got)
	}
}

// Past its limit the sharer forgets what it kept, and goes on sharing.
func TestSharerForgetsPastItsLimit(t *testing.T) {
	podValues = &sharer{values: map[string]any{}}
	for i := range shareLimit + 10 {
		strip(t, templatePod(fmt.Sprintf("p-%d", i), fmt.Sprintf("h%d", i), "100m"))
	}
	if n := len(podValues.values); n > shareLimit {
		t.Fatalf("the sharer keeps %d values, more than its limit %d", n, shareLimit)
	}
	a, b := strip(t, templatePod("x-1", "late", "100m")), strip(t, templatePod("x-2", "late", "100m"))
	if !same(a.Labels, b.Labels) {
		t.Error("after forgetting, pods of one template no longer share")
	}
}
