package sandbox

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// waitSettled waits until the controllers a test relies on have done their
// first work: the default ServiceAccount exists (pods are refused without one)
// and the built-in PriorityClasses are there.
func (s *Sandbox) waitSettled(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(s.restConfig)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := s.Err(); err != nil {
			return false, err
		}
		if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		if _, err := client.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the controllers to settle: %w", err)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
