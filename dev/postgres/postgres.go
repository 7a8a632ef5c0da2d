// Package postgres runs throwaway PostgreSQL clusters for tests and the dev stack. It imports
// nothing from Ironflow, so every package's tests can use it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/internal/netutil"
)

// BinDir is where Debian installs the PostgreSQL 15 server binaries.
const BinDir = "/usr/lib/postgresql/15/bin"

// Cluster is a PostgreSQL cluster started by this process on 127.0.0.1.
type Cluster struct {
	DataDir string
	Port    int
	owned   bool // the data dir is a temp dir we remove on Stop
	cred    *syscall.Credential
}

// Start starts a cluster in dataDir (created and initialised when it holds none).
// An empty dataDir means a temporary cluster that Stop removes. PostgreSQL refuses to run
// as root, so as root the server runs as the "postgres" user.
func Start(ctx context.Context, dataDir string) (*Cluster, error) {
	return StartOnPort(ctx, dataDir, 0)
}

// StartOnPort is Start on a given port (0 picks a free one), so a test can
// stop a cluster and start it again where its clients expect it.
func StartOnPort(ctx context.Context, dataDir string, port int) (*Cluster, error) {
	pg := &Cluster{DataDir: dataDir}
	if dataDir == "" {
		dir, err := os.MkdirTemp("", "ironflow-pg-")
		if err != nil {
			return nil, fmt.Errorf("postgres temp dir: %w", err)
		}
		pg.DataDir, pg.owned = dir, true
	}
	if err := os.MkdirAll(pg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("postgres data dir: %w", err)
	}
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			return nil, err
		}
		pg.cred = cred
		if err := os.Chown(pg.DataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown postgres data dir: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(pg.DataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := pg.run(ctx, "initdb", "-D", pg.DataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
			pg.cleanup()
			return nil, err
		}
	}
	if port == 0 {
		var err error
		if port, err = netutil.FreePort(); err != nil {
			pg.cleanup()
			return nil, err
		}
	}
	pg.Port = port
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='%s' -c fsync=off -c max_connections=300", port, pg.DataDir)
	if err := pg.run(ctx, "pg_ctl", "-D", pg.DataDir, "-o", opts, "-l", filepath.Join(pg.DataDir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		pg.cleanup()
		return nil, err
	}
	return pg, nil
}

// URL is the connection string of database db.
func (pg *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.Port, db)
}

// CreateDatabase creates db unless it exists.
func (pg *Cluster) CreateDatabase(ctx context.Context, db string) error {
	return CreateDatabase(ctx, pg.URL("postgres"), db)
}

// Stop shuts the server down fast and removes a temporary cluster.
func (pg *Cluster) Stop() error {
	err := pg.Halt()
	pg.cleanup()
	return err
}

// Halt shuts the server down but keeps its data dir, so StartOnPort can bring it back.
func (pg *Cluster) Halt() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pg.run(ctx, "pg_ctl", "-D", pg.DataDir, "-m", "fast", "-w", "stop")
}

func (pg *Cluster) cleanup() {
	if pg.owned {
		os.RemoveAll(pg.DataDir)
	}
}

func (pg *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir, name), args...)
	cmd.Dir = os.TempDir()
	if pg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		logTail := ""
		if b, rerr := os.ReadFile(filepath.Join(pg.DataDir, "server.log")); rerr == nil {
			logTail = lastLines(string(b), 10)
		}
		return fmt.Errorf("%s %s: %w\n%s%s", name, args[0], err, out, logTail)
	}
	return nil
}

// CreateDatabase creates db on the server of adminURL unless it exists.
func CreateDatabase(ctx context.Context, adminURL, db string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", db, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil {
		return fmt.Errorf("check database %s: %w", db, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
