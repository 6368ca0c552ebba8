package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

// Request announces an event on a node.
type Request struct {
	Node string           `json:"node"`
	Type maintenance.Type `json:"type"`
	// In is how far ahead the event is announced (its NotBefore).
	In time.Duration `json:"in"`
	// Duration is how long a Freeze, Reboot or Redeploy keeps the machine down.
	Duration time.Duration `json:"duration"`
}

// Injected is what the platform announced.
type Injected struct {
	Node      string             `json:"node"`
	Cloud     maintenance.Source `json:"cloud"`
	ID        string             `json:"id"`
	Type      maintenance.Type   `json:"type"`
	NotBefore time.Time          `json:"notBefore"`
	Endpoint  string             `json:"endpoint"`
}

// Inject announces the event in the node's metadata service, then carries it
// out at NotBefore, or at once when the event is approved.
func (c *Cloud) Inject(ctx context.Context, r Request) (Injected, error) {
	if r.In < 0 || r.Duration < 0 {
		return Injected{}, errors.New("--in and --duration must not be negative")
	}
	if r.Duration == 0 {
		r.Duration = 10 * time.Second
	}
	m, err := c.machine(r.Node)
	if err != nil {
		return Injected{}, err
	}
	notBefore := c.clock.Now().Add(r.In).Truncate(time.Second).Add(time.Second)
	in := Injected{Node: r.Node, Cloud: m.source, Type: r.Type, NotBefore: notBefore, Endpoint: m.endpoint}
	switch m.source {
	case maintenance.SourceAzure:
		err = m.announceAzure(&in, r)
	case maintenance.SourceAWS:
		err = m.announceAWS(&in, r)
	case maintenance.SourceGCP:
		err = m.announceGCP(&in)
	}
	if err != nil {
		return Injected{}, err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.mu.Lock()
	m.events[in.ID] = cancel
	c.mu.Unlock()
	go c.carryOut(pctx, m, in, r.Duration)
	c.log.Info("event announced", "node", r.Node, "cloud", m.source, "id", in.ID, "type", r.Type, "notBefore", notBefore)
	return in, nil
}

func (m *machine) announceAzure(in *Injected, r Request) error {
	switch r.Type {
	case maintenance.TypeFreeze, maintenance.TypeReboot, maintenance.TypeRedeploy, maintenance.TypePreempt, maintenance.TypeTerminate:
	default:
		return fmt.Errorf("--type %s: Azure announces Freeze, Reboot, Redeploy, Preempt or Terminate", r.Type)
	}
	in.ID = strings.ToUpper(utilrand.String(8)) + "-" + strings.ToUpper(utilrand.String(4)) + "-" + strings.ToUpper(utilrand.String(12))
	duration := int(r.Duration.Seconds())
	if r.Type == maintenance.TypePreempt || r.Type == maintenance.TypeTerminate {
		duration = -1 // the documented value when the impact has no end
	}
	m.azure.Schedule(azure.RawEvent{EventID: in.ID, EventType: string(r.Type), ResourceType: "VirtualMachine", Resources: []string{m.vm},
		EventStatus: "Scheduled", NotBefore: azure.FormatNotBefore(in.NotBefore), Description: "sandbox: " + string(r.Type),
		EventSource: "Platform", DurationInSeconds: duration})
	return nil
}

func (m *machine) announceAWS(in *Injected, r Request) error {
	codes := map[maintenance.Type]string{maintenance.TypeReboot: "system-reboot", maintenance.TypeTerminate: "instance-retirement"}
	switch r.Type {
	case maintenance.TypePreempt:
		in.ID = "spot"
		m.aws.Spot("terminate", in.NotBefore)
	case maintenance.TypeRebalance:
		in.ID = "rebalance"
		m.aws.Rebalance(in.NotBefore.Add(-r.In))
	case maintenance.TypeReboot, maintenance.TypeTerminate:
		in.ID = "instance-event-0" + utilrand.String(16)
		m.aws.ScheduleMaintenance(aws.ScheduledEvent{EventID: in.ID, Code: codes[r.Type], State: "active", Description: "sandbox: " + codes[r.Type],
			NotBefore: in.NotBefore.UTC().Format(aws.EventTimeLayout), NotAfter: in.NotBefore.Add(r.Duration).UTC().Format(aws.EventTimeLayout)})
	default:
		return fmt.Errorf("--type %s: AWS announces Preempt (spot interruption), Rebalance, Reboot or Terminate", r.Type)
	}
	return nil
}

func (m *machine) announceGCP(in *Injected) error {
	switch in.Type {
	case maintenance.TypePreempt:
		m.gcp.Preempt()
	case maintenance.TypeFreeze:
		m.gcp.SetMaintenanceEvent(gcp.MaintenanceMigrate)
	case maintenance.TypeTerminate:
		m.gcp.SetMaintenanceEvent(gcp.MaintenanceTerminate)
	default:
		return fmt.Errorf("--type %s: GCP announces Preempt, Freeze (live migration) or Terminate (host maintenance)", in.Type)
	}
	in.ID = "gcp-" + strings.ToLower(string(in.Type))
	return nil
}

// nodeMonitorPeriod is how often the cloud node lifecycle controller looks
// for Nodes whose machine is gone (kube-controller-manager's default).
const nodeMonitorPeriod = 5 * time.Second

// carryOut waits for the event's time (or its approval) and does what the
// platform would.
func (c *Cloud) carryOut(ctx context.Context, m *machine, in Injected, downFor time.Duration) {
	defer func() {
		c.mu.Lock()
		delete(m.events, in.ID)
		c.mu.Unlock()
	}()
	tick := c.clock.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for c.clock.Now().Before(in.NotBefore) && (m.azure == nil || !slices.Contains(m.azure.Approved(), in.ID)) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
	c.log.Info("event starts", "node", in.Node, "id", in.ID, "type", in.Type)
	switch in.Type {
	case maintenance.TypePreempt, maintenance.TypeTerminate:
		// The machine is gone: its kubelet stops reporting, and the cloud
		// node lifecycle controller deletes the Node on its next look
		// (every --node-monitor-period, 5 s by default), not at once.
		c.setNotReady(ctx, in.Node, true)
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(nodeMonitorPeriod):
		}
		if err := c.client.CoreV1().Nodes().Delete(ctx, in.Node, metav1.DeleteOptions{}); err != nil {
			c.log.Error("deleting the preempted node", "node", in.Node, "err", err)
		}
		c.end(m, in)
	case maintenance.TypeRebalance:
		// A recommendation only; it stays until the machine goes.
	default:
		if m.azure != nil {
			m.azure.Start(in.ID)
		}
		notReady := in.Type == maintenance.TypeReboot || in.Type == maintenance.TypeRedeploy
		if notReady {
			c.setNotReady(ctx, in.Node, true)
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(downFor):
		}
		if notReady {
			c.setNotReady(context.WithoutCancel(ctx), in.Node, false)
		}
		c.end(m, in)
	}
}

