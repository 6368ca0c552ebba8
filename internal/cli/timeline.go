package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// checkTimelinePath refuses a --timeline file that could not be written,
// before anything is drained: finding out after the drain loses the picture.
func checkTimelinePath(path string) error {
	if path == "" {
		return nil
	}
	if !strings.EqualFold(filepath.Ext(path), ".html") && !strings.EqualFold(filepath.Ext(path), ".htm") {
		return fmt.Errorf("--timeline %q: the picture is an HTML page; name a .html file", path)
	}
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return fmt.Errorf("--timeline %q: directory %s does not exist", path, dir)
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return fmt.Errorf("--timeline %q is a directory: name a file", path)
	}
	return nil
}

// writeTimeline draws the drain from its steps and report.
func writeTimeline(path, title string, steps *timeline.Recorder, report *drain.Report) error {
	if err := timeline.WriteFile(path, timeline.FromDrain(title, steps.Steps(), report)); err != nil {
		return fmt.Errorf("--timeline: %w", err)
	}
	return nil
}

// describeNodes names the nodes for a title, the first few of many.
func describeNodes(nodes []string) string {
	const shown = 5
	if len(nodes) <= shown {
		return strings.Join(nodes, " ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:shown], " "), len(nodes)-shown)
}
