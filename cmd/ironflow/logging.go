package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// Log flags of every daemon (region serve, rack serve, worker, agent, dev).
const (
	flagLogLevel  = "log-level"
	flagLogFormat = "log-format"
)

var (
	envLogLevel  = ironflowScope.name(flagLogLevel)
	envLogFormat = ironflowScope.name(flagLogFormat)
)

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// addLogFlags adds --log-level and --log-format to a daemon's command.
func addLogFlags(c *cobra.Command) {
	f := ironflowScope.on(c.Flags())
	f.string(new(string), flagLogLevel, "info", "least severe level logged: debug, info, warn or error")
	f.string(new(string), flagLogFormat, "text", "log format: text or json")
}

// daemonLogger is the logger of a daemon, writing to w as its log flags say.
func daemonLogger(cmd *cobra.Command, w io.Writer) (*slog.Logger, error) {
	lc, err := logFlags(cmd)
	if err != nil {
		return nil, err
	}
	return lc.logger(w), nil
}

// logFlags reads a daemon's log flags, for a daemon that checks them before it opens its log.
func logFlags(cmd *cobra.Command) (logConfig, error) {
	return parseLogConfig(flagValue(cmd, flagLogLevel), flagValue(cmd, flagLogFormat))
}

// logConfig is what the log flags ask for.
type logConfig struct {
	level slog.Level
	json  bool
}

// parseLogConfig reads a level ("debug", "info", "warn", "error") and a format ("text",
// "json"), in any case.
func parseLogConfig(level, format string) (logConfig, error) {
	lvl, ok := logLevels[strings.ToLower(level)]
	if !ok {
		return logConfig{}, fmt.Errorf("--%s (env %s): %q is not one of debug, info, warn, error", flagLogLevel, envLogLevel, level)
	}
	switch strings.ToLower(format) {
	case "text":
		return logConfig{level: lvl}, nil
	case "json":
		return logConfig{level: lvl, json: true}, nil
	}
	return logConfig{}, fmt.Errorf("--%s (env %s): %q is not one of text, json", flagLogFormat, envLogFormat, format)
}

func (lc logConfig) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: lc.level}
	if lc.json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
