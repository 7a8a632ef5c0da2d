package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestParseLogConfig(t *testing.T) {
	for _, tc := range []struct {
		level, format string
		want          logConfig
		wantErr       string
	}{
		{level: "info", format: "text", want: logConfig{level: slog.LevelInfo}},
		{level: "debug", format: "json", want: logConfig{level: slog.LevelDebug, json: true}},
		{level: "WARN", format: "JSON", want: logConfig{level: slog.LevelWarn, json: true}},
		{level: "error", format: "text", want: logConfig{level: slog.LevelError}},
		{level: "verbose", format: "text", wantErr: `--log-level (env IRONFLOW_LOG_LEVEL): "verbose" is not one of debug, info, warn, error`},
		{level: "", format: "text", wantErr: `--log-level (env IRONFLOW_LOG_LEVEL): "" is not one of`},
		{level: "info", format: "logfmt", wantErr: `--log-format (env IRONFLOW_LOG_FORMAT): "logfmt" is not one of text, json`},
	} {
		t.Run(tc.level+"/"+tc.format, func(t *testing.T) {
			got, err := parseLogConfig(tc.level, tc.format)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseLogConfig = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestDaemonLoggerFlagsAndEnv checks that the flags win over the environment, which wins
// over the defaults, and that the logger honours level and format.
func TestDaemonLoggerFlagsAndEnv(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		wantDebug bool // a debug record is written
		wantInfo  bool
		wantJSON  bool
	}{
		{name: "defaults: info, text", wantInfo: true},
		{name: "env", env: map[string]string{envLogLevel: "debug", envLogFormat: "json"}, wantDebug: true, wantInfo: true, wantJSON: true},
		{name: "flags over env", args: []string{"--log-level", "warn", "--log-format", "text"},
			env: map[string]string{envLogLevel: "debug", envLogFormat: "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			cmd := withEnvFallbacks(&cobra.Command{Use: "daemon", RunE: func(cmd *cobra.Command, _ []string) error {
				logger, err := daemonLogger(cmd, &out)
				if err != nil {
					return err
				}
				logger.Debug("dbg")
				logger.Info("inf")
				logger.Warn("wrn")
				return nil
			}})
			addLogFlags(cmd)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			if got := strings.Contains(text, "dbg"); got != tc.wantDebug {
				t.Errorf("debug record written = %v, want %v:\n%s", got, tc.wantDebug, text)
			}
			if got := strings.Contains(text, "inf"); got != tc.wantInfo {
				t.Errorf("info record written = %v, want %v:\n%s", got, tc.wantInfo, text)
			}
			first, _, _ := strings.Cut(text, "\n")
			if got := json.Valid([]byte(first)); got != tc.wantJSON {
				t.Errorf("record is JSON = %v, want %v: %s", got, tc.wantJSON, first)
			}
		})
	}
}

func TestDaemonLoggerBadEnvNamesTheFlag(t *testing.T) {
	t.Setenv(envLogFormat, "xml")
	cmd := &cobra.Command{Use: "daemon"}
	addLogFlags(cmd)
	if err := parseWithEnv(cmd, nil); err != nil {
		t.Fatal(err)
	}
	_, err := daemonLogger(cmd, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--log-format") || !strings.Contains(err.Error(), `"xml"`) {
		t.Fatalf("error = %v, want one naming --log-format and the value", err)
	}
}
