package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/client"
)

// noun is one kind of the generic CRUD routes as the CLI shows it. Its verbs are built by
// the methods below so that every noun lists, shows, creates, updates and deletes alike.
type noun[T any] struct {
	kind     string // plural path segment and command name, e.g. "machines"
	one      string // singular, for messages, e.g. "machine"
	resource func(*client.Client) client.Resource[T]
	columns  []column[T]
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
		RunE: func(cmd *cobra.Command, args []string) error {
			filters, err := parseFilters(args)
			if err != nil {
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
		Use:   "show KEY",
		Short: "Show one " + n.one + " by UUID, Name or Field:value",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := n.resource(regionClient(cmd)).Get(cmd.Context(), args[0])
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
			updated, err := n.resource(regionClient(cmd)).Patch(cmd.Context(), args[0], patch)
			if err != nil {
				return err
			}
			return n.print(cmd, updated)
		},
	}
}

func (n noun[T]) remove() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "delete KEY",
		Short: "Delete a " + n.one,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := n.resource(regionClient(cmd)).Delete(cmd.Context(), args[0], force); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s %s\n", n.one, args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "delete even if other objects depend on it, where the region allows it")
	return c
}

func (n noun[T]) print(cmd *cobra.Command, obj T) error {
	return render(cmd, obj, []T{obj}, n.columns)
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
