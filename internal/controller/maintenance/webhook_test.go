package maintenance

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWebhookPostsEveryEventThroughItsTemplate(t *testing.T) {
	bodies := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		bodies <- r.Header.Get("Content-Type") + " " + string(data)
	}))
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	hook, err := NewWebhook(srv.URL, `{{.Kind}}/{{.Name}} {{.Reason}}: {{json .Message}} at {{.Time.Format "15:04"}}`, clk, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go hook.Run(ctx)
	fake := record.NewFakeRecorder(1)
	rec := teeRecorder{EventRecorder: fake, webhook: hook}
	rec.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "aks-spot-0"}}, corev1.EventTypeNormal, "Uncordoned", "back in %s", "service")

	if got := <-fake.Events; got != "Normal Uncordoned back in service" {
		t.Errorf("recorded %q", got)
	}
	select {
	case got := <-bodies:
		if want := `application/json Node/aks-spot-0 Uncordoned: "back in service" at 10:00`; got != want {
			t.Errorf("webhook got %q\nwant %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the webhook was not called")
	}
}

func TestWebhookRefusesBadConfiguration(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	for _, tc := range []struct{ url, tmpl, want string }{
		{"ftp://example.com", "", "--webhook-url"},
		{"not a url", "", "--webhook-url"},
		{"http://127.0.0.1:1", "{{.Nope}}", "--webhook-template"},
		{"http://127.0.0.1:1", "{{.Reason", "--webhook-template"},
	} {
		_, err := NewWebhook(tc.url, tc.tmpl, clk, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWebhook(%q, %q) = %v; want an error naming %s", tc.url, tc.tmpl, err, tc.want)
		}
	}
	if _, err := NewWebhook("https://hooks.example.com/x", "", clk, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("the default template is refused: %v", err)
	}
}
