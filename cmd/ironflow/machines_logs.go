package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// logsPage is how many messages one request of machines logs asks for.
const logsPage = 1000

// logsPollInterval is how often machines logs --follow asks for new messages.
const logsPollInterval = time.Second

func newMachineLogsCommand() *cobra.Command {
	var follow bool
	var since string
	c := &cobra.Command{
		Use:   "logs KEY [--follow] [--since DURATION|TIME]",
		Short: "Show a machine's syslog, received by its rack, oldest first",
		Long: "Show the syslog messages the machine's rack received from it, oldest first, one per line:\n" +
			"received time, source address, severity, host, app[pid] and text (control and format\n" +
			"characters are printed escaped: \\x1b, \\u202e). -o json prints one JSON object per line.\n" +
			"--since takes a duration (1h: the last hour) or an RFC 3339 time; --follow keeps printing\n" +
			"new messages until interrupted. " + machines.keyHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			filters := url.Values{"limit": {strconv.Itoa(logsPage)}}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				filters.Set("Since", t.UTC().Format(time.RFC3339Nano))
			}
			print, err := logPrinter(cmd)
			if err != nil {
				return err
			}
			err = followLogs(cmd.Context(), regionClient(cmd), machines.key(args[0]), filters, follow, print)
			if cmd.Context().Err() != nil {
				return nil // interrupted: a clean end of --follow
			}
			return err
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new messages until interrupted")
	c.Flags().StringVar(&since, "since", "", "only messages received since this duration ago (1h) or RFC 3339 time")
	return c
}

// parseSince reads a duration before now or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q is neither a non-negative duration (1h30m) nor an RFC 3339 time (2026-12-01T15:00:00Z)", s)
	}
	return t, nil
}

// followLogs prints the machine's messages page by page, each page asking for those after the
// last one printed; with follow it then polls for new ones until ctx ends.
func followLogs(ctx context.Context, c *client.Client, key string, filters url.Values, follow bool, print func(api.SyslogMessage) error) error {
	for {
		page, err := c.MachineLogs(ctx, key, filters)
		if err != nil {
			return err
		}
		for _, m := range page {
			syslogmsg.EscapeRecord(&m) // a region that does not escape must not reach the terminal raw
			if err := print(m); err != nil {
				return err
			}
			filters.Set("After", strconv.FormatInt(m.ID, 10))
		}
		if len(page) == logsPage {
			continue
		}
		if !follow {
			return nil
		}
		if err := backoff.Sleep(ctx, logsPollInterval); err != nil {
			return err
		}
	}
}

// logPrinter prints messages as text lines (the default, and -o table), or as JSON lines
// with -o json.
func logPrinter(cmd *cobra.Command) (func(api.SyslogMessage) error, error) {
	w := cmd.OutOrStdout()
	if !cmd.Flags().Changed(flagOutput) {
		return func(m api.SyslogMessage) error { return writeLogLine(w, m) }, nil
	}
	switch outputFormat(cmd.Flags().Lookup(flagOutput).Value.String()) {
	case formatJSON:
		enc := json.NewEncoder(w)
		return func(m api.SyslogMessage) error { return enc.Encode(m) }, nil
	case formatYAML:
		return nil, fmt.Errorf("machines logs prints text lines or, with -o json, JSON lines; not yaml")
	}
	return func(m api.SyslogMessage) error { return writeLogLine(w, m) }, nil
}

// severities are the RFC 5424 severity names.
var severities = [8]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

func writeLogLine(w io.Writer, m api.SyslogMessage) error {
	tag := m.App
	if m.ProcID != "" {
		tag += "[" + m.ProcID + "]"
	}
	if tag != "" {
		tag += ": "
	}
	host := m.Hostname
	if host == "" {
		host = "-"
	}
	_, err := fmt.Fprintf(w, "%s %s %-7s %s %s%s\n", m.Received.UTC().Format(time.RFC3339), m.Addr, severities[m.Severity&7], host, tag, m.Text)
	return err
}
