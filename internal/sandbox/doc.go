// Package sandbox runs a real Kubernetes control plane on 127.0.0.1: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, with kwok playing
// the kubelets. It exists so that sluice is tested against the API server's own
// rules (eviction and PodDisruptionBudget arithmetic, the controllers that
// recreate pods, the scheduler that places them) rather than a fake clientset.
//
// Every component talks TLS verified against a CA generated per sandbox, RBAC
// is on, and every child process is killed when the process that started it
// dies, so a panicking test never leaves an etcd behind.
package sandbox
