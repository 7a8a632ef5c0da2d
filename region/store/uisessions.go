package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// UISession is a signed-in session of the web UI: who it acts as and the CSRF token its
// forms must carry.
type UISession struct {
	ID      string // the cookie's value; only its hash is stored
	CSRF    string
	Expires time.Time
	By      Principal
}

// CreateUISession signs in with an API token: it mints a new session (never one a caller
// names, so a planted session ID is worthless) that acts as the token's principal until ttl
// passes or the token expires or is deleted, whichever comes first.
func (s *Store) CreateUISession(ctx context.Context, token string, ttl time.Duration) (UISession, error) {
	if ttl <= 0 {
		return UISession{}, invalidf("session TTL %s is not positive", ttl)
	}
	by, err := s.Authenticate(ctx, token)
	if err != nil {
		return UISession{}, err
	}
	id, err := newToken()
	if err != nil {
		return UISession{}, err
	}
	csrf, err := newToken()
	if err != nil {
		return UISession{}, err
	}
	sess := UISession{ID: id, CSRF: csrf, By: by}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO ui_sessions (hash, token_hash, csrf, expires_at)
			SELECT $1, t.hash, $3, least(now() + $4::bigint * interval '1 microsecond', coalesce(t.expires_at, 'infinity'))
			FROM tokens t WHERE t.hash = $2
			RETURNING expires_at`, tokenHash(id), tokenHash(token), csrf, ttl.Microseconds()).Scan(&sess.Expires); err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "ui-sign-in", api.KindUsers, by.User, map[string]any{"Role": by.Role, "Expires": sess.Expires})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return UISession{}, classed(ErrUnauthorized, "token was deleted while signing in")
	}
	if err != nil {
		return UISession{}, classify(err)
	}
	sess.Expires = sess.Expires.UTC()
	return sess, nil
}

// UISessionByID returns the live session with that ID, or ErrUnauthorized. The role is read
// as Authenticate reads a token's: narrowed to the user's current role.
func (s *Store) UISessionByID(ctx context.Context, id string) (UISession, error) {
	if id == "" {
		return UISession{}, classed(ErrUnauthorized, "no session")
	}
	sess := UISession{ID: id}
	var userRole string
	err := s.pool.QueryRow(ctx, `SELECT t."user", t.role, u.role, s.csrf, s.expires_at
		FROM ui_sessions s JOIN tokens t ON t.hash = s.token_hash JOIN users u ON u.name = t."user"
		WHERE s.hash = $1 AND s.expires_at > now() AND coalesce(t.expires_at > now(), true)`,
		tokenHash(id)).Scan(&sess.By.User, &sess.By.Role, &userRole, &sess.CSRF, &sess.Expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return UISession{}, classed(ErrUnauthorized, "no such session, or it expired")
	case err != nil:
		return UISession{}, classify(err)
	}
	if rank(userRole) > rank(sess.By.Role) {
		sess.By.Role = userRole
	}
	sess.Expires = sess.Expires.UTC()
	return sess, nil
}

// DeleteUISession signs a session out; an unknown ID is no error. Expired sessions of
// anybody are dropped with it, so the table holds live sessions only.
func (s *Store) DeleteUISession(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE hash = $1 OR expires_at <= now()`, tokenHash(id))
	return classify(err)
}
