package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox"
)

// sandboxStatus is what `sandbox status` reports.
type sandboxStatus struct {
	Name       string `json:"name"`
	Running    bool   `json:"running"`
	Dir        string `json:"dir"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Cloud is the simulated cloud's control API; Metrics the controller's /metrics.
	Cloud      string            `json:"cloudAddress,omitempty"`
	Metrics    string            `json:"metricsAddress,omitempty"`
	Error      string            `json:"error,omitempty"`
	Components []componentStatus `json:"components,omitempty"`
	Nodes      int               `json:"nodes"`
	Pods       int               `json:"pods"`
}

type componentStatus struct {
	sandbox.ProcessInfo
	Running bool `json:"running"`
	sandbox.Memory
}

func newSandboxStatusCommand() *cobra.Command {
	var opts sandboxOptions
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whether a sandbox runs, its components, their memory, and its size",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			return sandboxStatusRun(cmd.Context(), cmd.OutOrStdout(), opts, format)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	return cmd
}

func sandboxStatusRun(ctx context.Context, out io.Writer, opts sandboxOptions, format outputFormat) error {
	status := sandboxStatus{Name: opts.name, Dir: opts.dir}
	st, err := sandbox.ReadState(opts.dir)
	if err != nil && !errors.Is(err, sandbox.ErrNoState) {
		return err
	}
	if err == nil {
		status.Running = st.Ready && sandbox.Alive(st.SupervisorPID, "sandbox serve")
		status.Kubeconfig = st.Kubeconfig
		status.Cloud, status.Metrics = st.CloudAddress, st.MetricsAddress
		status.Error = st.Error
		for _, p := range st.Processes {
			c := componentStatus{ProcessInfo: p, Running: sandbox.Alive(p.PID, p.Name)}
			if c.Running {
				c.Memory, _ = sandbox.ResidentMemory(p.PID)
			}
			status.Components = append(status.Components, c)
		}
	}
	if status.Running {
		if client, err := clientFor(status.Kubeconfig); err == nil {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
				status.Nodes = len(nodes.Items)
			}
			if pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
				status.Pods = len(pods.Items)
			}
		}
	}
	if format.structured() {
		return writeStructured(out, format, status)
	}
	if !status.Running {
		fmt.Fprintf(out, "sandbox %q is not running (%s)\n", status.Name, status.Dir)
		if status.Error != "" {
			fmt.Fprintf(out, "last error: %s\n", status.Error)
		}
		return nil
	}
	fmt.Fprintf(out, "sandbox %q is running: %d nodes, %d pods\nkubeconfig: %s\n", status.Name, status.Nodes, status.Pods, status.Kubeconfig)
	fmt.Fprintf(out, "maintenance controller metrics: http://%s/metrics\nsimulated cloud: %s (sluice sandbox event)\n\n", status.Metrics, status.Cloud)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tRUNNING\tRSS\tPEAK RSS")
	for _, c := range status.Components {
		fmt.Fprintf(tw, "%s\t%d\t%t\t%s\t%s\n", c.Name, c.PID, c.Running, mib(c.RSS), mib(c.Peak))
	}
	return tw.Flush()
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }
