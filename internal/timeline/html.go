package timeline

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
)

//go:embed timeline.html.tmpl
var page string

var pageTemplate = template.Must(template.New("timeline").Parse(page))

// Write writes the timeline as one HTML file that needs nothing else: the
// data travels inside it as JSON and a short script draws it as SVG, so it
// opens offline, in any browser, from a ticket or a chat.
func Write(w io.Writer, t Timeline) error {
	data, err := json.Marshal(t) // escapes <, > and &: safe inside a script element
	if err != nil {
		return fmt.Errorf("encoding the timeline: %w", err)
	}
	return pageTemplate.Execute(w, struct {
		Title string
		Data  template.JS
	}{t.Title, template.JS(data)}) //nolint:gosec // JSON from json.Marshal, HTML-escaped
}

// WriteFile writes the timeline to path, through a temporary file in the
// same directory so a reader never sees half a file.
func WriteFile(path string, t Timeline) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".timeline-*.html")
	if err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := Write(tmp, t); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { //nolint:gosec // a page meant to be shared
		return fmt.Errorf("writing the timeline: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	return nil
}
