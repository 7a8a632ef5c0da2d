package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every daemon flag is declared through an envScope, which derives the environment variables
// it falls back to from the flag's name, so no variable name is written by hand and none can
// be lost to a typo. The command line wins, then the first variable set, then the default.
// The variables are applied to the flags' values before a command runs (withEnvFallbacks)
// rather than used as defaults, so secrets never show up in --help.

// envScope names the variables of the flags declared through it: prefix, then the flag's
// name without trim, upper case, '-' as '_' (--state-dir of rackScope: IRONFLOW_RACK_STATE_DIR).
type envScope struct {
	prefix string
	trim   string
	// also are prefixes of further variables read after Ironflow's own, for a convention of
	// another tool (the Temporal CLI's TEMPORAL_ADDRESS).
	also []string
}

var (
	ironflowScope = envScope{prefix: "IRONFLOW_"}
	regionScope   = envScope{prefix: "IRONFLOW_REGION_"}
	rackScope     = envScope{prefix: "IRONFLOW_RACK_"}
	agentScope    = envScope{prefix: "IRONFLOW_AGENT_"}
	enlistScope   = envScope{prefix: "IRONFLOW_ENLIST_"}
	codecScope    = envScope{prefix: "IRONFLOW_CODEC_"}
	devScope      = envScope{prefix: "IRONFLOW_DEV_"}
	temporalScope = envScope{prefix: "IRONFLOW_TEMPORAL_", trim: "temporal-", also: []string{"TEMPORAL_"}}
)

// Annotations of a flag declared through an envScope.
const (
	annotationEnv       = "ironflow/env"        // the variables, in the order they are read
	annotationFormerEnv = "ironflow/former-env" // deprecated variables, read last with a warning
	annotationEnvSet    = "ironflow/env-set"    // the variable the value came from
)

// name is the first variable of the flag called flag.
func (s envScope) name(flag string) string { return s.names(flag)[0] }

// names are the variables of the flag called flag, in the order they are read.
func (s envScope) names(flag string) []string {
	stem := strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(flag, s.trim), "-", "_"))
	names := []string{s.prefix + stem}
	for _, p := range s.also {
		names = append(names, p+stem)
	}
	return names
}

// on declares flags of this scope in fs.
func (s envScope) on(fs *pflag.FlagSet) envFlags { return envFlags{fs: fs, scope: s} }

// envFlags declares typed flags bound to a config struct's fields, each falling back to its
// scope's variables.
type envFlags struct {
	fs    *pflag.FlagSet
	scope envScope
}

// envFlag is a declared flag, for the few that had a variable of another name before.
type envFlag struct{ *pflag.Flag }

// formerly keeps reading variables the flag's variable was called before, after its own,
// with a warning naming the new one.
func (f envFlag) formerly(envs ...string) {
	f.Annotations[annotationFormerEnv] = envs
}

// bind gives the flag just declared its variables, named at the end of its usage.
func (e envFlags) bind(name string) envFlag {
	f := e.fs.Lookup(name)
	envs := e.scope.names(name)
	help := " (env " + strings.Join(envs, ", ")
	if _, list := f.Value.(pflag.SliceValue); list {
		help += ", comma-separated"
	}
	f.Usage += help + ")"
	f.Annotations = map[string][]string{annotationEnv: envs}
	return envFlag{f}
}

func (e envFlags) string(p *string, name, def, usage string) envFlag {
	return e.stringP(p, name, "", def, usage)
}

func (e envFlags) stringP(p *string, name, shorthand, def, usage string) envFlag {
	e.fs.StringVarP(p, name, shorthand, def, usage)
	return e.bind(name)
}

// stringList is a repeatable flag; its variable is a comma-separated list.
func (e envFlags) stringList(p *[]string, name, usage string) envFlag {
	e.fs.StringArrayVar(p, name, nil, usage)
	return e.bind(name)
}

func (e envFlags) bool(p *bool, name string, def bool, usage string) envFlag {
	e.fs.BoolVar(p, name, def, usage)
	return e.bind(name)
}

func (e envFlags) int(p *int, name string, def int, usage string) envFlag {
	e.fs.IntVar(p, name, def, usage)
	return e.bind(name)
}

func (e envFlags) int64(p *int64, name string, def int64, usage string) envFlag {
	e.fs.Int64Var(p, name, def, usage)
	return e.bind(name)
}

func (e envFlags) duration(p *time.Duration, name string, def time.Duration, usage string) envFlag {
	e.fs.DurationVar(p, name, def, usage)
	return e.bind(name)
}

// withEnvFallbacks makes c and every command under it apply the variables of their flags
// before they run.
func withEnvFallbacks(c *cobra.Command) *cobra.Command {
	c.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd) }
	return c
}

// applyEnv sets each flag of cmd that the command line left alone from the first of its
// variables that is set; a value the flag refuses is an error naming the variable.
func applyEnv(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Annotations[annotationEnv] == nil {
			return
		}
		env, v, ok := lookupFlagEnv(f, cmd.ErrOrStderr())
		if !ok {
			return
		}
		if err := setFromEnv(f, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: invalid value for --%s: %w", env, v, f.Name, err))
			return
		}
		f.Annotations[annotationEnvSet] = []string{env}
	})
	return errors.Join(errs...)
}

// lookupFlagEnv is the first of f's variables that is set (empty counts), then its former
// ones, which warn on w.
func lookupFlagEnv(f *pflag.Flag, w io.Writer) (env, value string, ok bool) {
	for _, env := range f.Annotations[annotationEnv] {
		if v, ok := os.LookupEnv(env); ok {
			return env, v, true
		}
	}
	for _, env := range f.Annotations[annotationFormerEnv] {
		if v, ok := os.LookupEnv(env); ok {
			fmt.Fprintf(w, "warning: %s is deprecated: set %s\n", env, f.Annotations[annotationEnv][0])
			return env, v, true
		}
	}
	return "", "", false
}

// setFromEnv sets f from a variable: a list flag takes the variable's comma-separated items.
func setFromEnv(f *pflag.Flag, v string) error {
	list, ok := f.Value.(pflag.SliceValue)
	if !ok {
		return f.Value.Set(v)
	}
	var items []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	return list.Replace(items)
}

// flagOrigin names where a flag's value came from, for an error about it: the variable that
// set it, else the flag.
func flagOrigin(cmd *cobra.Command, name string) string {
	f := cmd.Flags().Lookup(name)
	if env := f.Annotations[annotationEnvSet]; env != nil {
		return env[0] + " (--" + name + ")"
	}
	return "--" + name
}
