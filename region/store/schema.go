// The schema-migration runner: the SQL files under migrations/ bring a region's database to
// the schema this code expects. (Moving a machine between regions is migration.go.)

package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the pg_advisory_lock key that serialises migrations of region processes
// starting at the same time against one database ("ironflow" in ASCII).
const migrationLock int64 = 0x69726f6e666c6f77

type schemaMigration struct {
	version  int
	name     string
	sql      string
	checksum string
}

// schemaMigrations returns the embedded migrations ordered by version. Files are named
// NNNN_description.sql; a version may appear once.
func schemaMigrations() ([]schemaMigration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []schemaMigration
	seen := map[int]string{}
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(prefix)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_description.sql", e.Name())
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, e.Name(), version)
		}
		seen[version] = e.Name()
		body, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(body)
		out = append(out, schemaMigration{version: version, name: e.Name(), sql: string(body), checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrateSchema applies the embedded migrations that the database has not seen yet, each in its own
// transaction, while holding a session advisory lock so concurrent starts apply them once.
// A migration whose file changed after it was applied is an error: schemas must only move
// forward through new files.
func migrateSchema(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := schemaMigrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return classify(fmt.Errorf("acquire connection for migrations: %w", err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return classify(fmt.Errorf("take migration lock: %w", err))
	}
	defer func() {
		// A fresh context, so a cancelled ctx cannot leave the lock held by a pooled session;
		// if unlocking fails anyway, closing the connection ends the session and its lock.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		checksum   text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return classify(fmt.Errorf("create schema_migrations: %w", err))
	}
	applied := map[int]string{}
	rows, err := conn.Query(ctx, "SELECT version, checksum FROM schema_migrations")
	if err != nil {
		return classify(fmt.Errorf("read schema_migrations: %w", err))
	}
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			rows.Close()
			return classify(fmt.Errorf("read schema_migrations: %w", err))
		}
		applied[v] = sum
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("read schema_migrations: %w", err))
	}
	for _, m := range all {
		if sum, ok := applied[m.version]; ok {
			if sum != m.checksum {
				return fmt.Errorf("migration %s was changed after it was applied to this database", m.name)
			}
			continue
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", m.version, m.name, m.checksum)
			return err
		}); err != nil {
			return classify(fmt.Errorf("apply migration %s: %w", m.name, err))
		}
	}
	return nil
}
