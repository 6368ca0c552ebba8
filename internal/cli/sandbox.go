package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// sandboxOptions are the flags every sandbox subcommand shares.
type sandboxOptions struct {
	name     string
	dir      string
	toolsBin string
}

func (o *sandboxOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.name, "name", "default", "name of the sandbox; several can run side by side")
	cmd.Flags().StringVar(&o.dir, "dir", "", "directory for the sandbox's files (default: $XDG_CACHE_HOME/sluice/sandbox/NAME)")
}

// Validate checks the flags and fills in the default directory.
func (o *sandboxOptions) Validate() error {
	if o.name == "" || filepath.Base(o.name) != o.name || o.name == "." || o.name == ".." {
		return fmt.Errorf("invalid --name %q: use a plain name such as default", o.name)
	}
	if o.dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("finding a directory for the sandbox (set --dir): %w", err)
		}
		o.dir = filepath.Join(cache, "sluice", "sandbox", o.name)
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		return fmt.Errorf("invalid --dir %q: %w", o.dir, err)
	}
	o.dir = abs
	return nil
}

func newSandboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a local Kubernetes control plane with simulated nodes to try sluice on",
		Long: "The sandbox runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1,\n" +
			"with kwok simulating the kubelets, so pods are scheduled, evicted and recreated by the real\n" +
			"control plane. No containers run and nothing leaves this machine.",
	}
	cmd.AddCommand(newSandboxUpCommand(), newSandboxDownCommand(), newSandboxStatusCommand(), newSandboxEventCommand(), newSandboxFaultCommand(), newSandboxServeCommand())
	return cmd
}

func newSandboxUpCommand() *cobra.Command {
	var opts sandboxOptions
	var empty bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a sandbox with a sample AKS-shaped cluster and print its kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("invalid --timeout %s: must be positive", timeout)
			}
			return sandboxUp(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), opts, !empty, timeout)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().StringVar(&opts.toolsBin, "tools-bin", "", "directory holding the control-plane binaries (default: $"+sandbox.ToolsBinEnv+", or built by hack/tools/build.sh)")
	cmd.Flags().BoolVar(&empty, "empty", false, "start with no nodes or workloads")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the sandbox to be ready")
	return cmd
}

func sandboxUp(ctx context.Context, out, errOut io.Writer, opts sandboxOptions, sample bool, timeout time.Duration) error {
	begin := time.Now()
	if err := claimDir(opts); err != nil {
		return err
	}
	bin, err := sandbox.FindBinaries(ctx, opts.toolsBin, errOut)
	if err != nil {
		return err
	}
	st, err := startSupervisor(ctx, opts, bin, timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "control plane ready in %.1fs (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)\n", st.StartupSeconds)
	if sample {
		if err := createSample(ctx, out, st.Kubeconfig, timeout); err != nil {
			return fmt.Errorf("creating the sample cluster (the sandbox is still up; `sluice sandbox down --name %s` removes it): %w", opts.name, err)
		}
		if err := waitForMachines(ctx, st, timeout); err != nil {
			return fmt.Errorf("starting the simulated cloud (the sandbox is still up; see %s): %w", filepath.Join(opts.dir, "supervisor.log"), err)
		}
		fmt.Fprintln(out, "every node has its metadata service and agent; the maintenance controller runs")
	}
	fmt.Fprintf(out, "\nsandbox %q is up in %.1fs\n\n", opts.name, time.Since(begin).Seconds())
	fmt.Fprintf(out, "  kubeconfig: %s\n\n", st.Kubeconfig)
	fmt.Fprintf(out, "  kubectl --kubeconfig %s get nodes,pods -A\n", st.Kubeconfig)
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n\n", st.Kubeconfig)
	fmt.Fprintf(out, "logs: %s\nremove it with: sluice sandbox down --name %s\n", filepath.Join(opts.dir, "logs"), opts.name)
	return nil
}

// claimDir makes sure no sandbox is running in the directory and clears what a
// dead one left. It refuses to touch a directory that is not a sandbox's.
func claimDir(opts sandboxOptions) error {
	st, err := sandbox.ReadState(opts.dir)
	switch {
	case errors.Is(err, sandbox.ErrNoState):
		entries, readErr := os.ReadDir(opts.dir)
		if readErr == nil && len(entries) > 0 {
			return fmt.Errorf("--dir %s is not empty and holds no sandbox; choose an empty or new directory", opts.dir)
		}
		return nil
	case err != nil:
		return err
	}
	if sandbox.Alive(st.SupervisorPID, "sandbox serve") {
		return fmt.Errorf("sandbox %q is already running (kubeconfig %s); run `sluice sandbox down --name %s` first",
			opts.name, st.Kubeconfig, opts.name)
	}
	if err := os.RemoveAll(opts.dir); err != nil {
		return fmt.Errorf("removing the remains of a stopped sandbox in %s: %w", opts.dir, err)
	}
	return nil
}

