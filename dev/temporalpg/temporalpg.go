// Package temporalpg runs the Temporal server (go.temporal.io/server, which `make
// temporal-server` builds into ./bin) on PostgreSQL with several history shards: the
// production-shaped engine `make bench-moves` measures beside the dev server. It sets the
// schema up with the server's own SQL tool, writes the server's config, starts it and creates
// the namespace the dev server has.
package temporalpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/netutil"
)

const (
	// EnvServer names the temporal-server binary; the Makefile builds it, and temporal-sql-tool
	// beside it, into ./bin.
	EnvServer = "IRONFLOW_TEMPORAL_SERVER"
	// Namespace is the namespace Start creates, the one the dev server has from the start.
	Namespace = "default"
	// DefaultShards is the number of history shards when Options.Shards is 0.
	DefaultShards = 4
	// Its two databases on the cluster: workflow state, and visibility (list/count queries).
	stateDB      = "temporal"
	visibilityDB = "temporal_visibility"
	// The plugin and the embedded schemas of PostgreSQL 12 and later.
	plugin           = "postgres12"
	stateSchema      = "postgresql/v12/temporal"
	visibilitySchema = "postgresql/v12/visibility"
	// retention of closed workflows in Namespace: the shortest the server accepts.
	retention = 24 * time.Hour
)

// Options configure Start.
type Options struct {
	// Binary is temporal-server; temporal-sql-tool is taken from the same directory. Default:
	// $IRONFLOW_TEMPORAL_SERVER, then bin/temporal-server in the current directory or a parent.
	Binary string
	// Postgres holds the server's databases, created with their schema when missing. The server
	// connects as the cluster's superuser, postgres, with the cluster's trust authentication.
	Postgres *postgres.Cluster
	// Dir receives the server's config (Dir/config) and its log (Dir/temporal-server.log).
	Dir string
	// Shards is the number of history shards (0: DefaultShards). It is fixed when the
	// databases are first set up: a later start must give the same number.
	Shards int
	// MetricsPort serves Prometheus metrics on 127.0.0.1 as the dev server does: 0 = none, -1 =
	// a free port.
	MetricsPort int
}

// FindServer returns the temporal-server binary: $IRONFLOW_TEMPORAL_SERVER, else
// bin/temporal-server here or in a parent directory.
func FindServer() (string, error) {
	return temporalserver.FindBinary(EnvServer, "temporal-server", "run `make temporal-server` (builds ./bin/temporal-server and ./bin/temporal-sql-tool)")
}

// Start sets up the schema, starts the server on free ports and returns once Namespace exists.
func Start(ctx context.Context, opts Options) (*temporalserver.Server, error) {
	if opts.Postgres == nil || opts.Dir == "" {
		return nil, errors.New("temporalpg: Options.Postgres and Options.Dir are required")
	}
	if opts.Shards == 0 {
		opts.Shards = DefaultShards
	}
	if opts.Shards < 1 {
		return nil, fmt.Errorf("temporalpg: %d history shards: at least 1", opts.Shards)
	}
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = FindServer(); err != nil {
			return nil, err
		}
	}
	sqlTool := filepath.Join(filepath.Dir(bin), "temporal-sql-tool")
	for db, schema := range map[string]string{stateDB: stateSchema, visibilityDB: visibilitySchema} {
		if err := setUpSchema(ctx, sqlTool, opts.Postgres, db, schema); err != nil {
			return nil, err
		}
	}
	srv, err := temporalserver.RetryOnFreePorts(true, func() (*temporalserver.Server, error) { return start(ctx, bin, opts) })
	if err != nil {
		return nil, err
	}
	if err := createNamespace(ctx, srv.Address); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// setUpSchema creates db unless it exists and brings its schema to the newest version the
