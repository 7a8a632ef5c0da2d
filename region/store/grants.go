package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Migrate grants (region/api/grants.go): the region records every grant it issues, so a grant
// can be revoked before it expires, and audits each issue, revocation and verified use.

// eventKindGrants is the Kind of the audit events about grants.
const eventKindGrants = "migrate-grants"

// RecordGrant stores an issued grant and audits it.
func (s *Store) RecordGrant(ctx context.Context, by Principal, c api.GrantClaims) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		subject := c.Subject
		if c.Kind == api.GrantBulk {
			subject = c.Selector.String()
		}
		_, err := tx.Exec(ctx, `INSERT INTO migrate_grants (id, kind, subject, target, granted_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.ID, c.Kind, subject, c.TargetRegion, c.GrantedTo, time.Unix(c.Expires, 0))
		if err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "grant", eventKindGrants, c.ID, map[string]any{
			"Kind": c.Kind, "Subject": subject, "TargetRegion": c.TargetRegion, "Expires": time.Unix(c.Expires, 0).UTC()})
	})
}

// CheckGrantRecord refuses a grant this region has no record of, or revoked (ErrUnauthorized).
func (s *Store) CheckGrantRecord(ctx context.Context, id string) error {
	var revoked *time.Time
	err := s.pool.QueryRow(ctx, "SELECT revoked_at FROM migrate_grants WHERE id = $1", id).Scan(&revoked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return classed(ErrUnauthorized, "grant %s was not issued by this region", id)
	case err != nil:
		return classify(err)
	case revoked != nil:
		return classed(ErrUnauthorized, "grant %s was revoked at %s", id, revoked.UTC().Format(time.RFC3339))
	}
	return nil
}

// RevokeGrant revokes the grant id; revoking it again changes nothing.
func (s *Store) RevokeGrant(ctx context.Context, by Principal, id string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		var revoked *time.Time
		err := tx.QueryRow(ctx, "SELECT revoked_at FROM migrate_grants WHERE id = $1 FOR UPDATE", id).Scan(&revoked)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return classed(ErrNotFound, "grant %s not found", id)
		case err != nil || revoked != nil:
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE migrate_grants SET revoked_at = now() WHERE id = $1", id); err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "revoke", eventKindGrants, id, map[string]any{})
	})
}

// RecordGrantUse audits a verified grant on the object that moves: who started the move
// (StartedBy, the grant's subject), the migration (workflow ID) that checked it and the move
// it checked for (check.Move: the root workflow, "" when the migration is the root). A root's
// check is also recorded as a move the grant let start (GrantStartedMove).
func (s *Store) RecordGrantUse(ctx context.Context, by Principal, kind, key string, c api.GrantClaims, check api.GrantCheck) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		details := map[string]any{"Grant": c.ID, "StartedBy": c.GrantedTo, "Migration": check.Migration, "TargetRegion": c.TargetRegion}
		if check.Move != "" {
			details["Move"] = check.Move
		} else if check.Migration != "" && check.MoveRun != "" {
			if _, err := tx.Exec(ctx, "INSERT INTO migrate_grant_moves (grant_id, move, run) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
				c.ID, check.Migration, check.MoveRun); err != nil {
				return err
			}
		}
		return recordEvent(ctx, tx, by, "migration-authorized", kind, key, details)
	})
}

// GrantStartedMove reports whether the grant id passed the own check of the move (a root
// workflow ID) in the run chain that began with run, while it was valid.
func (s *Store) GrantStartedMove(ctx context.Context, id, move, run string) (bool, error) {
	var started bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM migrate_grant_moves WHERE grant_id = $1 AND move = $2 AND run = $3)",
		id, move, run).Scan(&started)
	return started, classify(err)
}
