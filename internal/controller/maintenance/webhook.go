package maintenance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// DefaultWebhookTemplate is the body sent when no template is given: a small
// JSON document (and Slack-compatible, through its "text" field).
const DefaultWebhookTemplate = `{"text": {{printf "%s %s: %s" .Kind .Name .Message | json}}, "kind": {{json .Kind}}, "name": {{json .Name}}, "type": {{json .Type}}, "reason": {{json .Reason}}, "message": {{json .Message}}, "time": {{json .Time}}}`

// Notification is what a webhook template sees.
type Notification struct {
	Kind, Name, Namespace string
	Type, Reason, Message string
	Time                  time.Time
}

// Webhook posts every Event the controller records to a URL, rendered through
// a Go template. It never blocks the controller: notifications queue, and the
// oldest are dropped (and logged) when the receiver falls behind.
type Webhook struct {
	url   string
	tmpl  *template.Template
	http  *http.Client
	clock clock.PassiveClock
	log   *slog.Logger
	queue chan Notification
}

// NewWebhook validates the URL and parses the template (DefaultWebhookTemplate
// when empty); its errors name the flag to fix.
func NewWebhook(rawURL, body string, clk clock.PassiveClock, log *slog.Logger) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--webhook-url %q: give an http or https URL", rawURL)
	}
	if body == "" {
		body = DefaultWebhookTemplate
	}
	tmpl, err := template.New("webhook").Funcs(template.FuncMap{"json": jsonString}).Option("missingkey=error").Parse(body)
	if err != nil {
		return nil, fmt.Errorf("--webhook-template: %w", err)
	}
	if err := tmpl.Execute(&bytes.Buffer{}, Notification{}); err != nil {
		return nil, fmt.Errorf("--webhook-template: %w", err)
	}
	return &Webhook{url: rawURL, tmpl: tmpl, http: &http.Client{Timeout: 10 * time.Second}, clock: clk, log: log, queue: make(chan Notification, 256)}, nil
}

// Run sends queued notifications until ctx ends.
func (w *Webhook) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-w.queue:
			if err := w.send(ctx, n); err != nil {
				w.log.Error("sending webhook", "reason", n.Reason, "err", err)
			}
		}
	}
}

// Notify queues a notification.
func (w *Webhook) Notify(n Notification) {
	select {
	case w.queue <- n:
	default:
		w.log.Error("webhook queue full; dropping a notification", "reason", n.Reason, "name", n.Name)
	}
}

func (w *Webhook) send(ctx context.Context, n Notification) error {
	var body bytes.Buffer
	if err := w.tmpl.Execute(&body, n); err != nil {
		return fmt.Errorf("rendering template: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, &body)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http.Do(req)
	if err != nil {
		return fmt.Errorf("posting: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("posting: %s", resp.Status)
	}
	return nil
}

// WithWebhook returns a recorder that records every Event with rec and, when
// webhook is set, also sends it there; the controller hands it to everything
// that records (drains, the NodePool controller), so the webhook sees all.
func WithWebhook(rec record.EventRecorder, webhook *Webhook) record.EventRecorder {
	if webhook == nil {
		return rec
	}
	return teeRecorder{EventRecorder: rec, webhook: webhook}
}

// teeRecorder records an Event and, when a webhook is set, also sends it there.
type teeRecorder struct {
	record.EventRecorder
	webhook *Webhook
}

func (t teeRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	t.EventRecorder.Event(obj, eventtype, reason, message)
	if t.webhook == nil {
		return
	}
	n := Notification{Type: eventtype, Reason: reason, Message: message, Time: t.webhook.clock.Now()}
	if m, err := meta.Accessor(obj); err == nil {
		n.Name, n.Namespace = m.GetName(), m.GetNamespace()
	}
	n.Kind = obj.GetObjectKind().GroupVersionKind().Kind
	if n.Kind == "" { // typed objects from a clientset carry no TypeMeta
		n.Kind = reflect.Indirect(reflect.ValueOf(obj)).Type().Name()
	}
	t.webhook.Notify(n)
}

func (t teeRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	t.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (t teeRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	t.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// jsonString quotes a value for a JSON template.
func jsonString(v any) (string, error) {
	data, err := json.Marshal(v)
	return string(data), err
}
