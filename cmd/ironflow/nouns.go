package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/internal/jsonfields"
	"github.com/ironflow/ironflow/internal/suggest"
	"github.com/ironflow/ironflow/region/client"
)

// noun is one kind of the generic CRUD routes as the CLI shows it. Its verbs are built by
// the methods below so that every noun lists, shows, creates, updates and deletes alike.
type noun[T any] struct {
	kind     string // plural path segment and command name, e.g. "machines"
	one      string // singular, for messages, e.g. "machine"
	resource func(*client.Client) client.Resource[T]
	columns  []column[T]
	// bare is the field a KEY that is neither a UUID nor Field:value names (default Name).
	bare string
	// filter is the list filter of the help's example (default: bare=x).
	filter string
	// deleteFor, when set, deletes an object a migration holds, naming the migration (delete
	// --migration; region/store/holds.go).
	deleteFor func(c *client.Client, ctx context.Context, key, migration string) error
}

// key applies the one rule for KEY arguments: a UUID or Field:value is sent as is, anything
// else is a name (birdy means Name:birdy; for leases, an address). Kinds without such a field
// (jobs) take the argument as it is, and the region says what it accepts.
func (n noun[T]) key(arg string) string {
	field, ok := n.bareField()
	if !ok {
		return arg
	}
	return objectKey(arg, field)
}

// objectKey is arg as a region key: a UUID or Field:value as is, else field:arg.
func objectKey(arg, field string) string {
	if _, err := uuid.Parse(arg); err == nil || strings.Contains(arg, ":") || arg == "" {
		return arg
	}
	return field + ":" + arg
}

// command is the noun's parent command holding verbs.
func (n noun[T]) command(verbs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: n.kind, Short: "Manage " + n.kind}
	c.AddCommand(verbs...)
	return c
}

// crud is the full set of generic verbs.
func (n noun[T]) crud() []*cobra.Command {
	return []*cobra.Command{n.list(), n.show(), n.create(), n.update(), n.remove()}
}

func (n noun[T]) list() *cobra.Command {
	return &cobra.Command{
		Use:   "list [Field=value ...]",
		Short: "List " + n.kind + ", optionally filtered (offset=N and limit=N page)",
		Long: "List " + n.kind + ", optionally filtered by fields (all must match) and paged with offset=N and limit=N.\n\n" +
			"Fields that can be filtered: " + strings.Join(filterableFields[T](), ", ") + ".\n" +
			"A list field matches when it contains the value.",
		Example: fmt.Sprintf("  ironflow %[1]s list\n  ironflow %[1]s list %[2]s -o table\n  ironflow %[1]s list offset=0 limit=10",
			n.kind, n.exampleFilter()),
		RunE: func(cmd *cobra.Command, args []string) error {
			filters, err := parseFilters(args)
			if err != nil {
				return err
			}
			if err := checkFilterFields[T](n.kind, filters); err != nil {
				return err
			}
			items, err := n.resource(regionClient(cmd)).List(cmd.Context(), filters)
			if err != nil {
				return err
			}
			return render(cmd, items, items, n.columns)
		},
	}
}

func (n noun[T]) show() *cobra.Command {
	return &cobra.Command{
		Use:     "show KEY",
		Short:   "Show one " + n.one + " by UUID, Field:value or name",
		Long:    "Show one " + n.one + ". " + n.keyHelp(),
		Example: n.showExamples(),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := n.resource(regionClient(cmd)).Get(cmd.Context(), n.key(args[0]))
			if err != nil {
				return err
			}
			return n.print(cmd, obj)
		},
	}
}

func (n noun[T]) create() *cobra.Command {
	return &cobra.Command{
		Use:   "create JSON|@FILE|-",
		Short: "Create a " + n.one + " from JSON given inline, in a file, or on stdin",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readJSONArg(cmd, args[0])
			if err != nil {
				return err
			}
			var obj T
			if err := decodeStrict(data, &obj); err != nil {
				return fmt.Errorf("%s: %w", n.one, err)
			}
			created, err := n.resource(regionClient(cmd)).Create(cmd.Context(), obj)
			if err != nil {
				return err
			}
			return n.print(cmd, created)
		},
	}
}

func (n noun[T]) update() *cobra.Command {
	return &cobra.Command{
		Use:   "update KEY JSON|@FILE|-",
		Short: "Change fields of a " + n.one + " with a JSON merge patch (null removes)",
		Long:  "Change fields of a " + n.one + " with a JSON merge patch (null removes). " + n.keyHelp(),
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, err := readJSONArg(cmd, args[1])
			if err != nil {
				return err
			}
			// Decoding into the object type catches misspelt fields and wrong types here
			// rather than after a round trip.
			var check T
			if err := decodeStrict(patch, &check); err != nil {
				return fmt.Errorf("%s patch: %w", n.one, err)
			}
			updated, err := n.resource(regionClient(cmd)).Patch(cmd.Context(), n.key(args[0]), patch)
			if err != nil {
				return err
			}
			return n.print(cmd, updated)
		},
	}
}

