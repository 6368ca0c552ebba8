package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/sandbox"
)

func newSandboxDownCommand() *cobra.Command {
	var opts sandboxOptions
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a sandbox and remove everything it made",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			return sandboxDown(cmd.OutOrStdout(), opts)
		},
	}
	opts.addFlags(cmd)
	return cmd
}

func sandboxDown(out io.Writer, opts sandboxOptions) error {
	st, err := sandbox.ReadState(opts.dir)
	if errors.Is(err, sandbox.ErrNoState) {
		fmt.Fprintf(out, "no sandbox %q in %s\n", opts.name, opts.dir)
		return nil
	}
	if err != nil {
		return err
	}
	if sandbox.Alive(st.SupervisorPID, "sandbox serve") {
		_ = syscall.Kill(st.SupervisorPID, syscall.SIGTERM)
		deadline := time.Now().Add(30 * time.Second)
		for sandbox.Alive(st.SupervisorPID, "sandbox serve") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if sandbox.Alive(st.SupervisorPID, "sandbox serve") {
			// Its children die with it (parent-death signal).
			_ = syscall.Kill(st.SupervisorPID, syscall.SIGKILL)
		}
	}
	// Components whose supervisor was killed outright may still be exiting.
	for _, p := range st.Processes {
		if sandbox.Alive(p.PID, p.Name) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	if err := os.RemoveAll(opts.dir); err != nil {
		return fmt.Errorf("removing %s: %w", opts.dir, err)
	}
	fmt.Fprintf(out, "sandbox %q stopped; removed %s\n", opts.name, opts.dir)
	return nil
}
