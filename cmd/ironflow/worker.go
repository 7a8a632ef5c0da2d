package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// workerStopTimeout is how long a stopping worker lets its running activities finish before
// it cancels them: far longer than a region call.
const workerStopTimeout = 30 * time.Second

const (
	flagRegionsFile    = "regions-file"
	defaultRegionsFile = "/etc/ironflow/regions.yaml"

	// SSH to ESXi hosts, for the ESXi repoint (activities.ESXiConfig).
	flagESXiSSHKey    = "esxi-ssh-key"
	flagESXiAllowTOFU = "esxi-allow-tofu"
	flagESXiSSHPort   = "esxi-ssh-port"
	flagESXiUser      = "esxi-user"
)

// workerFlags are the worker's own flags, besides the Temporal and log flags.
type workerFlags struct {
	RegionsFile string
	ESXi        esxiFlags
	Version     workerVersion
}

// esxiFlags are the flags of the SSH login to ESXi hosts.
type esxiFlags struct {
	SSHKey    string
	AllowTOFU bool
	SSHPort   int
	User      string
}

func (f *workerFlags) declare(fs *pflag.FlagSet) {
	e := ironflowScope.on(fs)
	e.string(&f.RegionsFile, flagRegionsFile, defaultRegionsFile, "regions the worker may migrate between, with their tokens")
	e.string(&f.ESXi.SSHKey, flagESXiSSHKey, "", "operator private key FILE that logs in to ESXi hosts without an agent; none: only hosts with an agent can be repointed")
	e.bool(&f.ESXi.AllowTOFU, flagESXiAllowTOFU, false, "accept an ESXi host's SSH key on first use when the machine records none")
	e.int(&f.ESXi.SSHPort, flagESXiSSHPort, 22, "SSH port of the ESXi hosts")
	e.string(&f.ESXi.User, flagESXiUser, "root", "SSH user on the ESXi hosts")
	f.Version.declare(e)
}

func newWorkerCommand() *cobra.Command {
	var flags workerFlags
	c := &cobra.Command{
		Use:   "worker",
		Short: "Run the orchestration worker (migrations) until interrupted",
		Long: "Run the orchestration worker: it polls the Temporal task queue " + workflows.TaskQueue + " for the\n" +
			"migration workflows and runs their activities against the regions of the regions file\n" +
			"(YAML: regions: {NAME: {url: URL, token: TOKEN}}). Run as many workers as needed.\n\n" +
			"Each worker is a version, its build ID, of the Temporal worker deployment " + workers.DeploymentName + ": a run and\n" +
			"its children stay on the build that started them, and new runs start on the deployment's\n" +
			"current version. To upgrade, start workers of the new build with --make-current, then stop\n" +
			"the old ones once `temporal worker deployment describe-version` shows their build drained.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := daemonLogger(cmd, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return runWorker(cmd, &flags, logger)
		},
	}
	addTemporalFlags(c)
	addLogFlags(c)
	flags.declare(c.Flags())
	return c
}

// esxiConfig checks the ESXi flags. The operator key is parsed here, so a bad key file stops
// the worker at start rather than failing the first ESXi migration.
func esxiConfig(cmd *cobra.Command, f esxiFlags) (activities.ESXiConfig, error) {
	var cfg activities.ESXiConfig
	if f.SSHPort < 1 || f.SSHPort > 65535 {
		return cfg, fmt.Errorf("%s: %d is not a TCP port (1-65535)", flagOrigin(cmd, flagESXiSSHPort), f.SSHPort)
	}
	user := strings.TrimSpace(f.User)
	if user == "" {
		return cfg, fmt.Errorf("%s is empty", flagOrigin(cmd, flagESXiUser))
	}
	cfg.AllowTOFU, cfg.Port, cfg.User = f.AllowTOFU, f.SSHPort, user
	if f.SSHKey != "" {
		var err error
		if cfg.Login, err = loadSSHKey(f.SSHKey); err != nil {
			return cfg, fmt.Errorf("%s: %w", flagOrigin(cmd, flagESXiSSHKey), err)
		}
	}
	return cfg, nil
}

// loadSSHKey reads an unencrypted private key file (OpenSSH, PEM or PKCS#8).
func loadSSHKey(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ESXi SSH key: %w", err)
	}
	key, err := ssh.ParsePrivateKey(data)
	var protected *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &protected):
		return nil, fmt.Errorf("ESXi SSH key %s is protected by a passphrase; the worker needs a key without one", path)
	case err != nil:
		return nil, fmt.Errorf("ESXi SSH key %s is not a private key: %w", path, err)
	}
	return key, nil
}

// runWorker loads the regions first, so a bad file fails before anything connects, then runs
// the migration worker until the command's context ends.
func runWorker(cmd *cobra.Command, flags *workerFlags, logger *slog.Logger) error {
	path := flags.RegionsFile
	regions, err := activities.LoadRegions(path)
	if err != nil {
		return err
	}
	esxi, err := esxiConfig(cmd, flags.ESXi)
	if err != nil {
		return err
	}
	version, err := flags.Version.resolved()
	if err != nil {
		return err
	}
	opts, err := temporalOptions(cmd, logger)
	if err != nil {
		return err
	}
	warnClearPayloads(opts, logger)
	c, err := dialWith(cmd, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	namespace := flagValue(cmd, flagNamespace)
	if err := ensureSearchAttributes(cmd.Context(), c, namespace, logger); err != nil {
		return err
	}

	// A stop (SIGTERM, a deploy) lets running activities finish their region call: a batch
	// stops its machines at their next step boundary, and a retry on the next worker resumes
	// them; without it every activity would be cut mid-call and retried from its start.
	// The SDK builds a worker on its own client type only.
	w := workers.NewMigrationWorker(c.Client, &activities.Activities{Regions: regions, ESXi: esxi},
		workers.WithOptions(worker.Options{WorkerStopTimeout: workerStopTimeout}), workers.Versioned(version.BuildID))
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
	g.Go(func() error { return announceVersion(ctx, c.Client, version, logger) })
	logger.Info("migration worker running", "task_queue", workflows.TaskQueue, "namespace", namespace, "regions_file", path,
		"build_id", version.BuildID, "deployment", workers.DeploymentName,
		"esxi_login_key", esxi.Login != nil, "esxi_allow_tofu", esxi.AllowTOFU)
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
