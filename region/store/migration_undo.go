package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// RedirectCopy undoes an import whose machine's agent may already have followed the source's
// redirect here: the inactive imported copy at key becomes a locked stub redirecting to
// endpoint (the source, live again), so the agent's calls here are answered with a redirect
// back instead of "unknown machine". Its jobs are archived with Meta.redirect-endpoint, as a
// finalized source's are; the source holds the live ones. A later import of the machine,
// with a new ticket (the undone import's tickets are closed), replaces the stub. Redirecting
// again to the same endpoint changes nothing; an active machine, one that was never imported,
// or one held by a migration ctx does not act for (ForMigration) is ErrConflict.
func (s *Store) RedirectCopy(ctx context.Context, by Principal, key, endpoint string) (api.Machine, error) {
	if err := validURL("redirect copy", "RedirectEndpoint", endpoint); err != nil {
		return api.Machine{}, err
	}
	return s.machineOp(ctx, key, func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error) {
		m := r.obj
		switch to := m.Meta[api.MetaRedirectEndpoint]; {
		case to == endpoint:
			return nil, nil
		case to != "":
			return nil, conflictf("machine %s (%s) is a stub redirecting to %s", m.Name, m.Uuid, to)
		case m.Runnable:
			return nil, conflictf("machine %s (%s) is active on this region; only an inactive imported copy can redirect", m.Name, m.Uuid)
		case m.Meta[api.MetaMigrating] != "":
			return nil, conflictf("machine %s (%s) is quiesced by migration %s; only an imported copy can redirect", m.Name, m.Uuid, m.Meta[api.MetaMigrating])
		}
		held, err := holder(ctx, tx, m)
		if err != nil {
			return nil, err
		}
		if held != "" && held != actingFor(ctx) {
			return nil, conflictf("machine %s (%s) is held by migration %s; only that migration may undo its copy", m.Name, m.Uuid, held)
		}
		if err := fence(ctx, tx, m.Uuid, m.Name, actingFor(ctx)); err != nil {
			return nil, err
		}
		var imported bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tickets WHERE machine = $1::uuid)", m.Uuid).Scan(&imported); err != nil {
			return nil, err
		}
		if !imported {
			return nil, conflictf("machine %s (%s) was not imported into this region; only an imported copy can redirect", m.Name, m.Uuid)
		}
		js, err := machineJobs(ctx, tx, m.Uuid, true)
		if err != nil {
			return nil, err
		}
		stored, err := updateMachine(ctx, tx, by, r, stubOf(m, endpoint))
		if err != nil {
			return nil, err
		}
		if err := redirectJobs(ctx, tx, by, js, endpoint, archiveAll); err != nil {
			return nil, err
		}
		// The import is undone, as when its copy is deleted: its ticket imports nothing again,
		// and the syslog it added goes (the source holds it).
		if err := undoImport(ctx, tx, m.Uuid); err != nil {
			return nil, err
		}
		return stored, recordEvent(ctx, tx, by, "redirect-copy", api.KindMachines, m.Uuid, map[string]any{"RedirectEndpoint": endpoint})
	})
}
