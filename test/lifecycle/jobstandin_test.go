package lifecycle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// jobRun is what the stand-in kubelet did for one pod of the hook's Job.
type jobRun struct {
	pod    string
	output string
	err    error
}

// playJobs plays the kubelet for the pods of Job name (the chart's
// pre-delete hook) until the test ends: for each pod that lands, it runs the
// binary its image tag names with the container's arguments, as the pod's
// service account, then reports the pod Succeeded or Failed by the exit
// code, as a kubelet would, so the Job controller completes the Job and
// Helm goes on.
func (s *standIn) playJobs(t *testing.T, name string) func() []jobRun {
	t.Helper()
	var (
		mu   sync.Mutex
		runs []jobRun
		seen = map[string]bool{}
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := s.client.CoreV1().Pods(s.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted || seen[p.Name] || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
					continue
				}
				seen[p.Name] = true
				r := s.runPod(ctx, p)
				mu.Lock()
				runs = append(runs, r)
				mu.Unlock()
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []jobRun {
		mu.Lock()
		defer mu.Unlock()
		return append([]jobRun(nil), runs...)
	}
}

// runPod runs the pod's one container to its end and writes the pod's
// status as its kubelet would.
func (s *standIn) runPod(ctx context.Context, p *corev1.Pod) jobRun {
	c := p.Spec.Containers[0]
	tag := c.Image[strings.LastIndex(c.Image, ":")+1:]
	r := jobRun{pod: p.Name}
	bin, ok := s.bins[tag]
	if !ok {
		s.t.Errorf("pod %s runs image %s; the stand-in has binaries for tags %v only", p.Name, c.Image, keys(s.bins))
		return r
	}
	args := append(append([]string(nil), c.Args...), "--kubeconfig="+s.kubeconfigFor(ctx, p.Spec.ServiceAccountName))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "POD_NAME="+p.Name, "POD_NAMESPACE="+s.namespace)
	started := metav1.Now()
	out, err := cmd.CombinedOutput()
	r.output, r.err = string(out), err
	_ = os.WriteFile(filepath.Join(s.dir, p.Name+".log"), out, 0o644)
	s.t.Logf("stand-in kubelet: pod %s ran %s: %v", p.Name, strings.Join(c.Args, " "), err)

	phase, code, reason := corev1.PodSucceeded, int32(0), "Completed"
	if err != nil {
		phase, code, reason = corev1.PodFailed, 1, "Error"
		if cmd.ProcessState != nil {
			code = int32(cmd.ProcessState.ExitCode())
		}
	}
	fresh, err := s.client.CoreV1().Pods(s.namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		s.t.Errorf("reading pod %s to end it: %v", p.Name, err)
		return r
	}
	fresh.Status.Phase = phase
	fresh.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: metav1.Now()}}}}
	for i := range fresh.Status.Conditions {
		if fresh.Status.Conditions[i].Type == corev1.PodReady || fresh.Status.Conditions[i].Type == corev1.ContainersReady {
			fresh.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := s.client.CoreV1().Pods(s.namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		s.t.Errorf("ending pod %s: %v", p.Name, err)
	}
	return r
}
