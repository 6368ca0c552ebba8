package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
)

// logFlags are the structured-logging flags of the long-running commands.
type logFlags struct {
	format string
	level  string
}

func (f *logFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.format, "log-format", "json", "log format: json or text")
	fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (f *logFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use json or text", f.format)
}

// envOr is the flag default taken from an environment variable.
func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
