package postgres

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privateStateDir is a state dir inside a directory of mode 0700, like a clone in root's
// home: as root, the postgres user cannot enter it.
func privateStateDir(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, "clone", ".ironflow-dev")
}

func TestStartInStateDirThePostgresUserCannotEnter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stateDir := privateStateDir(t)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveStateDir(stateDir) })

	pg, err := StartInStateDir(ctx, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.CreateDatabase(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "postgres.log")); err != nil {
		t.Errorf("no server log in the state dir: %v", err)
	}

	// A restart finds the same cluster, with its data.
	pg, err = StartInStateDir(ctx, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := databaseExists(ctx, pg, "kept")
	if err != nil || !ok {
		t.Errorf("after a restart, database kept exists = %v, %v", ok, err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}

	// Everything the cluster wrote is in the state dir, so removing it leaves nothing.
	if fi, err := os.Lstat(pg.DataDir); pg.DataDir != filepath.Join(stateDir, stateLink) || err != nil || !fi.IsDir() {
		t.Fatalf("data dir %s (%v), want the directory %s", pg.DataDir, err, filepath.Join(stateDir, stateLink))
	}
	if err := RemoveStateDir(stateDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stateDir); err == nil {
		t.Errorf("%s is left after RemoveStateDir", stateDir)
	}
}

// TestFailedFirstStartLeavesNothing makes initdb fail (an unknown locale) and checks the error
// explains it and no data dir is left, in the state dir or outside.
func TestFailedFirstStartLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb")
	}
	stateDir := privateStateDir(t)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LC_ALL", "xx_XX.UTF-8")
	_, err := StartInStateDir(context.Background(), stateDir)
	if err == nil || !strings.Contains(err.Error(), "initdb") || !strings.Contains(err.Error(), "locale") {
		t.Fatalf("StartInStateDir with a bad locale: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(stateDir, stateLink)); err == nil {
		t.Error("the failed start left the data dir in the state dir")
	}
}

// TestFailedRestartShowsTheLog breaks the config of an existing cluster: the error shows the
// end of the server log and its path, and the data stays.
func TestFailedRestartShowsTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stateDir := privateStateDir(t)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveStateDir(stateDir) })
	pg, err := StartInStateDir(ctx, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(pg.DataDir, "postgresql.auto.conf")
	if err := os.WriteFile(conf, []byte("shared_buffers = 'lots'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = StartInStateDir(ctx, stateDir)
	logPath := filepath.Join(stateDir, "postgres.log")
	if err == nil || !strings.Contains(err.Error(), logPath) || !strings.Contains(err.Error(), `"shared_buffers"`) {
		t.Fatalf("restart with a broken config: %v; want the log path %s and the server's complaint", err, logPath)
	}
	if !initialised(pg.DataDir) {
		t.Error("a failed restart removed the cluster's data")
	}
}

func databaseExists(ctx context.Context, pg *Cluster, db string) (bool, error) {
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var ok bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&ok)
	return ok, err
}
