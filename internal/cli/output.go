package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// outputFormat is the value of -o/--output: text (the default), wide (text
// with every column a command has), or json and yaml (the same document,
// for scripts).
type outputFormat string

const (
	outputText outputFormat = "text"
	outputWide outputFormat = "wide"
	outputJSON outputFormat = "json"
	outputYAML outputFormat = "yaml"
)

// outputHelp is the -o flag's help, the same on every command.
const outputHelp = "output format: text, wide (more columns), json or yaml"

func parseOutput(s string) (outputFormat, error) {
	switch f := outputFormat(s); f {
	case "":
		return outputText, nil
	case outputText, outputWide, outputJSON, outputYAML:
		return f, nil
	}
	return "", fmt.Errorf("unknown --output %q: use text, wide, json or yaml", s)
}

// structured says the output is a document, not text for people.
func (f outputFormat) structured() bool { return f == outputJSON || f == outputYAML }

// writeStructured writes v as an indented JSON document, or as YAML (the
// same fields: YAML made from the JSON encoding, as kubectl does).
func writeStructured(w io.Writer, f outputFormat, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if f == outputYAML {
		if raw, err = yaml.JSONToYAML(raw); err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", raw)
	return err
}
