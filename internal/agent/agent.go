// Package agent runs on every node. It watches the machine's metadata service
// and writes the maintenance events it sees onto its own Node, and it approves
// an event with the platform when the controller asks for it. When the
// machine is about to be taken (a spot preemption, a termination) it also
// cordons its node in the write that first reports the event, so no pod is
// scheduled there while the controller's watch catches up. It also reports
// when the OS asks for a reboot (reboot.go). That is all it can do: it holds
// no right to evict pods, to reboot, or to touch another node.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Config says which node the agent speaks for and how it reads the machine.
type Config struct {
	// Node is the agent's own node.
	Node string
	// Source names the cloud, for the report.
	Source maintenance.Source
	// Watcher reads the metadata service.
	Watcher maintenance.Watcher
	// Approver starts events early; nil when the cloud has no such call.
	Approver maintenance.Approver
	// EndConfirmation says when an event the metadata service stops
	// announcing is over (maintenance.DefaultEndConfirmation when zero).
	EndConfirmation maintenance.EndConfirmation
	// Clock measures it (the real clock when nil).
	Clock clock.PassiveClock
	// Metrics, when set, count what the agent does.
	Metrics *Metrics
	// CordonInvoluntary cordons the node in the write that first reports a
	// Preempt or Terminate (see cordon.go).
	CordonInvoluntary bool
	// Reboot reads the OS's reboot-required sentinel (reboot.go).
	Reboot RebootCheck
}

// Agent mirrors one machine's maintenance events onto its Node. It logs what
// changes (a new event, a new status or time, an event over, a part of the
// answer newly unreadable), never what it merely sees again, so a service
// that answers the same every second costs no log lines.
type Agent struct {
	client kubernetes.Interface
	log    *slog.Logger
	cfg    Config

	logged   map[string]maintenance.Event // the events as last logged, by ID
	writeErr string                       // the last failure to write the report, logged once
	// written is the report last written, over the node at resourceVersion
	// writtenOver: a node still at that version is the cache not yet showing
	// the write, and is not written again.
	written, writtenOver string
	// cordonedFor are the events the agent has cordoned its node for
	// (cordon.go), each once.
	cordonedFor map[string]bool
	// reboot is what the agent knows of the reboot sentinel (reboot.go).
	reboot rebootState

	// What the watch loop keeps between answers (see take).
	ends     *maintenance.EndConfirmer
	readErr  string          // the last failure to read the metadata service
	rejected map[string]bool // the unreadable parts of the last answer
	missing  map[string]bool // the events kept although the last answer lacked them
}

