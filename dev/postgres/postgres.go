// Package postgres runs throwaway PostgreSQL clusters for tests and the dev stack. It imports
// nothing from Ironflow, so every package's tests can use it.
package postgres

import (
	"context"
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
	DataDir string // absolute
	LogFile string // the server's output
	Port    int
	owned   bool // the data dir is a temp dir we remove on Stop
	// procAttr runs the PostgreSQL tools as a user other than root; nil when not root.
	procAttr *syscall.SysProcAttr
}

// Start starts a cluster in dataDir (created and initialised when it holds none).
// An empty dataDir means a temporary cluster that Stop removes. PostgreSQL refuses to run
// as root, so as root the server runs as the "postgres" user, who must be able to reach
// dataDir (a temp dir is fine; StartInStateDir runs it where only root can go).
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
	abs, err := filepath.Abs(pg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("postgres data dir: %w", err)
	}
	pg.DataDir, pg.LogFile = abs, filepath.Join(abs, "server.log")
	// A data dir that was not initialised before this call is removed when the start fails:
	// initdb refuses a non-empty dir, so a half-made one would block the next start.
	removeOnFailure := pg.owned || !initialised(pg.DataDir)
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			return nil, err
		}
		pg.procAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := pg.start(ctx, port); err != nil {
		if removeOnFailure {
			os.RemoveAll(pg.DataDir)
		}
		return nil, err
	}
	return pg, nil
}

// stateLink is the name, inside a dev state dir, of its cluster's data dir.
const stateLink = "postgres"

// StartInStateDir starts the persistent cluster of a dev state dir on a free port, its data
// in stateDir/postgres and its output in stateDir/postgres.log, so removing the state dir
// removes everything the cluster wrote. PostgreSQL refuses to run as root; run by root, the
// server runs in a user namespace that maps the postgres user's IDs to root, so it reaches a
// state dir only root can enter (a clone in root's 0700 home) and its files stay root's. A
// failed first start removes the data dir again.
func StartInStateDir(ctx context.Context, stateDir string) (*Cluster, error) {
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("dev state dir: %w", err)
	}
	dataDir := filepath.Join(stateDir, stateLink)
	if fi, err := os.Lstat(dataDir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s links to a PostgreSQL data dir outside the state dir (an older layout): start over with `ironflow dev --fresh`", dataDir)
	}
	pg := &Cluster{DataDir: dataDir, LogFile: filepath.Join(stateDir, "postgres.log")}
	if os.Geteuid() == 0 {
		if pg.procAttr, err = rootMappedToPostgres(); err != nil {
			return nil, err
		}
	}
	created := !initialised(dataDir)
	if err := pg.start(ctx, 0); err != nil {
		if created {
			os.RemoveAll(dataDir)
		}
		return nil, err
	}
	return pg, nil
}

// RemoveData removes the PostgreSQL data of a dev state dir, including the data dir that
// older versions kept in the postgres user's home and linked from the state dir.
func RemoveData(stateDir string) error {
	link := filepath.Join(stateDir, stateLink)
	if target, err := os.Readlink(link); err == nil && strings.HasPrefix(filepath.Base(target), "ironflow-dev-") {
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("remove PostgreSQL data dir: %w", err)
		}
	}
	if err := os.RemoveAll(link); err != nil {
		return fmt.Errorf("remove PostgreSQL data dir: %w", err)
	}
	return nil
}

// RemoveStateDir removes a dev state dir and its PostgreSQL data.
func RemoveStateDir(stateDir string) error {
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("dev state dir: %w", err)
	}
	if err := RemoveData(stateDir); err != nil {
		return err
	}
	if err := os.RemoveAll(stateDir); err != nil {
		return fmt.Errorf("remove state dir: %w", err)
	}
	return nil
}

func initialised(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "PG_VERSION"))
	return err == nil
}

// start initialises pg.DataDir when it holds no cluster and starts the server on port.
func (pg *Cluster) start(ctx context.Context, port int) error {
	if err := os.MkdirAll(pg.DataDir, 0o700); err != nil {
		return fmt.Errorf("postgres data dir: %w", err)
	}
	if cred := pg.procAttr; cred != nil && cred.Credential != nil {
		if err := os.Chown(pg.DataDir, int(cred.Credential.Uid), int(cred.Credential.Gid)); err != nil {
			return fmt.Errorf("chown postgres data dir: %w", err)
		}
	}
	if !initialised(pg.DataDir) {
		if out, err := pg.command(ctx, "initdb", "-D", pg.DataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
			return fmt.Errorf("initdb -D %s: %w\n%s", pg.DataDir, err, out)
		}
	}
	if port == 0 {
		var err error
		if port, err = netutil.FreePort(); err != nil {
			return err
		}
	}
	pg.Port = port
	// The server writes its output to a file this process opens, so the log may live where
	// the postgres user cannot go (the dev state dir).
	log, err := os.OpenFile(pg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("postgres log: %w", err)
	}
	defer log.Close()
	// TCP only: a unix socket path in a deep state dir would pass the 107-byte limit.
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off -c max_connections=300", port)
	cmd := pg.command(ctx, "pg_ctl", "-D", pg.DataDir, "-o", opts, "-w", "-t", "60", "start")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("PostgreSQL did not start (pg_ctl start: %w); the end of its log %s:\n%s", err, pg.LogFile, logTail(pg.LogFile, 15))
	}
	return nil
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
	if pg.owned {
		os.RemoveAll(pg.DataDir)
	}
	return err
}

// Halt shuts the server down but keeps its data dir, so StartOnPort can bring it back.
func (pg *Cluster) Halt() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := pg.command(ctx, "pg_ctl", "-D", pg.DataDir, "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// command runs a PostgreSQL tool as the user the server runs as, in a directory every user
// can enter (the paths given to it are absolute; the temp dir may be private).
func (pg *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir, name), args...)
	cmd.Dir = "/"
	if pg.procAttr != nil {
		attr := *pg.procAttr
		cmd.SysProcAttr = &attr
	}
	return cmd
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

func postgresUser() (*user.User, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
	}
	return u, nil
}

// rootMappedToPostgres runs a process in a new user namespace in which root appears as the
// postgres user: PostgreSQL sees a user that is not root and has a name, and its files and
// access checks are root's.
func rootMappedToPostgres() (*syscall.SysProcAttr, error) {
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(cred.Uid), HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(cred.Gid), HostID: 0, Size: 1}},
	}, nil
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := postgresUser()
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read it: %v)\n", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
