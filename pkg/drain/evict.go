package drain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EvictWithUID evicts pod through the Eviction API only if the pod of that name
// is still the one given (same UID), with the given grace period. It is the
// request the drain makes for each pod; a 409 Conflict means the name now
// belongs to a new pod, which is left alone.
func EvictWithUID(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, graceSeconds int64) error {
	uid := pod.UID
	return client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{
			GracePeriodSeconds: &graceSeconds,
			Preconditions:      &metav1.Preconditions{UID: &uid},
		},
	})
}
