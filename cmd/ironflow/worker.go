package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

const (
	flagRegionsFile    = "regions-file"
	envRegionsFile     = "IRONFLOW_REGIONS_FILE"
	defaultRegionsFile = "/etc/ironflow/regions.yaml"
)

func newWorkerCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "worker",
		Short: "Run the orchestration worker (migrations) until interrupted",
		Long: "Run the orchestration worker: it polls the Temporal task queue " + workflows.TaskQueue + " for the\n" +
			"migration workflows and runs their activities against the regions of the regions file\n" +
			"(YAML: regions: {NAME: {url: URL, token: TOKEN}}). Run as many workers as needed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return runWorker(cmd, logger)
		},
	}
	addTemporalFlags(c)
	c.Flags().String(flagRegionsFile, defaultRegionsFile, "regions the worker may migrate between, with their tokens (env "+envRegionsFile+")")
	return c
}

// runWorker loads the regions first, so a bad file fails before anything connects, then runs
// the migration worker until the command's context ends.
func runWorker(cmd *cobra.Command, logger *slog.Logger) error {
	path := flagOrEnv(cmd, flagRegionsFile, envRegionsFile)
	regions, err := activities.LoadRegions(path)
	if err != nil {
		return err
	}
	c, err := dialTemporal(cmd, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	namespace := temporalFlag(cmd, flagNamespace)
	if err := ensureSearchAttributes(cmd.Context(), c, namespace, logger); err != nil {
		return err
	}

	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: regions})
	g, ctx := errgroup.WithContext(cmd.Context())
	stop := make(chan any)
	g.Go(func() error {
		if err := w.Run(stop); err != nil {
			return fmt.Errorf("migration worker: %w", err)
		}
		return nil
	})
	// The worker stops when the command is interrupted or when it fails on its own.
	g.Go(func() error {
		<-ctx.Done()
		close(stop)
		return nil
	})
	logger.Info("migration worker running", "task_queue", workflows.TaskQueue, "namespace", namespace, "regions_file", path)
	err = g.Wait()
	logger.Info("migration worker stopped")
	return err
}

// ensureSearchAttributes registers the workflows' search attributes. Clusters that do not let
// a worker do that (Temporal Cloud, locked-down self-hosted) need them added by an operator;
// the worker logs that and runs anyway.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string, logger *slog.Logger) error {
	err := workers.RegisterSearchAttributes(ctx, c, namespace)
	if notPermitted(err) {
		logger.Warn("cannot register the search attributes; add them with `temporal operator search-attribute create`",
			"namespace", namespace, "error", err)
		return nil
	}
	return err
}

// notPermitted reports answers that mean "this caller may not manage search attributes here".
func notPermitted(err error) bool {
	var denied *serviceerror.PermissionDenied
	var unimplemented *serviceerror.Unimplemented
	return errors.As(err, &denied) || errors.As(err, &unimplemented)
}