// startSupervisor starts `sluice sandbox serve` in its own session, so the
// control plane outlives this command, and waits until it reports ready.
func startSupervisor(ctx context.Context, opts sandboxOptions, bin string, timeout time.Duration) (sandbox.State, error) {
	if err := os.MkdirAll(opts.dir, 0o700); err != nil {
		return sandbox.State{}, fmt.Errorf("creating %s: %w", opts.dir, err)
	}
	self, err := os.Executable()
	if err != nil {
		return sandbox.State{}, fmt.Errorf("finding the sluice binary: %w", err)
	}
	logPath := filepath.Join(opts.dir, "supervisor.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return sandbox.State{}, fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer logFile.Close()
	cmd := exec.Command(self, "sandbox", "serve", "--name", opts.name, "--dir", opts.dir, "--tools-bin", bin) //nolint:gosec // our own binary
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return sandbox.State{}, fmt.Errorf("starting the sandbox supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return sandbox.State{}, ctx.Err()
		case <-deadline.C:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return sandbox.State{}, fmt.Errorf("the sandbox was not ready within %s; see %s", timeout, logPath)
		case err := <-exited:
			st, _ := sandbox.ReadState(opts.dir)
			if st.Error != "" {
				return st, fmt.Errorf("starting the sandbox: %s", st.Error)
			}
			return st, fmt.Errorf("the sandbox supervisor exited; see %s: %w", logPath, err)
		case <-tick.C:
			st, err := sandbox.ReadState(opts.dir)
			if err == nil && st.Ready {
				_ = cmd.Process.Release()
				return st, nil
			}
		}
	}
}

// createSample creates the sample cluster and waits, briefly, for its pods to run.
func createSample(ctx context.Context, out io.Writer, kubeconfig string, timeout time.Duration) error {
	client, err := clientFor(kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nodes, workloads := fixture.SampleCluster()
	if err := fixture.Create(ctx, client, nodes...); err != nil {
		return err
	}
	// Workloads go in once every node is Ready, so the scheduler spreads them
	// as it would on a settled cluster.
	if err := waitNodesReady(ctx, client, len(nodes)); err != nil {
		return err
	}
	if err := fixture.Create(ctx, client, workloads...); err != nil {
		return err
	}
	batch, err := createSampleBatchPool(ctx, kubeconfig, client)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created the sample cluster: %d nodes in 3 AKS pools, a NodePool %q of %d nodes made by the kwok provider, %d workload objects in namespaces shop and monitoring\n",
		len(nodes), "batch", batch, len(workloads)+2)
	for {
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		running, waiting := 0, 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
				running++
			} else {
				waiting++
			}
		}
		if waiting == 0 && running > 0 {
			fmt.Fprintf(out, "all %d pods running\n", running)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "%d pods running, %d still pending after %s\n", running, waiting, timeout)
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func waitNodesReady(ctx context.Context, client kubernetes.Interface, want int) error {
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d nodes to be Ready (%d are): %w", want, ready, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a client: %w", err)
	}
	return client, nil
}

// waitForMachines waits until every node has its metadata emulator and agent,
// so `sandbox event` works as soon as `sandbox up` returns.
func waitForMachines(ctx context.Context, st sandbox.State, timeout time.Duration) error {
	client, err := clientFor(st.Kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var have, want int
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		want = 0
		for _, n := range nodes.Items {
			// A kwok provider's machine has no cloud metadata service.
			if !strings.HasPrefix(n.Spec.ProviderID, kwok.ProviderIDPrefix) {
				want++
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.CloudAddress+"/machines", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var machines []json.RawMessage
		if json.NewDecoder(resp.Body).Decode(&machines) != nil {
			return false, nil
		}
		have = len(machines)
		return have >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d nodes have their metadata service and agent: %w", have, want, err)
	}
	return nil
}

// createSampleBatchPool creates the sample NodePool whose machines the
// sandbox's kwok provider runs, has the provider make its nodes (as a cloud
// would have before sluice took the pool over: the controller's provider
// finds them from their Nodes), and puts its workload on them.
func createSampleBatchPool(ctx context.Context, kubeconfig string, client kubernetes.Interface) (int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("building a client: %w", err)
	}
	if err := nodepool.Install(ctx, ext); err != nil {
		return 0, fmt.Errorf("installing the chart's CRDs: %w", err)
	}
	pool, count, workloads := fixture.SampleBatchPool()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("building a client: %w", err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		return 0, err
	}
	if _, err := dyn.Resource(v1alpha1.NodePoolResource).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("creating the sample NodePool: %w", err)
	}
	before, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	machines := kwok.New(client, clock.RealClock{}, kwok.Options{Registered: true}) // the pool as a controller left it
	go func() { _ = machines.Run(runCtx) }()
	for range count {
		if _, err := machines.Create(ctx, pool, ""); err != nil {
			return 0, fmt.Errorf("making the sample pool's nodes: %w", err)
		}
	}
	if err := waitNodesReady(ctx, client, len(before.Items)+count); err != nil {
		return 0, err
	}
	return count, fixture.Create(ctx, client, workloads...)
}
