package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/sandbox"
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
