package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

const (
	controllerNamespace = "sluice-system"
	controllerAccount   = "sluice-controller"
	leaseName           = "sluice-controller-chaos"
)

// controllerKubeconfig installs the chart's controller RBAC and writes a
// kubeconfig that authenticates as its service account, reaching the API
// server at server (the sandbox's, or a proxy's): the controllers under test
// hold exactly the permissions the chart grants, and a missing one fails the
// run. ca is the PEM certificate server presents; nil: the sandbox's.
func controllerKubeconfig(t *testing.T, env *sandboxtest.Env, server string, ca []byte) string {
	t.Helper()
	rbac, err := chart.ControllerRBAC(controllerNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ns := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + controllerNamespace + "\n---\n"
	if err := sandbox.ApplyManifests(t.Context(), env.Config, ns+rbac); err != nil {
		t.Fatalf("installing the chart's controller RBAC: %v", err)
	}
	cfg, err := sandbox.AgentConfig(t.Context(), env.Client, env.Config, controllerNamespace, controllerAccount, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return writeKubeconfig(t, cfg, server, ca)
}

func writeKubeconfig(t *testing.T, cfg *rest.Config, server string, ca []byte) string {
	t.Helper()
	cluster := &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	if ca != nil {
		cluster.CertificateAuthorityData, cluster.CertificateAuthority = ca, ""
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = cluster
	kc.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "controller"}
	kc.CurrentContext = "sandbox"
	path := filepath.Join(t.TempDir(), "controller.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// fleet runs two `sluice controller` processes with leader election and
// SIGKILLs one every 5–15 s, chosen by a seeded random source: the leader
// (read from the Lease) three times in four.
type fleet struct {
	t          *testing.T
	bin        string
	kubeconfig string
	extra      []string // more flags for every replica
	// secrets are cloud credentials in every replica's environment: no
	// log line may hold one (checkNoSecrets).
	secrets map[string]string
	client  kubernetes.Interface
	rng     *rand.Rand

	// dir keeps each controller's log, left behind when the test fails.
	dir string

	mu       sync.Mutex
	procs    map[string]*proc
	logs     map[string]*bytes.Buffer
	kills    int
	exits    int // processes that ended without being killed (and were restarted)
	leaders  map[string]bool
	stopping bool
	stopKill chan struct{}
	killDone chan struct{}
}

type proc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool
}

// newFleet starts one controller per identity, each with extra flags.
func newFleet(t *testing.T, bin, kubeconfig string, client kubernetes.Interface, seed uint64, ids []string, extra ...string) *fleet {
	f := &fleet{t: t, bin: bin, kubeconfig: kubeconfig, extra: extra, client: client, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		procs: map[string]*proc{}, logs: map[string]*bytes.Buffer{}, leaders: map[string]bool{}, secrets: map[string]string{}}
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_CLIENT_SECRET"} {
		f.secrets[name] = "secret-" + utilrand.String(24)
	}
	dir, err := os.MkdirTemp("", "sluice-chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	f.dir = dir
	t.Logf("controller logs: %s", dir)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	for _, id := range ids {
		f.start(id)
	}
	t.Cleanup(f.stop)
	return f
}

// lockedWriter lets a process write its log, kept in memory and in a
// file, while the test reads it.
type lockedWriter struct {
	mu   *sync.Mutex
	b    *bytes.Buffer
	file *os.File
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.file.Write(p)
	return w.b.Write(p)
}

func (f *fleet) start(id string) {
	args := append([]string{"controller", "--kubeconfig", f.kubeconfig, "--identity", id,
		"--leader-elect", "--leader-election-namespace", controllerNamespace, "--leader-election-id", leaseName,
		"--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s", "--leader-election-retry-period", "1s",
		"--providers", "kwok", "--health-probe-bind-address", "0", "--log-format", "json"}, f.extra...)
	if !slices.Contains(f.extra, "--metrics-bind-address") {
		args = append(args, "--metrics-bind-address", "0")
	}
	cmd := exec.Command(f.bin, args...)
	cmd.Env = os.Environ()
	for name, value := range f.secrets {
		cmd.Env = append(cmd.Env, name+"="+value)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	buf := f.logs[id]
	if buf == nil {
		buf = &bytes.Buffer{}
		f.logs[id] = buf
	}
	fmt.Fprintf(buf, "--- start %s\n", time.Now().Format(time.StampMilli))
	file, err := os.OpenFile(filepath.Join(f.dir, id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	fmt.Fprintf(file, "--- start %s\n", time.Now().Format(time.StampMilli))
	cmd.Stdout, cmd.Stderr = lockedWriter{&f.mu, buf, file}, lockedWriter{&f.mu, buf, file}
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("starting controller %s: %v", id, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	f.procs[id] = p
	go f.supervise(id, p)
}

// supervise restarts a controller that ended by itself (a lost Lease makes
// controller-runtime exit), as a Deployment's restart policy would.
func (f *fleet) supervise(id string, p *proc) {
	err := p.cmd.Wait()
	close(p.done)
	f.mu.Lock()
	again := !p.killed && !f.stopping
	if again {
		f.exits++
		fmt.Fprintf(f.logs[id], "--- exited by itself %s: %v\n", time.Now().Format(time.StampMilli), err)
	}
	f.mu.Unlock()
	if again {
		time.Sleep(time.Second)
		f.mu.Lock()
		stopping := f.stopping
		f.mu.Unlock()
		if !stopping {
			f.start(id)
		}
	}
}

// killLoop runs until stopKilling.
func (f *fleet) killLoop(ctx context.Context) {
	f.stopKill, f.killDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.killDone)
		for {
			f.mu.Lock()
			wait := time.Duration(5000+f.rng.IntN(10001)) * time.Millisecond
			f.mu.Unlock()
			select {
			case <-f.stopKill:
				return
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			f.killOne(ctx)
		}
	}()
}

func (f *fleet) killOne(ctx context.Context) {
	leader := f.leader(ctx)
	f.mu.Lock()
	ids := make([]string, 0, len(f.procs))
	for id := range f.procs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	victim := ids[f.rng.IntN(len(ids))]
	if f.procs[leader] != nil && f.rng.IntN(4) < 3 {
		victim = leader
	}
	back := time.Duration(f.rng.IntN(6000)) * time.Millisecond
	p := f.procs[victim]
	p.killed = true
	f.kills++
	fmt.Fprintf(f.logs[victim], "--- SIGKILL %s (leader %q)\n", time.Now().Format(time.StampMilli), leader)
	f.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	// Back after a while, as a restarted container would be; long enough,
	// sometimes, for the other replica to take the Lease.
	select {
	case <-time.After(back):
	case <-ctx.Done():
		return
	}
	f.start(victim)
}

// leader is the Lease's holder, "" when none can be read.
func (f *fleet) leader(ctx context.Context) string {
	lease, err := f.client.CoordinationV1().Leases(controllerNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	holder := *lease.Spec.HolderIdentity
	// client-go's resource lock writes "<identity>_<uuid>".
	holder, _, _ = strings.Cut(holder, "_")
	f.mu.Lock()
	f.leaders[holder] = true
	f.mu.Unlock()
	return holder
}

// awaitKills waits until the kill loop has killed n controllers in all, or
// until deadline.
func (f *fleet) awaitKills(n int, deadline time.Time) {
	for time.Now().Before(deadline) {
		f.mu.Lock()
		kills := f.kills
		f.mu.Unlock()
		if kills >= n {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (f *fleet) stopKilling() {
	if f.stopKill != nil {
		close(f.stopKill)
		<-f.killDone
		f.stopKill = nil
	}
}

// stop ends both controllers (SIGTERM, then SIGKILL after 15 s) and waits.
func (f *fleet) stop() {
	f.stopKilling()
	f.mu.Lock()
	f.stopping = true
	procs := make([]*proc, 0, len(f.procs))
	for _, p := range f.procs {
		procs = append(procs, p)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	f.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// tail is the last lines each controller logged, for a failure message.
func (f *fleet) tail(lines int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for id, buf := range f.logs {
		all := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
		fmt.Fprintf(&b, "=== %s (last %d lines)\n%s\n", id, lines, strings.Join(all[max(0, len(all)-lines):], "\n"))
	}
	return b.String()
}

// lines returns the log lines of every controller that contain substr.
func (f *fleet) lines(substr string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, buf := range f.logs {
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, substr) {
				out = append(out, id+": "+line)
			}
		}
	}
	return out
}

// counts returns the kills, the exits nobody asked for, and the identities
// seen leading.
func (f *fleet) counts() (kills, exits int, leaders []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.leaders {
		leaders = append(leaders, id)
	}
	slices.Sort(leaders)
	return f.kills, f.exits, leaders
}

// checkNoSecrets fails the test if a replica logged its bearer token or a
// cloud credential from its environment, anywhere in its log.
func (f *fleet) checkNoSecrets() {
	t := f.t
	kc, err := clientcmd.LoadFromFile(f.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for name, auth := range kc.AuthInfos {
		if auth.Token != "" {
			secrets["the bearer token of "+name] = auth.Token
		}
	}
	for name, value := range f.secrets {
		secrets[name] = value
	}
	if len(secrets) < 2 {
		t.Fatalf("only %d secrets to look for: the check would vouch for nothing", len(secrets))
	}
	for what, value := range secrets {
		if leaked := f.lines(value); len(leaked) > 0 {
			t.Errorf("%s is in %d log lines, e.g. %.300s", what, len(leaked), leaked[0])
		}
	}
}