// tool embeds (both steps do nothing the second time).
func setUpSchema(ctx context.Context, sqlTool string, pg *postgres.Cluster, db, schema string) error {
	if err := pg.CreateDatabase(ctx, db); err != nil {
		return err
	}
	conn := []string{"--plugin", plugin, "--endpoint", "127.0.0.1", "--port", strconv.Itoa(pg.Port), "--user", "postgres", "--database", db, "--quiet"}
	for _, step := range [][]string{
		{"setup-schema", "--version", "0.0"},
		{"update-schema", "--schema-name", schema},
	} {
		cmd := exec.CommandContext(ctx, sqlTool, append(conn, step...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("temporal-sql-tool %s on %s: %w\n%s", step[0], db, err, out)
		}
	}
	return nil
}

// The server's services, each with a gRPC and a membership port.
var services = []string{"frontend", "history", "matching", "worker"}

func start(ctx context.Context, bin string, opts Options) (*temporalserver.Server, error) {
	ports := map[string]int{}
	for _, name := range services {
		p, err := netutil.FreePort()
		if err != nil {
			return nil, err
		}
		ports[name] = p
		// The server records its membership port in a SMALLINT column (cluster_membership.
		// rpc_port): a port from the kernel's ephemeral range (32768 and up) does not fit.
		if ports[name+"-membership"], err = netutil.FreePortIn(20000, 32767); err != nil {
			return nil, err
		}
	}
	var err error
	if ports["frontend-http"], err = netutil.FreePort(); err != nil {
		return nil, err
	}
	metricsURL := ""
	if opts.MetricsPort != 0 {
		p := opts.MetricsPort
		if p < 0 {
			if p, err = netutil.FreePort(); err != nil {
				return nil, err
			}
		}
		ports["metrics"] = p
		metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", p)
	}
	data, err := yaml.Marshal(serverConfig(opts, ports))
	if err != nil {
		return nil, fmt.Errorf("temporal server config: %w", err)
	}
	configDir := filepath.Join(opts.Dir, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return nil, fmt.Errorf("temporal server config: %w", err)
	}
	// The server reads <root>/<config>/<env>.yaml.
	if err := os.WriteFile(filepath.Join(configDir, "ironflow.yaml"), data, 0o600); err != nil {
		return nil, fmt.Errorf("temporal server config: %w", err)
	}
	cmd := exec.Command(bin, "--root", opts.Dir, "--config", "config", "--env", "ironflow", "--allow-no-auth", "start")
	address := fmt.Sprintf("127.0.0.1:%d", ports["frontend"])
	return temporalserver.StartProcess(ctx, cmd, address, metricsURL, filepath.Join(opts.Dir, "temporal-server.log"))
}

// serverConfig is the server's static config: one process running every service on loopback,
// both stores on PostgreSQL, no archival.
func serverConfig(opts Options, ports map[string]int) map[string]any {
	store := func(db string, conns int) map[string]any {
		return map[string]any{"sql": map[string]any{
			"pluginName": plugin, "databaseName": db, "connectAddr": fmt.Sprintf("127.0.0.1:%d", opts.Postgres.Port),
			"connectProtocol": "tcp", "user": "postgres", "maxConns": conns, "maxIdleConns": conns, "maxConnLifetime": "1h",
		}}
	}
	svc := map[string]any{}
	for _, name := range services {
		rpc := map[string]any{"grpcPort": ports[name], "membershipPort": ports[name+"-membership"], "bindOnLocalHost": true}
		if name == "frontend" {
			rpc["httpPort"] = ports["frontend-http"]
		}
		svc[name] = map[string]any{"rpc": rpc}
	}
	frontend := fmt.Sprintf("127.0.0.1:%d", ports["frontend"])
	global := map[string]any{"membership": map[string]any{"maxJoinDuration": "30s", "broadcastAddress": "127.0.0.1"}}
	if p, ok := ports["metrics"]; ok {
		global["metrics"] = map[string]any{"prometheus": map[string]any{"listenAddress": fmt.Sprintf("127.0.0.1:%d", p), "handlerPath": "/metrics"}}
	}
	disabled := map[string]any{"state": "disabled"}
	return map[string]any{
		"log":    map[string]any{"stdout": true, "level": "warn"},
		"global": global,
		"persistence": map[string]any{
			"defaultStore": "postgres-default", "visibilityStore": "postgres-visibility", "numHistoryShards": opts.Shards,
			// The defaults of the server's development-postgres12.yaml: 20 connections for
			// workflow state, 2 for visibility.
			"datastores": map[string]any{"postgres-default": store(stateDB, 20), "postgres-visibility": store(visibilityDB, 2)},
		},
		"services": svc,
		"clusterMetadata": map[string]any{
			"enableGlobalNamespace": false, "failoverVersionIncrement": 10,
			"masterClusterName": "active", "currentClusterName": "active",
			"clusterInformation": map[string]any{"active": map[string]any{"enabled": true, "initialFailoverVersion": 1, "rpcName": "frontend", "rpcAddress": frontend}},
		},
		"dcRedirectionPolicy": map[string]any{"policy": "noop"},
		"archival":            map[string]any{"history": disabled, "visibility": disabled},
		"namespaceDefaults":   map[string]any{"archival": map[string]any{"history": disabled, "visibility": disabled}},
		"publicClient":        map[string]any{"hostPort": frontend},
	}
}

// createNamespace registers Namespace unless it exists and returns once the server describes it.
func createNamespace(ctx context.Context, address string) error {
	nc, err := client.NewNamespaceClient(client.Options{HostPort: address, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("temporal namespace client: %w", err)
	}
	defer nc.Close()
	err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: Namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention)})
	if err != nil && !errors.As(err, new(*serviceerror.NamespaceAlreadyExists)) {
		return fmt.Errorf("register namespace %s: %w", Namespace, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := nc.Describe(ctx, Namespace)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not there after registering it: %w", Namespace, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
