package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/nodepool"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/cloud"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// newSandboxServeCommand is the supervisor `sandbox up` starts in the
// background: it owns the control-plane processes (they die with it), records
// their state, and tears everything down on SIGTERM.
func newSandboxServeCommand() *cobra.Command {
	var opts sandboxOptions
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run a sandbox in the foreground (started by `sandbox up`)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			return sandboxServe(cmd.Context(), opts)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().StringVar(&opts.toolsBin, "tools-bin", "", "directory holding the control-plane binaries")
	return cmd
}

func sandboxServe(ctx context.Context, opts sandboxOptions) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	st := sandbox.State{Name: opts.name, Dir: opts.dir, SupervisorPID: os.Getpid(), StartedAt: time.Now()}
	sb, err := sandbox.Start(ctx, sandbox.Config{BinDir: opts.toolsBin, Dir: opts.dir, KeepDir: true})
	if err != nil {
		st.Error = err.Error()
		_ = sandbox.WriteState(st)
		return err
	}
	if err := startCloudAndController(ctx, sb, &st, log); err != nil {
		_ = sb.Stop()
		st.Error = err.Error()
		_ = sandbox.WriteState(st)
		return err
	}
	st.Ready = true
	st.Kubeconfig = sb.Kubeconfig()
	st.Processes = sb.Processes()
	st.StartupSeconds = sb.StartupDuration().Seconds()
	if err := sandbox.WriteState(st); err != nil {
		_ = sb.Stop()
		return err
	}
	log.Info("sandbox ready", "dir", opts.dir, "startup", sb.StartupDuration())

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping sandbox", "dir", opts.dir)
			if err := sb.Stop(); err != nil {
				return err
			}
			return os.RemoveAll(opts.dir)
		case <-tick.C:
			if err := sb.Err(); err != nil {
				log.Error("sandbox component died; stopping the rest", "err", err)
				_ = sb.Stop()
				st.Ready = false
				st.Error = err.Error()
				_ = sandbox.WriteState(st)
				return fmt.Errorf("sandbox component died: %w", err)
			}
		}
	}
}

// startCloudAndController plays the cloud (an emulator and an agent per node,
// and the control API `sandbox event` talks to) and runs sluice's
// maintenance controller, as an installed chart would, until ctx ends.
func startCloudAndController(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.State, log *slog.Logger) error {
	cfg := sb.RESTConfig()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	// Serve every CRD the chart ships, as an installed chart would, so a
	// NodePool applied to the sandbox is understood.
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	if err := nodepool.Install(ctx, ext); err != nil {
		return fmt.Errorf("installing the chart's CRDs: %w", err)
	}
	c := cloud.New(client, cfg, clock.RealClock{}, log.With("component", "cloud"))
	go func() {
		if err := c.Run(ctx); err != nil {
			log.Error("simulated cloud stopped", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening on loopback: %w", err)
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	st.CloudAddress = "http://" + ln.Addr().String()

	metrics, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening on loopback: %w", err)
	}
	st.MetricsAddress = metrics.Addr().String()
	_ = metrics.Close() // the controller binds it again
	f := &controllerFlags{
		client:         kube.ClientFlags{Kubeconfig: sb.Kubeconfig(), QPS: controllerQPS, Burst: controllerBurst},
		logs:           logFlags{format: "text", level: "info"},
		leaderElect:    true,
		leaseNamespace: cloud.Namespace,
		leaseName:      "sluice-controller",
		leaseDuration:  15 * time.Second,
		renewDeadline:  10 * time.Second,
		retryPeriod:    2 * time.Second,
		metricsAddress: st.MetricsAddress,
		healthAddress:  "0",
		requestTimeout: 30 * time.Second,
		maxInFlight:    50,
		workers:        defaultWorkers,
		identity:       "sandbox-controller",
		// The sandbox's simulated cloud makes and removes machines for
		// NodePools that name provider kwok.
		providers:         []string{string(v1alpha1.ProviderKwok)},
		registration:      10 * time.Minute,
		validation:        15 * time.Second,
		timelineRetention: defaultTimelineRetention,
	}
	go func() {
		if err := runController(ctx, f); err != nil {
			log.Error("maintenance controller stopped", "err", err)
		}
	}()
	return nil
}
