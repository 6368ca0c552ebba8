package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// Config says where a sandbox finds its binaries and keeps its files.
type Config struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler
	// and kwok (see FindBinaries).
	BinDir string
	// Dir is the sandbox's private working directory: certificates, etcd data,
	// kubeconfigs and logs. Empty means a new temporary directory. It is removed
	// by Stop unless KeepDir is set.
	Dir     string
	KeepDir bool
	// StartTimeout bounds the wait for every component to be ready; zero means
	// one minute.
	StartTimeout time.Duration
	// Clock is read for certificate validity and start-up timing; nil means the
	// real clock.
	Clock clock.PassiveClock
}

// Sandbox is a running control plane. Its methods are safe for concurrent use.
type Sandbox struct {
	dir        string
	keepDir    bool
	kubeconfig string
	restConfig *rest.Config
	started    time.Duration

	mu    sync.Mutex
	procs []*process
}

// Start brings up etcd, the API server, the controller manager, the scheduler and
// kwok, and returns once every one of them answers its health check. On error
// everything started so far is stopped again.
func Start(ctx context.Context, cfg Config) (*Sandbox, error) {
	if err := checkBinaries(cfg.BinDir); err != nil {
		return nil, err
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	begin := clk.Now()
	dir, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{dir: dir, keepDir: cfg.KeepDir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.start(ctx, cfg.BinDir, clk.Now()); err != nil {
		_ = s.Stop()
		return nil, err
	}
	s.started = clk.Since(begin)
	return s, nil
}

// Kubeconfig is the path of an administrator kubeconfig for the sandbox.
func (s *Sandbox) Kubeconfig() string { return s.kubeconfig }

// RESTConfig returns a copy of the administrator client configuration.
func (s *Sandbox) RESTConfig() *rest.Config { return rest.CopyConfig(s.restConfig) }

// Dir is the sandbox's working directory; logs are in Dir()/logs.
func (s *Sandbox) Dir() string { return s.dir }

// StartupDuration is how long Start took.
func (s *Sandbox) StartupDuration() time.Duration { return s.started }

// Processes lists the running components.
func (s *Sandbox) Processes() []ProcessInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	infos := make([]ProcessInfo, 0, len(s.procs))
	for _, p := range s.procs {
		infos = append(infos, p.info())
	}
	return infos
}

// Err reports the first component that has exited; a sandbox whose components
// all run returns nil.
func (s *Sandbox) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if done, _ := p.exited(); done {
			return p.exitError()
		}
	}
	return nil
}

// Stop terminates the components, newest first, and removes the working
// directory unless the sandbox was told to keep it.
func (s *Sandbox) Stop() error {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(10 * time.Second)
	}
	if s.keepDir {
		return nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing sandbox directory: %w", err)
	}
	return nil
}

// ports are the loopback ports one sandbox listens on.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok int
}

