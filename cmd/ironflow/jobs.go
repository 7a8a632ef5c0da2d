package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var jobs = noun[api.Job]{
	kind:     api.KindJobs,
	one:      "job",
	resource: (*client.Client).Jobs,
	filter:   "Machine=01d8828f-2f7d-4a1c-a1fa-f668274c7c44",
	columns: []column[api.Job]{
		{"UUID", func(j api.Job) string { return j.Uuid }},
		{"MACHINE", func(j api.Job) string { return j.Machine }},
		{"TASK", func(j api.Job) string { return j.Task }},
		{"STATE", func(j api.Job) string { return j.State }},
		{"EXIT", func(j api.Job) string { return j.ExitState }},
		{"START", func(j api.Job) string { return cellTime(j.StartTime) }},
		{"END", func(j api.Job) string { return cellTime(j.EndTime) }},
	},
}

// Jobs are written by agents, not by hand: the CLI reads them.
func newJobsCommand() *cobra.Command {
	return jobs.command(jobs.list(), jobs.show(), newJobLogCommand())
}

func newJobLogCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "log KEY",
		Short: "Print the log of a job",
		Long:  "Print the log of a job. " + jobs.keyHelp(),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := regionClient(cmd).JobLog(cmd.Context(), jobs.key(args[0]))
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
}
