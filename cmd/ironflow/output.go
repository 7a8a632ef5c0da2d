package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFormat is the -o flag; it refuses unknown formats while flags are parsed, before
// any request is sent.
type outputFormat string

const (
	formatJSON  outputFormat = "json"
	formatYAML  outputFormat = "yaml"
	formatTable outputFormat = "table"
)

func (f *outputFormat) String() string { return string(*f) }
func (f *outputFormat) Type() string   { return "format" }

func (f *outputFormat) Set(s string) error {
	switch v := outputFormat(s); v {
	case formatJSON, formatYAML, formatTable:
		*f = v
		return nil
	}
	return fmt.Errorf("unknown output format %q (want json, yaml or table)", s)
}

// column is one column of the table format.
type column[T any] struct {
	header string
	value  func(T) string
}

// render writes v in the -o format; the table format shows rows under cols.
func render[T any](cmd *cobra.Command, v any, rows []T, cols []column[T]) error {
	w := cmd.OutOrStdout()
	switch outputFormat(cmd.Flags().Lookup(flagOutput).Value.String()) {
	case formatYAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = w.Write(data)
		return err
	case formatTable:
		return writeTable(w, rows, cols)
	default:
		return writeJSON(w, v)
	}
}

// writeJSON indents by two spaces as drpcli does, and leaves <, > and & readable.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeTable[T any](w io.Writer, rows []T, cols []column[T]) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	for _, row := range rows {
		for i, c := range cols {
			// A tab or newline inside a value would break the alignment.
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c.value(row))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Cell formatters shared by the column lists of the nouns.

func cellBool(b bool) string { return strconv.FormatBool(b) }
func cellInt(n int) string   { return strconv.Itoa(n) }
func cellList(s []string) string {
	return strings.Join(s, ",")
}

func cellTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}