func (s *Sandbox) start(ctx context.Context, bin string, now time.Time) error {
	free, err := freePorts(6)
	if err != nil {
		return err
	}
	p := ports{free[0], free[1], free[2], free[3], free[4], free[5]}
	pk, err := s.writeCredentials(now, p)
	if err != nil {
		return err
	}
	tlsConfig, err := s.clientTLS(pk)
	if err != nil {
		return err
	}

	if err := s.launch("etcd", bin, etcdArgs(s.dir, pk, p)); err != nil {
		return err
	}
	etcdHealth := fmt.Sprintf("https://127.0.0.1:%d/health", p.etcdClient)
	if err := s.waitHealthy(ctx, "etcd", etcdHealth, tlsConfig(etcdClient)); err != nil {
		return err
	}

	if err := s.launch("kube-apiserver", bin, apiserverArgs(pk, p)); err != nil {
		return err
	}
	apiserver := fmt.Sprintf("https://127.0.0.1:%d", p.apiserver)
	if err := s.waitHealthy(ctx, "kube-apiserver", apiserver+"/readyz", tlsConfig(adminIdentity)); err != nil {
		return err
	}

	kwokPath := filepath.Join(s.dir, "kwok.yaml")
	if err := os.WriteFile(kwokPath, kwokConfig, 0o600); err != nil {
		return fmt.Errorf("writing kwok configuration: %w", err)
	}
	schedulerPath := filepath.Join(s.dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerPath, schedulerConfig(s.dir), 0o600); err != nil {
		return fmt.Errorf("writing scheduler configuration: %w", err)
	}
	if err := s.launch("kube-controller-manager", bin, controllerManagerArgs(s.dir, pk, p)); err != nil {
		return err
	}
	if err := s.launch("kube-scheduler", bin, schedulerArgs(s.dir, schedulerPath, pk, p)); err != nil {
		return err
	}
	if err := s.launch("kwok", bin, kwokArgs(s.dir, kwokPath, p)); err != nil {
		return err
	}
	checks := map[string]string{
		"kube-controller-manager": fmt.Sprintf("https://127.0.0.1:%d/healthz", p.controllerManager),
		"kube-scheduler":          fmt.Sprintf("https://127.0.0.1:%d/healthz", p.scheduler),
		"kwok":                    fmt.Sprintf("http://127.0.0.1:%d/healthz", p.kwok),
	}
	for name, url := range checks {
		if err := s.waitHealthy(ctx, name, url, tlsConfig(adminIdentity)); err != nil {
			return err
		}
	}

	s.restConfig, err = clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the sandbox kubeconfig: %w", err)
	}
	return s.waitSettled(ctx)
}

// writeCredentials creates the CA, the certificates, the service-account key and
// a kubeconfig per client identity.
func (s *Sandbox) writeCredentials(now time.Time, p ports) (*pki, error) {
	pk, err := newPKI(filepath.Join(s.dir, "pki"), now)
	if err != nil {
		return nil, err
	}
	if err := pk.issueServing(now, net.ParseIP(kubernetesServiceIP)); err != nil {
		return nil, err
	}
	for _, id := range []identity{adminIdentity, controllerManager, schedulerIdentity, kwokIdentity, etcdClient} {
		if err := pk.issueClient(now, id); err != nil {
			return nil, err
		}
	}
	if err := pk.writeServiceAccountKey(); err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", p.apiserver)
	for path, id := range map[string]identity{
		s.kubeconfig: adminIdentity,
		filepath.Join(s.dir, "kube-controller-manager.kubeconfig"): controllerManager,
		filepath.Join(s.dir, "kube-scheduler.kubeconfig"):          schedulerIdentity,
		filepath.Join(s.dir, "kwok.kubeconfig"):                    kwokIdentity,
	} {
		if err := pk.writeKubeconfig(path, server, id); err != nil {
			return nil, err
		}
	}
	return pk, nil
}