// New returns an agent; Run starts it.
func New(client kubernetes.Interface, log *slog.Logger, cfg Config) *Agent {
	if cfg.EndConfirmation == (maintenance.EndConfirmation{}) {
		cfg.EndConfirmation = maintenance.DefaultEndConfirmation
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Reboot.Period <= 0 {
		cfg.Reboot.Period = DefaultRebootCheckPeriod
	}
	if cfg.Reboot.Clock == nil {
		cfg.Reboot.Clock = clock.RealClock{}
	}
	return &Agent{client: client, log: log.With("node", cfg.Node), cfg: cfg, logged: map[string]maintenance.Event{}, cordonedFor: map[string]bool{},
		ends: maintenance.NewEndConfirmer(cfg.Clock, cfg.EndConfirmation), rejected: map[string]bool{}, missing: map[string]bool{}}
}

// Run watches the node, the metadata service and the reboot sentinel until
// ctx ends. A failing metadata service is logged and changes nothing on the
// node: the last report stands until the service answers again. The
// metadata service is first read once the node is, so that the events the
// node's report holds (written before a restart) end only once their end is
// confirmed; the sentinel too, so that the time the node holds is kept.
func (a *Agent) Run(ctx context.Context) error {
	nodes := make(chan *corev1.Node, 1)
	factory := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.cfg.Node).String()
		}))
	informer := factory.Core().V1().Nodes().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { latest(nodes, obj) },
		UpdateFunc: func(_, obj any) { latest(nodes, obj) },
	})
	if err != nil {
		return fmt.Errorf("watching node %s: %w", a.cfg.Node, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	var node *corev1.Node
	select {
	case <-ctx.Done():
		return nil
	case node = <-nodes:
	}
	if r, ok, err := maintenance.ReportOf(node); ok && err == nil {
		a.ends.Seed(r.Events)
	}
	observations := make(chan maintenance.Report, 1)
	go a.watch(ctx, observations)
	readings := make(chan sentinelReading, 1)
	if a.cfg.Reboot.Sentinel != nil {
		go a.checkReboots(ctx, readings)
	}

	var seen *maintenance.Report
	for {
		select {
		case <-ctx.Done():
			return nil
		case node = <-nodes:
		case r := <-observations:
			seen = &r
		case r := <-readings:
			a.takeReboot(node, r)
		}
		a.publishReboot(ctx, node)
		if seen != nil {
			a.logChanges(*seen)
			err := a.publish(ctx, node, *seen)
			switch {
			case err != nil && err.Error() != a.writeErr:
				a.log.Error("writing events onto the node", "err", err)
				a.writeErr = err.Error()
			case err == nil:
				a.writeErr = ""
			}
		}
		if err := a.approve(ctx, node, seen); err != nil {
			a.log.Error("approving event", "err", err)
		}
	}
}

// watch turns the metadata service's answers into reports, one per answer
// that could be read.
func (a *Agent) watch(ctx context.Context, out chan maintenance.Report) {
	for ctx.Err() == nil {
		obs, err := a.cfg.Watcher.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		if r, ok := a.take(obs, err); ok {
			latest(out, r)
		}
	}
}

// take turns one answer of the metadata service into the report to write;
// ok is false when the answer could not be read, which changes nothing. An
// event the answer no longer lists stays in the report, as last read, until
// its end is confirmed (Config.EndConfirmation). An unreadable part of an
// answer is logged when it first appears, and goes into the report, where
// the controller turns it into an Event on the node.
func (a *Agent) take(obs maintenance.Observation, err error) (r maintenance.Report, ok bool) {
	if m := a.cfg.Metrics; m != nil {
		m.Reads.WithLabelValues(outcome(err)).Inc()
		if err == nil {
			m.LastRead.Set(float64(a.cfg.Clock.Now().UnixNano()) / 1e9)
		}
	}
	switch {
	case err != nil:
		if err.Error() != a.readErr {
			a.log.Error("reading the metadata service; keeping the last report", "err", err)
		}
		a.readErr = err.Error()
		a.ends.Interrupt()
		return maintenance.Report{}, false
	case a.readErr != "":
		a.log.Info("metadata service answers again")
		a.readErr = ""
	}
	now := map[string]bool{}
	for _, r := range obs.Rejected {
		if msg := r.Error(); !a.rejected[msg] && !now[msg] {
			a.log.Warn("ignoring an unreadable part of the metadata answer", "err", r)
		}
		now[r.Error()] = true
	}
	for msg := range a.rejected {
		if !now[msg] {
			a.log.Info("the metadata answer no longer has this unreadable part", "part", msg)
		}
	}
	a.rejected = now
	obs, kept := a.ends.Confirm(obs)
	missing := map[string]bool{}
	for _, id := range kept {
		if !a.missing[id] {
			a.log.Info("maintenance event missing from the metadata answer; kept until its end is confirmed", "id", id,
				"answers", a.cfg.EndConfirmation.Answers, "for", a.cfg.EndConfirmation.For)
		}
		missing[id] = true
	}
	a.missing = missing
	r = maintenance.NewReport(a.cfg.Source, a.cfg.Approver != nil, obs.Events).WithRejected(obs.Rejected)
	if m := a.cfg.Metrics; m != nil {
		m.Events.Set(float64(len(r.Events)))
	}
	return r, true
}

// publish writes the report onto the node when it differs from what is there,
// cordoning the node in the same write when the report brings a new
// involuntary event (cordon.go).
func (a *Agent) publish(ctx context.Context, node *corev1.Node, r maintenance.Report) error {
	value := r.Encode()
	if node.Annotations[contract.AnnotationMaintenanceEvents] == value || value == a.written && node.ResourceVersion == a.writtenOver {
		return nil
	}
	var err error
	if e, ok := a.cordonFor(node, r); ok {
		err = a.reportAndCordon(ctx, node, r, value, e)
	} else {
		err = a.annotate(ctx, map[string]any{contract.AnnotationMaintenanceEvents: value})
	}
	if m := a.cfg.Metrics; m != nil {
		m.Writes.WithLabelValues(outcome(err)).Inc()
	}
	if err != nil {
		return err
	}
	a.written, a.writtenOver = value, node.ResourceVersion
	return nil
}

// logChanges logs the events that are new or changed since they were last
// logged, and those that are over.
func (a *Agent) logChanges(r maintenance.Report) {
	current := map[string]bool{}
	for _, e := range r.Events {
		current[e.ID] = true
		if old, ok := a.logged[e.ID]; ok && old.Status == e.Status && old.NotBefore.Equal(e.NotBefore) && old.Deadline.Equal(e.Deadline) && old.Type == e.Type {
			continue
		}
		a.log.Info("maintenance event", "id", e.ID, "type", e.Type, "status", e.Status, "notBefore", e.NotBefore,
			"deadline", e.Deadline, "initiator", e.Initiator, "duration", lasts(e))
		a.logged[e.ID] = e
	}
	for id := range a.logged {
		if !current[id] {
			a.log.Info("maintenance event over", "id", id)
			delete(a.logged, id)
		}
	}
}

// approve starts the event the controller asked for, once.
func (a *Agent) approve(ctx context.Context, node *corev1.Node, seen *maintenance.Report) error {
	id := node.Annotations[contract.AnnotationMaintenanceApprove]
	if id == "" || a.cfg.Approver == nil || seen == nil || maintenance.Approved(node, id) {
		return nil
	}
	if e, ok := seen.Find(id); !ok || e.Status != maintenance.StatusScheduled {
		return nil // gone or already started: nothing to approve
	}
	err := a.cfg.Approver.Approve(ctx, id)
	if m := a.cfg.Metrics; m != nil {
		m.Approvals.WithLabelValues(outcome(err)).Inc()
	}
	if err != nil {
		return fmt.Errorf("approving event %s: %w", id, err)
	}
	a.log.Info("approved event", "id", id)
	// Keep only the approvals of events still announced, so the list stays short.
	done := slices.DeleteFunc(strings.Split(node.Annotations[contract.AnnotationMaintenanceApproved], ","), func(s string) bool {
		_, announced := seen.Find(s)
		return s == "" || !announced
	})
	return a.annotate(ctx, map[string]any{contract.AnnotationMaintenanceApproved: strings.Join(append(done, id), ",")})
}

func (a *Agent) annotate(ctx context.Context, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	if _, err := a.client.CoreV1().Nodes().Patch(ctx, a.cfg.Node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching node %s: %w", a.cfg.Node, err)
	}
	return nil
}

// latest replaces whatever is waiting in ch with v.
func latest[T any](ch chan T, v any) {
	t, ok := v.(T)
	if !ok {
		return
	}
	select {
	case <-ch:
	default:
	}
	select {
	case ch <- t:
	default:
	}
}

// lasts is how long the event's impact lasts, as text.
func lasts(e maintenance.Event) string {
	if e.Duration == nil {
		return "unknown"
	}
	return e.Duration.String()
}
