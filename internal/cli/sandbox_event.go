package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/cloud"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// newSandboxEventCommand announces a maintenance event on a simulated node,
// through that node's own metadata-service emulator.
func newSandboxEventCommand() *cobra.Command {
	var (
		opts     sandboxOptions
		req      cloud.Request
		typ      string
		cancelID string
		output   string
	)
	cmd := &cobra.Command{
		Use:   "event --node NODE --type TYPE [--in 30s] [--duration 10s] | --node NODE --cancel ID",
		Short: "Announce a maintenance event on a sandbox node, as its cloud would",
		Long: "The node's metadata-service emulator (Azure Scheduled Events, AWS IMDSv2 or GCP metadata, by\n" +
			"the node's providerID) announces the event; the node's agent reports it and the controller\n" +
			"acts. At the event's time, or as soon as it is approved, the sandbox carries it out: a\n" +
			"preempted or terminated node is deleted, a rebooted or redeployed one is NotReady for\n" +
			"--duration, and the event ends.\n\n" +
			"Types: Azure Freeze, Reboot, Redeploy, Preempt, Terminate; AWS Preempt, Rebalance, Reboot,\n" +
			"Terminate; GCP Preempt, Freeze, Terminate.",
		Example: "  sluice sandbox event --node aks-spot-28337411-vmss000000 --type Preempt --in 30s\n" +
			"  sluice sandbox event --node aks-user-12345678-vmss000001 --type Redeploy --in 2m --duration 20s",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			// The flags first, the sandbox after: a bad value is named
			// whether or not a sandbox runs.
			if req.Node == "" {
				return errors.New("--node is required")
			}
			switch {
			case cancelID != "" && typ != "":
				return errors.New("give --type to announce an event or --cancel to withdraw one, not both")
			case cancelID == "":
				if req.Type, err = parseEventType(typ); err != nil {
					return err
				}
				if req.In < 0 {
					return fmt.Errorf("--in %s: must not be negative", req.In)
				}
				if req.Duration < 0 {
					return fmt.Errorf("--duration %s: must not be negative", req.Duration)
				}
			}
			st, err := sandbox.ReadState(opts.dir)
			if err != nil || !st.Ready || st.CloudAddress == "" {
				return fmt.Errorf("no running sandbox %q with a simulated cloud: run `sluice sandbox up` first", opts.name)
			}
			if cancelID != "" {
				var out map[string]string
				if err := post(cmd.Context(), st.CloudAddress+"/events/cancel", map[string]string{"node": req.Node, "id": cancelID}, &out); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "canceled event %s on %s\n", cancelID, req.Node)
				return nil
			}
			var in cloud.Injected
			if err := post(cmd.Context(), st.CloudAddress+"/events", req, &in); err != nil {
				return err
			}
			if format.structured() {
				return writeStructured(cmd.OutOrStdout(), format, in)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s event %s announced on %s, not before %s (in %s)\n",
				in.Cloud, in.Type, in.ID, in.Node, in.NotBefore.Local().Format(time.TimeOnly), time.Until(in.NotBefore).Round(time.Second))
			return nil
		},
	}
	opts.addFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&req.Node, "node", "", "the node whose machine the event is for")
	fs.StringVar(&typ, "type", "", "Freeze, Reboot, Redeploy, Preempt, Terminate or Rebalance")
	fs.DurationVar(&req.In, "in", 30*time.Second, "how far ahead the event is announced (its NotBefore)")
	fs.DurationVar(&req.Duration, "duration", 10*time.Second, "how long a Freeze, Reboot or Redeploy keeps the machine down")
	fs.StringVar(&cancelID, "cancel", "", "withdraw the announced event with this ID instead")
	fs.StringVarP(&output, "output", "o", "text", outputHelp)
	return cmd
}

// sandboxHTTP bounds each call to the sandbox's cloud: it answers on
// loopback at once, or not at all.
var sandboxHTTP = &http.Client{Timeout: 30 * time.Second}

func parseEventType(s string) (maintenance.Type, error) {
	for _, t := range []maintenance.Type{maintenance.TypeFreeze, maintenance.TypeReboot, maintenance.TypeRedeploy,
		maintenance.TypePreempt, maintenance.TypeTerminate, maintenance.TypeRebalance} {
		if strings.EqualFold(s, string(t)) {
			return t, nil
		}
	}
	return "", fmt.Errorf("--type %q: use Freeze, Reboot, Redeploy, Preempt, Terminate or Rebalance", s)
}

// post sends v as JSON and decodes the answer into out; a refusal's text is
// the error.
func post(ctx context.Context, url string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := sandboxHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the sandbox's cloud: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the sandbox's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}