// clientTLS returns a function building a TLS client configuration that trusts
// only the sandbox CA and presents id's certificate.
func (s *Sandbox) clientTLS(pk *pki) (func(identity) *tls.Config, error) {
	caPEM, err := os.ReadFile(pk.path("ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("parsing the sandbox CA certificate")
	}
	return func(id identity) *tls.Config {
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cert, err := tls.LoadX509KeyPair(pk.path(id.file+".crt"), pk.path(id.file+".key")); err == nil {
			cfg.Certificates = []tls.Certificate{cert}
		}
		return cfg
	}, nil
}

// launch starts the program file (name when file is not given) in bin as the
// component name.
func (s *Sandbox) launch(name, bin string, args []string, file ...string) error {
	logs := filepath.Join(s.dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return fmt.Errorf("creating log directory: %w", err)
	}
	program := name
	if len(file) > 0 {
		program = file[0]
	}
	p, err := startProcess(name, filepath.Join(bin, program), args, filepath.Join(logs, name+".log"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return nil
}

// waitHealthy polls url until it answers 200, the component exits, or ctx ends.
func (s *Sandbox) waitHealthy(ctx context.Context, name, url string, tlsConfig *tls.Config) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
	}
	var last string
	for {
		if err := s.Err(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("checking %s: %w", name, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status + ": " + string(body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to become healthy at %s (last answer: %s): %w; its log is %s",
				name, url, last, ctx.Err(), filepath.Join(s.dir, "logs", name+".log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The in-cluster network the API server and controller manager are told about.
// Nothing routes these addresses: kwok only writes them into objects.
const (
	serviceCIDR         = "10.96.0.0/16"
	kubernetesServiceIP = "10.96.0.1"
	clusterCIDR         = "10.64.0.0/10"
)

func etcdArgs(dir string, pk *pki, p ports) []string {
	client := fmt.Sprintf("https://127.0.0.1:%d", p.etcdClient)
	peer := fmt.Sprintf("http://127.0.0.1:%d", p.etcdPeer)
	return []string{
		"--name=sandbox",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=sandbox=" + peer,
		"--cert-file=" + pk.path("serving.crt"),
		"--key-file=" + pk.path("serving.key"),
		"--trusted-ca-file=" + pk.path("ca.crt"),
		"--client-cert-auth=true",
		// A sandbox is thrown away; fsync would only slow every write.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=" + strconv.Itoa(8<<30),
		"--log-level=warn",
	}
}

func apiserverArgs(pk *pki, p ports) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.apiserver),
		"--etcd-servers=" + fmt.Sprintf("https://127.0.0.1:%d", p.etcdClient),
		"--etcd-cafile=" + pk.path("ca.crt"),
		"--etcd-certfile=" + pk.path(etcdClient.file+".crt"),
		"--etcd-keyfile=" + pk.path(etcdClient.file+".key"),
		"--tls-cert-file=" + pk.path("serving.crt"),
		"--tls-private-key-file=" + pk.path("serving.key"),
		"--client-ca-file=" + pk.path("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pk.path("sa.pub"),
		"--service-account-signing-key-file=" + pk.path("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
		// 30,000 pods arrive in bursts when the sandbox is used at scale.
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
		"--v=0",
	}
}

func controllerManagerArgs(dir string, pk *pki, p ports) []string {
	kubeconfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.controllerManager),
		"--tls-cert-file=" + pk.path("serving.crt"),
		"--tls-private-key-file=" + pk.path("serving.key"),
		"--client-ca-file=" + pk.path("ca.crt"),
		"--root-ca-file=" + pk.path("ca.crt"),
		"--service-account-private-key-file=" + pk.path("sa.key"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + clusterCIDR,
		"--node-cidr-mask-size=24",
		"--leader-elect=false",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--concurrent-replicaset-syncs=10",
		"--concurrent-deployment-syncs=10",
		"--profiling=false",
		"--v=0",
	}
}

func schedulerArgs(dir, configPath string, pk *pki, p ports) []string {
	kubeconfig := filepath.Join(dir, "kube-scheduler.kubeconfig")
	return []string{
		"--config=" + configPath,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.scheduler),
		"--tls-cert-file=" + pk.path("serving.crt"),
		"--tls-private-key-file=" + pk.path("serving.key"),
		"--client-ca-file=" + pk.path("ca.crt"),
		"--v=0",
	}
}

// schedulerConfig is the scheduler's configuration file: its client may go as
// fast as the sandbox's scale needs, and there is no second replica to elect.
func schedulerConfig(dir string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, filepath.Join(dir, "kube-scheduler.kubeconfig"))
}

func kwokArgs(dir, configPath string, p ports) []string {
	return []string{
		"--config=" + configPath,
		"--kubeconfig=" + filepath.Join(dir, "kwok.kubeconfig"),
		"--manage-all-nodes=true",
		"--server-address=127.0.0.1:" + strconv.Itoa(p.kwok),
		"--node-ip=10.240.0.1",
	}
}

func prepareDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-sandbox-")
		if err != nil {
			return "", fmt.Errorf("creating sandbox directory: %w", err)
		}
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating sandbox directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // a directory: 0700 is owner-only
		return "", fmt.Errorf("securing sandbox directory: %w", err)
	}
	return dir, nil
}
