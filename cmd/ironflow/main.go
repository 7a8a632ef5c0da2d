// Command ironflow is the single binary of Ironflow: region and rack controllers, worker,
// agent and the CLI of the region API.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/client"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	executed, err := root.ExecuteContextC(ctx)
	var queued *client.QueuedError
	switch {
	case errors.As(err, &queued):
		// Accepted, not failed: the write runs when the rack's pause ends.
		fmt.Fprintf(stdout, "%v; see `ironflow racks operations %s %d`\n", queued, queued.Queued.Rack, queued.Queued.Operation.ID)
	case err != nil:
		fmt.Fprintf(stderr, "Error: %v\n", explainRegionError(ctx, executed, err))
		return 1
	}
	return 0
}

// newRootCommand builds the command tree; each noun lives in its own file.
func newRootCommand() *cobra.Command {
	root := withEnvFallbacks(&cobra.Command{
		Use:           "ironflow",
		Short:         "Bare-metal provisioning with durable migrations",
		Version:       version,
		SilenceErrors: true, // run prints the error once, in one format
		SilenceUsage:  true, // an API error is not a usage error
	})
	addGlobalFlags(root)
	root.AddCommand(
		newRegionCommand(),
		newRackCommand(),
		newMachinesCommand(),
		newJobsCommand(),
		newProfilesCommand(),
		newPoolsCommand(),
		newSubnetsCommand(),
		newDomainsCommand(),
		newDNSRecordsCommand(),
		newFabricsCommand(),
		newVLANsCommand(),
		newPodsCommand(),
		newRacksCommand(),
		newLeasesCommand(),
		newEventsCommand(),
		newUsersCommand(),
		newDevCommand(),
		newWorkerCommand(),
		newCodecCommand(),
		newMigrationsCommand(),
		newAgentCommand(),
		newCommissioningScriptsCommand(),
		newImagesCommand(),
		newImageCommand(),
	)
	return root
}
