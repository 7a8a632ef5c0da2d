package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Migration holds. While a migration may still need a machine, the machine is held by that
// migration (its workflow ID) and a DELETE without naming the migration is refused:
//
//   - on the source, from quiesce (Meta.migrating) and, once finalized, as the stub that keeps
//     the snapshot RestoreMigration undoes the move from;
//   - on the destination, as the inactive copy an import made, until the import completes
//     (the machine is activated here) or the copy is deleted.
//
// force does not override a hold: deleting a held machine is how a migration loses it on both
// regions. Naming the holding migration does, which is what the migration's own cleanup does
// and what an operator does for the stub or copy of a migration that has ended.

type migrationCtxKey struct{}

// ForMigration marks ctx as a call made for migration (a workflow ID): a hold of that
// migration does not stop it. It travels in the context because the generic delete path
// knows only of force.
func ForMigration(ctx context.Context, migration string) context.Context {
	if migration == "" {
		return ctx
	}
	return context.WithValue(ctx, migrationCtxKey{}, migration)
}

func actingFor(ctx context.Context) string {
	id, _ := ctx.Value(migrationCtxKey{}).(string)
	return id
}

// holder returns the migration that holds m on this region, "" when none.
func holder(ctx context.Context, q querier, m *api.Machine) (string, error) {
	if id := m.Meta[api.MetaMigrating]; id != "" {
		return id, nil
	}
	if isStub(m) {
		snap, err := loadSnapshot(ctx, q, m.Uuid, false)
		if err != nil || snap == nil {
			return "", err
		}
		return snap.migration, nil
	}
	if m.Runnable {
		return "", nil
	}
	var id string
	err := q.QueryRow(ctx, `SELECT coalesce(migration, 'the import of ticket ' || jti) FROM tickets
		WHERE machine = $1::uuid AND used_at IS NOT NULL AND closed_at IS NULL ORDER BY used_at DESC LIMIT 1`, m.Uuid).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// refuseHeldDelete is the machines' beforeDelete: it refuses a held machine unless ctx acts
// for its migration, and undoes the imports of the machine it lets go that did not complete.
func refuseHeldDelete(ctx context.Context, tx pgx.Tx, _ Principal, m *api.Machine, _ bool) error {
	held, err := holder(ctx, tx, m)
	if err != nil {
		return err
	}
	if held != "" && held != actingFor(ctx) {
		return conflictf("machine %s (%s) is held by migration %s and cannot be deleted while that migration may still need it "+
			"(force does not override this); once the migration has ended, delete it naming the migration: ?migration=%s "+
			"(ironflow machines delete %s --migration %s)",
			m.Name, m.Uuid, held, held, m.Uuid, held)
	}
	if err := fenceDelete(ctx, tx, m); err != nil {
		return err
	}
	return undoImport(ctx, tx, m.Uuid)
}

// closeTickets ends the import of machine: the tickets that imported it import nothing again.
func closeTickets(ctx context.Context, tx pgx.Tx, machine string) error {
	_, err := tx.Exec(ctx, "UPDATE tickets SET closed_at = now() WHERE machine = $1::uuid AND closed_at IS NULL", machine)
	return err
}
