package cli

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// -v is klog's verbosity: it turns on the client libraries' levels, and from
// 4 our debug lines; bad values are refused by name.
func TestVerbosityIsKlogs(t *testing.T) {
	for _, c := range []struct {
		v            int
		debug, klog6 bool
	}{{0, false, false}, {4, true, false}, {6, true, true}} {
		log, err := (&logFlags{format: "json", level: "info", verbosity: c.v}).logger()
		if err != nil {
			t.Fatal(err)
		}
		if got := log.Enabled(context.Background(), slog.LevelDebug); got != c.debug {
			t.Errorf("-v %d: debug enabled %v, want %v", c.v, got, c.debug)
		}
		if got := klog.V(6).Enabled(); got != c.klog6 {
			t.Errorf("-v %d: klog V(6) enabled %v, want %v", c.v, got, c.klog6)
		}
		// The client's contextual loggers speak logr, whose V(6) is slog's -6.
		if got := klog.Background().V(6).Enabled(); got != c.klog6 {
			t.Errorf("-v %d: the contextual logger's V(6) enabled %v, want %v", c.v, got, c.klog6)
		}
	}
	if _, err := (&logFlags{format: "json", level: "info", verbosity: -1}).logger(); err == nil || !strings.Contains(err.Error(), "-v -1") {
		t.Errorf("-v -1: %v", err)
	}
	if _, err := (&logFlags{format: "yaml", level: "info"}).logger(); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("--log-format yaml: %v", err)
	}
}
