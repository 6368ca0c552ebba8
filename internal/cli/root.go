// Package cli holds sluice's command line: one file per subcommand. Commands
// parse and validate flags, then call into the packages that do the work.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, as DESIGN.md's CLI contract gives them.
const (
	ExitOK      = 0
	ExitError   = 1
	ExitBlocked = 3
)

// Execute runs the root command and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var profile profileFlags
	cmd := NewRootCommand()
	profile.register(cmd)
	err := cmd.ExecuteContext(ctx)
	if perr := profile.stop(); perr != nil {
		fmt.Fprintln(os.Stderr, "error: --profile:", perr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		var coded exitCoder
		if errors.As(err, &coded) {
			return coded.ExitCode()
		}
		return ExitError
	}
	return ExitOK
}

// exitCoder is an error that carries its own exit code.
type exitCoder interface{ ExitCode() int }

// NewRootCommand builds the sluice command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Drain Kubernetes nodes safely, within the cloud's deadline, and explain every blocker",
		Long: "sluice cordons, drains and replaces nodes for every reason they go away (cloud maintenance,\n" +
			"spot preemption, upgrades, expiry, drift, consolidation) under one set of disruption budgets.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Run as kubectl-sluice, the kubectl plugin: usage and completions say
	// what the user types.
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl sluice"}
	}
	root.AddCommand(newDrainCommand(), newDoctorCommand(), newStatusCommand(), newTopCommand(), newExplainCommand(), newPlanCommand(), newUpgradeCommand(), newAgentCommand(), newControllerCommand(), newVersionCommand(), newSandboxCommand(), newUninstallCommand(), newImportCommand())
	return root
}

// stoppedIsNoError: a service told to stop (SIGTERM) before it ever reached
// the API server exits 0, as it does once running.
func stoppedIsNoError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}
