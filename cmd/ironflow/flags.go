package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/client"
)

// Global flags of every API command.
const (
	flagEndpoint    = "endpoint"
	flagToken       = "token"
	flagOutput      = "output"
	defaultEndpoint = "http://127.0.0.1:5240"
)

var (
	envEndpoint = ironflowScope.name(flagEndpoint)
	envToken    = ironflowScope.name(flagToken)
)

func addGlobalFlags(root *cobra.Command) {
	f := ironflowScope.on(root.PersistentFlags())
	f.stringP(new(string), flagEndpoint, "E", defaultEndpoint, "region API URL")
	f.string(new(string), flagToken, "", "API token")
	format := formatJSON
	root.PersistentFlags().VarP(&format, flagOutput, "o", "output format: json, yaml or table")
}

// flagValue is a flag's value once the command line and the environment are applied
// (withEnvFallbacks), for the flags that many commands share and read through their command:
// the global and Temporal flags.
func flagValue(cmd *cobra.Command, name string) string {
	return cmd.Flags().Lookup(name).Value.String()
}

// regionClient is the API client the global flags describe.
func regionClient(cmd *cobra.Command) *client.Client {
	return client.New(flagValue(cmd, flagEndpoint), flagValue(cmd, flagToken))
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