func (n noun[T]) remove() *cobra.Command {
	var force bool
	var migration string
	c := &cobra.Command{
		Use:   "delete KEY",
		Short: "Delete a " + n.one,
		Long:  "Delete a " + n.one + ". " + n.keyHelp(),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := regionClient(cmd)
			var err error
			switch {
			case migration != "" && force:
				return errors.New("--force and --migration: force does not override a migration's hold; give --migration alone")
			case migration != "":
				err = n.deleteFor(c, cmd.Context(), n.key(args[0]), migration)
			default:
				err = n.resource(c).Delete(cmd.Context(), n.key(args[0]), force)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s %s\n", n.one, args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "delete even if other objects depend on it, where the region allows it")
	if n.deleteFor != nil {
		c.Flags().StringVar(&migration, "migration", "", "the migration (workflow ID migrate-machine/<uuid>) that holds the "+n.one+
			": deletes the stub or copy it left once it has ended (ironflow migrations show names it)")
	}
	return c
}

func (n noun[T]) print(cmd *cobra.Command, obj T) error {
	return render(cmd, obj, []T{obj}, n.columns)
}

// bareField is the field a bare KEY names, and false when T has none.
func (n noun[T]) bareField() (string, bool) {
	field := cmp.Or(n.bare, "Name")
	return field, slices.Contains(filterableFields[T](), field)
}

// keyHelp says how the noun's KEY arguments are written.
func (n noun[T]) keyHelp() string {
	field, ok := n.bareField()
	if !ok {
		return "KEY is a UUID or Field:value."
	}
	return fmt.Sprintf("KEY is a UUID, Field:value (%[1]s:%[2]s) or a bare value meaning %[1]s (%[2]s is %[1]s:%[2]s).",
		field, n.exampleValue())
}

// showExamples are the help's examples of show.
func (n noun[T]) showExamples() string {
	field, ok := n.bareField()
	if !ok {
		return fmt.Sprintf("  ironflow %s show 01d8828f-2f7d-4a1c-a1fa-f668274c7c44", n.kind)
	}
	return fmt.Sprintf("  ironflow %[1]s show %[2]s\n  ironflow %[1]s show %[3]s:%[2]s -o yaml", n.kind, n.exampleValue(), field)
}

// exampleFilter is a list filter for the help's examples.
func (n noun[T]) exampleFilter() string {
	field, _ := n.bareField()
	return cmp.Or(n.filter, field+"="+n.exampleValue())
}

func (n noun[T]) exampleValue() string {
	if n.bare == "Addr" {
		return "10.0.0.5"
	}
	return "x"
}

// filterableFields are the fields of T a list filter can match: those with plain values
// (strings, numbers, booleans and lists of strings).
func filterableFields[T any]() []string {
	var names []string
	for _, f := range jsonfields.Of(reflect.TypeFor[T]()) {
		switch k := f.Type.Kind(); {
		case k == reflect.String, k == reflect.Bool, k >= reflect.Int && k <= reflect.Float64,
			k == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			names = append(names, f.Name)
		}
	}
	return names
}

// pagingParams are the list parameters that are not fields.
var pagingParams = []string{"offset", "limit"}

// checkFilterFields refuses a filter on a field T does not have, suggesting the one meant.
// Field names are exact (the region matches them so); Name=x is right, name=x is not.
func checkFilterFields[T any](kind string, filters url.Values) error {
	fields := jsonfields.Names(jsonfields.Of(reflect.TypeFor[T]()))
	for _, field := range slices.Sorted(maps.Keys(filters)) {
		if slices.Contains(fields, field) || slices.Contains(pagingParams, field) {
			continue
		}
		return fmt.Errorf("%s have no field %q%s; fields that can be filtered: %s",
			kind, field, suggest.Hint(field, fields), strings.Join(filterableFields[T](), ", "))
	}
	return nil
}

// parseFilters turns Field=value arguments into list query parameters.
func parseFilters(args []string) (url.Values, error) {
	filters := url.Values{}
	for _, arg := range args {
		field, value, ok := strings.Cut(arg, "=")
		if !ok || field == "" {
			return nil, fmt.Errorf("filter %q: want Field=value", arg)
		}
		filters.Add(field, value)
	}
	return filters, nil
}

// readJSONArg returns the JSON an argument gives: inline, "@path" for a file, "-" for stdin.
func readJSONArg(cmd *cobra.Command, arg string) ([]byte, error) {
	switch {
	case arg == "-":
		data, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return data, nil
	case strings.HasPrefix(arg, "@"):
		data, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, fmt.Errorf("read JSON file: %w", err)
		}
		return data, nil
	}
	return []byte(arg), nil
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown fields.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("malformed JSON: want an object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON: unexpected data after the object")
	}
	return nil
}
