package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// unclaimedRack refuses the rack user's registration with the shared secret when it already
// holds a token in this region.
func unclaimedRack(ctx context.Context, tx pgx.Tx, user string) error {
	var claimed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE "user" = $1)`, user).Scan(&claimed); err != nil {
		return err
	}
	if claimed {
		return conflictf("%s is already registered with this region; register again with its own token or an admin token, not the rack secret", user)
	}
	return nil
}

// revokeRack deletes a rack's user and so its tokens (ON DELETE CASCADE): a removed or
// handed-over rack keeps no credential here, and may register afresh with the secret.
func revokeRack(ctx context.Context, tx pgx.Tx, rackUUID string) error {
	_, err := tx.Exec(ctx, "DELETE FROM users WHERE name = $1", RackUser(rackUUID))
	return err
}
