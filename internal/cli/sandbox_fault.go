package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/cloud"
)

// newSandboxFaultCommand breaks a sandbox node for a while, so that a
// pool's repair (spec.repair) can be watched at work.
func newSandboxFaultCommand() *cobra.Command {
	var (
		opts     sandboxOptions
		f        cloud.Fault
		notReady time.Duration
	)
	cmd := &cobra.Command{
		Use:   "fault --node NODE [--not-ready 5m | --condition TYPE --for 5m | --clear] [--survives-reboot]",
		Short: "Break a sandbox node for a while: its kubelet NotReady, or a node-problem-detector condition True",
		Long: "The node's simulated kubelet reports NotReady (--not-ready), or the node's status gets the\n" +
			"condition True as node-problem-detector would report it (--condition), for the duration given;\n" +
			"then the fault ends by itself. A reboot through the kwok provider (a repair's first step)\n" +
			"ends it sooner, unless --survives-reboot says the fault outlives a reboot (a broken disk), so\n" +
			"that the repair's next step, a replacement, follows. See docs/health.md.",
		Example: "  sluice sandbox fault --node aks-user-12345678-vmss000001 --not-ready 5m\n" +
			"  sluice sandbox fault --node aks-user-12345678-vmss000002 --condition KernelDeadlock --for 10m --survives-reboot\n" +
			"  sluice sandbox fault --node aks-user-12345678-vmss000001 --clear",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			if err := faultFlags(&f, notReady); err != nil {
				return err
			}
			st, err := sandbox.ReadState(opts.dir)
			if err != nil || !st.Ready || st.CloudAddress == "" {
				return fmt.Errorf("no running sandbox %q with a simulated cloud: run `sluice sandbox up` first", opts.name)
			}
			var out cloud.Fault
			if err := post(cmd.Context(), st.CloudAddress+"/faults", f, &out); err != nil {
				return err
			}
			switch {
			case f.Clear:
				fmt.Fprintf(cmd.OutOrStdout(), "ended the faults of %s\n", f.Node)
			case f.Condition != "":
				fmt.Fprintf(cmd.OutOrStdout(), "%s reports %s=True for %s\n", f.Node, f.Condition, f.For)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s is NotReady for %s\n", f.Node, f.For)
			}
			return nil
		},
	}
	opts.addFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&f.Node, "node", "", "the node to break")
	fs.DurationVar(&notReady, "not-ready", 0, "make the node's kubelet report NotReady for this long")
	fs.StringVar(&f.Condition, "condition", "", "make this node condition True (KernelDeadlock, ReadonlyFilesystem, example.com/GPUHealthy)")
	fs.DurationVar(&f.For, "for", 0, "how long --condition stays True")
	fs.BoolVar(&f.SurvivesReboot, "survives-reboot", false, "the fault outlives a reboot (a repair's reboot does not mend it)")
	fs.BoolVar(&f.Clear, "clear", false, "end the node's faults now")
	return cmd
}

// faultFlags checks the flags' combination and folds --not-ready into the
// fault's duration.
func faultFlags(f *cloud.Fault, notReady time.Duration) error {
	switch {
	case f.Clear && (notReady != 0 || f.Condition != "" || f.For != 0):
		return errors.New("--clear ends the node's faults: give it alone with --node")
	case !f.Clear && notReady != 0 && f.Condition != "":
		return errors.New("give --not-ready DURATION or --condition TYPE --for DURATION, not both")
	case !f.Clear && notReady == 0 && f.Condition == "":
		return errors.New("say what breaks: --not-ready DURATION, or --condition TYPE --for DURATION")
	case notReady != 0 && f.For != 0:
		return errors.New("--for goes with --condition; --not-ready takes its own duration")
	case f.Condition != "" && f.For == 0:
		return errors.New("--condition needs --for DURATION (how long the condition stays True)")
	}
	if notReady != 0 {
		f.For = notReady
	}
	return f.Validate()
}
