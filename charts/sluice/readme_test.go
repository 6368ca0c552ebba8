package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	tableStart = "<!-- values table: generated from values.yaml and values.schema.json by readme_test.go; SLUICE_UPDATE_DOCS=1 go test ./charts/sluice -run TestReadmeValuesTable rewrites it -->"
	tableEnd   = "<!-- end of the values table -->"
)

// The chart README's table of values is generated from values.yaml (each
// value, its default and the comment above or beside it) and the schema (its
// type and allowed values): it cannot drift from what the chart takes.
func TestReadmeValuesTable(t *testing.T) {
	table := valuesTable(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(readme), tableStart)
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the table's markers:\n%s\n%s", tableStart, tableEnd)
	}
	want := before + tableStart + "\n" + table + tableEnd + after
	if want == string(readme) {
		return
	}
	if os.Getenv("SLUICE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile("README.md", []byte(want), 0o644); err != nil { //nolint:gosec // a doc
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the values table in charts/sluice/README.md is stale: run SLUICE_UPDATE_DOCS=1 go test ./charts/sluice -run TestReadmeValuesTable")
}

// valuesTable is a Markdown table: a row per leaf value (lists and empty
// maps are leaves), in the file's order.
func valuesTable(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| value | type | default | what it does |\n| --- | --- | --- | --- |\n")
	// A section with a comment gets a row of its own, which also speaks for
	// the values under it; any other value must say what it does.
	var walk func(n *yaml.Node, path string, schema map[string]any, described bool)
	walk = func(n *yaml.Node, path string, schema map[string]any, described bool) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			sub := property(schema, key.Value)
			doc := comment(key.HeadComment, val.LineComment, key.LineComment)
			if val.Kind == yaml.MappingNode && len(val.Content) > 0 {
				if doc != "" {
					fmt.Fprintf(&b, "| `%s` | %s |  | %s |\n", p, typeOf(sub), cell(doc))
				}
				walk(val, p, sub, described || doc != "")
				continue
			}
			if doc == "" && !described {
				t.Errorf("values.yaml: %s says nothing of what it does: give it a comment", p)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p, typeOf(sub), defaultOf(t, val), cell(doc))
		}
	}
	walk(doc.Content[0], "", schema, false)
	return b.String()
}

func property(schema map[string]any, key string) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	sub, _ := props[key].(map[string]any)
	return sub
}

// typeOf says the schema's type, with its allowed values or pattern.
func typeOf(schema map[string]any) string {
	if schema == nil {
		return ""
	}
	typ := fmt.Sprint(schema["type"])
	if enum, ok := schema["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, v := range enum {
			vals[i] = fmt.Sprint(v)
		}
		return typ + ": " + strings.Join(vals, ", ")
	}
	if _, ok := schema["pattern"]; ok && typ == "string" {
		if strings.Contains(fmt.Sprint(schema["pattern"]), "ns|us") {
			return "duration"
		}
	}
	if lo, ok := schema["minimum"]; ok {
		typ += fmt.Sprintf(" ≥ %v", lo)
	}
	return typ
}

func defaultOf(t *testing.T, n *yaml.Node) string {
	t.Helper()
	if n.Kind == yaml.ScalarNode {
		if n.Value == "" {
			return `""`
		}
		return "`" + n.Value + "`"
	}
	var v any
	if err := n.Decode(&v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return "`" + string(out) + "`"
}

// comment joins a value's comments into one line, without the #s.
func comment(parts ...string) string {
	var words []string
	for _, p := range parts {
		for _, line := range strings.Split(p, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
			if line != "" {
				words = append(words, line)
			}
		}
	}
	return strings.Join(words, " ")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