// end removes the event from the metadata service: it is over.
func (c *Cloud) end(m *machine, in Injected) {
	switch {
	case m.azure != nil:
		m.azure.Finish(in.ID)
	case m.aws != nil && in.ID == "spot":
		m.aws.ClearSpot()
	case m.aws != nil:
		m.aws.SetMaintenanceState(in.ID, "completed")
	case m.gcp != nil:
		m.gcp.Reset()
	}
	c.log.Info("event over", "node", in.Node, "id", in.ID)
}

// Cancel withdraws an announced event, as the platform may before it starts.
func (c *Cloud) Cancel(node, id string) error {
	m, err := c.machine(node)
	if err != nil {
		return err
	}
	c.mu.Lock()
	cancel, ok := m.events[id]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("node %s has no pending event %q", node, id)
	}
	cancel()
	switch {
	case m.azure != nil:
		m.azure.Finish(id) // Azure: a canceled event disappears
	case m.aws != nil && id == "spot":
		return errors.New("a spot interruption notice cannot be canceled")
	case m.aws != nil:
		m.aws.SetMaintenanceState(id, "canceled")
	case m.gcp != nil:
		m.gcp.Reset()
	}
	return nil
}

func (c *Cloud) setNotReady(ctx context.Context, node string, down bool) {
	var value any // null removes it
	if down {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.SandboxNotReady: value}}})
	if err != nil {
		return
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.log.Error("changing the node's readiness", "node", node, "err", err)
	}
}

// Handler serves the sandbox's cloud control API on loopback:
// POST /events (a Request) and POST /events/cancel ({"node","id"}), GET /machines.
func (c *Cloud) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(w, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		in, err := c.Inject(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, in)
	})
	mux.HandleFunc("POST /events/cancel", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Node, ID string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(w, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.Cancel(req.Node, req.ID); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]string{"canceled": req.ID})
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&f); err != nil {
			http.Error(w, "decoding the fault: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.ApplyFault(r.Context(), f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, f)
	})
	mux.HandleFunc("GET /machines", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, c.Machines()) })
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
