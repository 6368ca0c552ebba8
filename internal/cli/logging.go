package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// logFlags are the structured-logging flags of the long-running commands.
type logFlags struct {
	format    string
	level     string
	verbosity int
}

func (f *logFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.format, "log-format", "json", "log format: json or text")
	fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVarP(&f.verbosity, "v", "v", 0, "log verbosity, as klog's and kubectl's -v: 4 and up also logs debug lines (as --log-level debug), 6 and up the Kubernetes client's requests")
}

// logger builds the process's logger, and sends the Kubernetes client
// libraries' klog lines (leader election, reflectors, request traces at -v 6)
// through it, so every line is in one format.
func (f *logFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", f.level)
	}
	if f.verbosity < 0 {
		return nil, fmt.Errorf("-v %d: use 0 or more", f.verbosity)
	}
	// logr's V(n), which klog's contextual loggers speak, is slog level
	// -n: -v 4 lets our debug lines (slog's -4) through, -v 6 the client's
	// request traces.
	level = min(level, slog.Level(-f.verbosity))
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch f.format {
	case "json":
		log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	default:
		return nil, fmt.Errorf("--log-format %q: use json or text", f.format)
	}
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	if err := klogFlags.Set("v", strconv.Itoa(f.verbosity)); err != nil {
		return nil, fmt.Errorf("-v %d: %w", f.verbosity, err)
	}
	klog.SetSlogLogger(log)
	return log, nil
}

// envOr is the flag default taken from an environment variable.
func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
