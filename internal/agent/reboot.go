package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// Like kured, the agent reads the OS's reboot-required sentinel: a file
// (Ubuntu's unattended-upgrades writes /var/run/reboot-required) or a command
// that exits 0 when a reboot is due. It reports what it finds as
// contract.AnnotationRebootRequired on its own node, valued with when it
// first found it, for the controller's RebootRequired method
// (docs/design/health.md). It never reboots anything itself.
//
// The time survives restarts: a node that carries a valid time while the
// sentinel stays keeps it. A sentinel that cannot be read (a command that
// does not start, times out or is killed) says nothing: the annotation stays
// as it is, never added on a guess nor removed on one.

// DefaultRebootSentinel is where Ubuntu's unattended-upgrades (and
// Debian's, with update-notifier-common) leaves its sentinel.
const DefaultRebootSentinel = "/var/run/reboot-required"

// DefaultRebootCheckPeriod is how often the sentinel is read (kured: 1h).
const DefaultRebootCheckPeriod = time.Minute

// DefaultSentinelTimeout bounds a sentinel command's run.
const DefaultSentinelTimeout = 10 * time.Second

// A Sentinel says whether the OS asks for a reboot. An error means it cannot
// tell, which is never taken as a yes.
type Sentinel interface {
	RebootRequired(ctx context.Context) (bool, error)
	// String names the sentinel, for logs.
	String() string
}

var (
	_ Sentinel = FileSentinel{}
	_ Sentinel = CommandSentinel{}
)

// FileSentinel asks for a reboot while its file exists.
type FileSentinel struct {
	Path string
}

// RebootRequired says whether the file exists; an error other than its
// absence (a path through a file, a directory it may not read) cannot tell.
func (s FileSentinel) RebootRequired(context.Context) (bool, error) {
	_, err := os.Stat(s.Path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("reading the reboot sentinel: %w", err)
}

func (s FileSentinel) String() string { return "file " + s.Path }

// CommandSentinel asks for a reboot when its command exits 0, as kured's
// --reboot-sentinel-command does; any other exit code is a no. It runs in the
// agent's own container, with the agent's user and files.
type CommandSentinel struct {
	// Args is the command and its arguments.
	Args []string
	// Timeout bounds a run (DefaultSentinelTimeout when zero).
	Timeout time.Duration
}

// RebootRequired runs the command. A command that cannot start, does not
// exit within the timeout or is killed by a signal cannot tell.
func (s CommandSentinel) RebootRequired(ctx context.Context) (bool, error) {
	if len(s.Args) == 0 {
		return false, errors.New("running the reboot sentinel command: no command")
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultSentinelTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Args[0], s.Args[1:]...) //nolint:gosec // the operator's own command, by design (--reboot-sentinel-command)
	// A child that keeps the command's output open must not hold the agent
	// past the timeout.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return false, fmt.Errorf("running the reboot sentinel command %q: no exit within %s", s, timeout)
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return false, nil
	}
	return false, fmt.Errorf("running the reboot sentinel command %q: %w", s, err)
}

func (s CommandSentinel) String() string { return strings.Join(s.Args, " ") }

// RebootCheck is how the agent reads the reboot sentinel.
type RebootCheck struct {
	// Sentinel is read every Period; nil turns the check off, and the agent
	// then leaves the annotation alone: a person, or the sandbox, may set it.
	Sentinel Sentinel
	// Period between reads (DefaultRebootCheckPeriod when zero).
	Period time.Duration
	// Clock ticks the reads (the real clock when nil).
	Clock clock.WithTicker
}

// sentinelReading is one read of the sentinel.
type sentinelReading struct {
	required bool
	err      error
}

// rebootState is what the agent knows of the sentinel, kept by Run's loop.
type rebootState struct {
	known    bool      // the sentinel was read
	required bool      // it asks for a reboot
	since    time.Time // when the agent, or one before it, first found it so
	readErr  string    // the last failure to read it, logged once
	writeErr string    // the last failure to write the node, logged once
	// written is the value last written ("" removed it) over the node at
	// resourceVersion writtenOver, once wrote: a node still at that version
	// is the cache not yet showing the write, and is not written again.
	written, writtenOver string
	wrote                bool
}

// checkReboots reads the sentinel at once and then every period, sending
// each reading to out, until ctx ends.
func (a *Agent) checkReboots(ctx context.Context, out chan sentinelReading) {
	rc := a.cfg.Reboot
	ticker := rc.Clock.NewTicker(rc.Period)
	defer ticker.Stop()
	for {
		required, err := rc.Sentinel.RebootRequired(ctx)
		if ctx.Err() != nil {
			return
		}
		latest(out, sentinelReading{required: required, err: err})
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// takeReboot takes in one reading of the sentinel and sets the gauge. A
// reading that cannot tell is logged (once while it lasts) and changes
// nothing else.
func (a *Agent) takeReboot(node *corev1.Node, r sentinelReading) {
	st := &a.reboot
	if r.err != nil {
		if r.err.Error() != st.readErr {
			a.log.Error("cannot tell whether the node needs a reboot; leaving its annotation as it is", "err", r.err, "annotation", contract.AnnotationRebootRequired)
		}
		st.readErr = r.err.Error()
		return
	}
	if st.readErr != "" {
		a.log.Info("the reboot sentinel reads again", "sentinel", a.cfg.Reboot.Sentinel.String())
		st.readErr = ""
	}
	if m := a.cfg.Metrics; m != nil {
		m.RebootRequired.Set(map[bool]float64{false: 0, true: 1}[r.required])
	}
	if r.required && (!st.known || !st.required) {
		// A time on the node is from this agent before a restart, or an
		// earlier one: the sentinel has been there since then.
		st.since = a.cfg.Clock.Now().UTC()
		if since, ok := rebootSince(node); ok {
			st.since = since
		}
	}
	st.known, st.required = true, r.required
}

// publishReboot brings the node's annotation in line with the sentinel: the
// time it was first found while it is there, nothing once it is gone. It
// writes only what differs, so an unchanged sentinel costs no write, and
// logs each write.
func (a *Agent) publishReboot(ctx context.Context, node *corev1.Node) {
	st := &a.reboot
	if !st.known {
		return
	}
	want := ""
	if st.required {
		want = st.since.Format(time.RFC3339)
	}
	have, ok := node.Annotations[contract.AnnotationRebootRequired]
	_, valid := rebootSince(node)
	if want == "" && !ok || want != "" && valid ||
		st.wrote && want == st.written && node.ResourceVersion == st.writtenOver {
		return
	}
	var value any = want
	if want == "" {
		value = nil // a merge patch's null removes the key
	}
	err := a.annotate(ctx, map[string]any{contract.AnnotationRebootRequired: value})
	switch {
	case err != nil:
		if err.Error() != st.writeErr {
			a.log.Error("writing the reboot-required annotation onto the node", "err", err)
		}
		st.writeErr = err.Error()
		return
	case st.writeErr != "":
		st.writeErr = ""
	}
	if want != "" {
		a.log.Info("the node needs a reboot", "sentinel", a.cfg.Reboot.Sentinel.String(), "since", want, "was", have)
	} else {
		a.log.Info("the node no longer needs a reboot", "sentinel", a.cfg.Reboot.Sentinel.String(), "was", have)
	}
	st.written, st.writtenOver, st.wrote = want, node.ResourceVersion, true
}

// rebootSince reads the node's annotation: ok when it holds an RFC 3339 time.
func rebootSince(node *corev1.Node) (time.Time, bool) {
	v, ok := node.Annotations[contract.AnnotationRebootRequired]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
