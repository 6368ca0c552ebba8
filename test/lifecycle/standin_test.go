package lifecycle

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// standIn plays the kubelet for the controller Deployment's one pod: it
// runs the binary the pod template's image tag names (bins), with the
// template's arguments, as the chart's service account, and when the
// template changes it starts the new pod, then stops the old one (SIGTERM,
// then SIGKILL after the template's grace period), as a rolling update with
// one replica does.
//
// Two rewrites make a process out of a pod: its metrics and health ports
// are turned off (each pod has its own network; processes on one machine
// do not), and --kubeconfig gives it the service account's token, which a
// pod would find mounted.
type standIn struct {
	t         *testing.T
	client    kubernetes.Interface
	namespace string
	bins      map[string]string // image tag → binary
	cfg       *rest.Config
	dir       string // each pod's log, shown when the test fails

	mu      sync.Mutex
	current *pod
	started []string // the pods started, in order
	seq     int
}

// pod is one run of the controller.
type pod struct {
	name, tag string
	cmd       *exec.Cmd
	done      chan struct{}
	log       *lockedBuffer
}

// startStandIn follows Deployment sluice-controller in namespace until the
// test ends.
func startStandIn(t *testing.T, client kubernetes.Interface, cfg *rest.Config, namespace string, bins map[string]string) *standIn {
	t.Helper()
	s := &standIn{t: t, client: client, cfg: cfg, namespace: namespace, bins: bins, dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.follow(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stop(s.current, 30*time.Second)
		s.current = nil
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s (last lines)\n%s", filepath.Base(l), tail(string(b), 30))
			}
		}
	})
	return s
}

// follow watches the Deployment and runs what its template says.
func (s *standIn) follow(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := s.client.AppsV1().Deployments(s.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=sluice-controller"})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Error {
				if ev.Type == watch.Deleted {
					d.Spec.Replicas = ptr.To[int32](0)
				}
				s.apply(ctx, d)
			}
		}
		w.Stop()
	}
}

// apply makes the running pod match the Deployment's template.
func (s *standIn) apply(ctx context.Context, d *appsv1.Deployment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	grace := time.Duration(ptr.Deref(d.Spec.Template.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
	if ptr.Deref(d.Spec.Replicas, 1) == 0 {
		s.stop(s.current, grace)
		s.current = nil
		return
	}
	c := d.Spec.Template.Spec.Containers[0]
	tag := c.Image[strings.LastIndex(c.Image, ":")+1:]
	args := runArgs(c.Args, s.kubeconfigFor(ctx, d.Spec.Template.Spec.ServiceAccountName))
	if s.current != nil && s.current.tag == tag && slices.Equal(s.current.cmd.Args[1:], args) {
		return
	}
	bin, ok := s.bins[tag]
	if !ok {
		s.t.Errorf("the Deployment runs image %s; the stand-in has binaries for tags %v only", c.Image, keys(s.bins))
		return
	}
	s.seq++
	p := &pod{name: fmt.Sprintf("sluice-controller-%s-%d", tag, s.seq), tag: tag, done: make(chan struct{})}
	file, err := os.Create(filepath.Join(s.dir, p.name+".log"))
	if err != nil {
		s.t.Error(err)
		return
	}
	p.log = &lockedBuffer{file: file}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "POD_NAME="+p.name, "POD_NAMESPACE="+s.namespace)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		s.t.Errorf("starting %s: %v", p.name, err)
		return
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	s.started = append(s.started, p.name)
	s.t.Logf("stand-in kubelet: started %s (%s)", p.name, bin)
	// The new pod starts before the old one stops; leader election keeps
	// one of them acting.
	old := s.current
	s.current = p
	if old != nil {
		time.Sleep(2 * time.Second)
		s.stop(old, grace)
	}
}

// stop sends p SIGTERM and, after grace, SIGKILL.
func (s *standIn) stop(p *pod, grace time.Duration) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		s.t.Logf("stand-in kubelet: %s did not stop within its grace period %s; killed", p.name, grace)
	}
	_ = p.log.file.Close()
	s.t.Logf("stand-in kubelet: stopped %s", p.name)
}

// running is the pod running now: its name and image tag.
func (s *standIn) running() (name, tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return "", ""
	}
	return s.current.name, s.current.tag
}

// leading waits until the stand-in runs a pod of image tag and that pod
// holds the controller's Lease; it returns the pod's name.
func (s *standIn) leading(t *testing.T, env *sandboxtest.Env, tag string) string {
	t.Helper()
	var name string
	env.WaitFor(t, 2*time.Minute, "a controller of "+tag+" leading", func(ctx context.Context) (bool, error) {
		var runs string
		name, runs = s.running()
		if runs != tag {
			return false, nil
		}
		lease, err := s.client.CoordinationV1().Leases(s.namespace).Get(ctx, "sluice-controller", metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		// client-go's resource lock writes "<identity>_<uuid>".
		holder, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
		return holder == name, nil
	})
	t.Logf("%s leads", name)
	return name
}

// logOf is everything pod name has logged.
func (s *standIn) logOf(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
	return string(b)
}

// kubeconfigFor writes a kubeconfig that authenticates as the service
// account (once per account): the pod holds what the release grants.
func (s *standIn) kubeconfigFor(ctx context.Context, account string) string {
	path := filepath.Join(s.dir, account+".kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	cfg, err := sandbox.AgentConfig(ctx, s.client, s.cfg, s.namespace, account, nil, time.Hour)
	if err != nil {
		s.t.Errorf("a token for service account %s: %v", account, err)
		return path
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["pod"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "pod"}
	kc.CurrentContext = "sandbox"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		s.t.Error(err)
	}
	return path
}

// runArgs are the container's arguments as a process on this machine runs
// them (see standIn).
func runArgs(container []string, kubeconfig string) []string {
	out := make([]string, 0, len(container)+2)
	for _, a := range container {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=0"
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=0"
		}
		out = append(out, a)
	}
	return append(out, "--kubeconfig="+kubeconfig)
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// lockedBuffer is a pod's log file, written by its process.
type lockedBuffer struct {
	mu   sync.Mutex
	file *os.File
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file.Write(p)
}
