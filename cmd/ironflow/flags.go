package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/client"
)

// Global flags of every API command.
const (
	flagEndpoint    = "endpoint"
	flagToken       = "token"
	flagOutput      = "output"
	envEndpoint     = "IRONFLOW_ENDPOINT"
	envToken        = "IRONFLOW_TOKEN"
	defaultEndpoint = "http://127.0.0.1:5240"
)

func addGlobalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringP(flagEndpoint, "E", defaultEndpoint, "region API URL"+envHelp(envEndpoint))
	f.String(flagToken, "", "API token"+envHelp(envToken))
	format := formatJSON
	f.VarP(&format, flagOutput, "o", "output format: json, yaml or table")
}

// flagOrEnv is how every command reads a flag that has environment fallbacks: the flag's
// value when given on the command line, else the first of envs that is set, else the flag's
// default. Environment values are read here rather than used as flag defaults so that
// secrets never show up in --help.
func flagOrEnv(cmd *cobra.Command, name string, envs ...string) string {
	if v, ok := envFallback(cmd, name, envs...); ok {
		return v
	}
	return cmd.Flags().Lookup(name).Value.String()
}

// envFallback is the first of envs that is set, when the flag was not given on the command
// line.
func envFallback(cmd *cobra.Command, name string, envs ...string) (string, bool) {
	if cmd.Flags().Lookup(name).Changed {
		return "", false
	}
	for _, env := range envs {
		if v, ok := os.LookupEnv(env); ok {
			return v, true
		}
	}
	return "", false
}

// envHelp ends a flag's usage with the environment variables it falls back to.
func envHelp(envs ...string) string { return " (env " + strings.Join(envs, ", ") + ")" }

// regionClient is the API client the global flags describe.
func regionClient(cmd *cobra.Command) *client.Client {
	return client.New(flagOrEnv(cmd, flagEndpoint, envEndpoint), flagOrEnv(cmd, flagToken, envToken))
}

// addDeleteStubFlag declares --delete-stub (default false: the source keeps its locked stub,
// as in DRP) and its old inverse --skip-machine-destroy, hidden but still accepted for
// operators' scripts with a warning on stderr: --skip-machine-destroy=false is --delete-stub.
func addDeleteStubFlag(c *cobra.Command, deleteStub *bool, usage string) {
	f := c.Flags()
	f.BoolVar(deleteStub, "delete-stub", false, usage)
	f.Var(deprecatedInverse{target: deleteStub, cmd: c}, "skip-machine-destroy", "deprecated: the inverse of --delete-stub")
	f.Lookup("skip-machine-destroy").NoOptDefVal = "true"
	_ = f.MarkHidden("skip-machine-destroy")
}

// deprecatedInverse is the deprecated bool flag --skip-machine-destroy: it sets the negation
// of --delete-stub and warns on the command's stderr (cobra's own deprecation notice goes to
// stdout, where it would corrupt -o json).
type deprecatedInverse struct {
	target *bool
	cmd    *cobra.Command
}

func (b deprecatedInverse) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.target = !v
	fmt.Fprintf(b.cmd.ErrOrStderr(), "warning: --skip-machine-destroy is deprecated: use --delete-stub (--skip-machine-destroy=%s is --delete-stub=%t)\n", s, !v)
	return nil
}

func (b deprecatedInverse) String() string {
	if b.target == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.target)
}

func (deprecatedInverse) Type() string { return "bool" }
