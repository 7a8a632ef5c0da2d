package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
)

var eventColumns = []column[api.Event]{
	{"TIME", func(e api.Event) string { return cellTime(e.Time) }},
	{"ACTOR", func(e api.Event) string { return e.Actor }},
	{"ACTION", func(e api.Event) string { return e.Action }},
	{"KIND", func(e api.Event) string { return e.Kind }},
	{"KEY", func(e api.Event) string { return e.Key }},
}

// newEventsCommand reads the audit log: who changed what, newest first.
func newEventsCommand() *cobra.Command {
	c := &cobra.Command{Use: "events", Short: "Read the audit log"}
	c.AddCommand(&cobra.Command{
		Use:   "list [Kind=machines] [Key=UUID] [Actor=NAME] [limit=N]",
		Short: "List audit events, newest first",
		RunE: func(cmd *cobra.Command, args []string) error {
			filters, err := parseFilters(args)
			if err != nil {
				return err
			}
			events, err := regionClient(cmd).Events(cmd.Context(), filters)
			if err != nil {
				return err
			}
			return render(cmd, events, events, eventColumns)
		},
	})
	return c
}
