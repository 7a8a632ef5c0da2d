package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

var users = newKind(kind[api.User]{
	name: api.KindUsers, noun: "user", table: "users",
	self:  func(u *api.User) *string { return &u.Name },
	bare:  "name",
	keys:  map[string]string{"Name": "name = $1", "Role": "role = $1"},
	order: "name",
	columns: func(u *api.User) []column {
		return []column{{"name", u.Name}, {"role", u.Role}}
	},
	prepare: func(u, old *api.User) {
		switch {
		case old != nil:
			u.Created = old.Created
		case u.Created.IsZero():
			u.Created = time.Now().UTC()
		}
	},
	validate: func(u *api.User) error {
		if err := validName("user", u.Name, true); err != nil {
			return err
		}
		return validRole("user "+u.Name, u.Role)
	},
})

func validRole(noun, role string) error {
	if !slices.Contains(api.Roles, role) {
		return invalidf("%s: unknown role %q (roles: %v)", noun, role, api.Roles)
	}
	return nil
}

// rank orders roles; a lower rank is more privileged.
func rank(role string) int { return slices.Index(api.Roles, role) }

// newToken returns 32 random bytes, base64url.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// CreateToken mints a token for an existing user; role "" means the user's role; a role more
// privileged than the user's is ErrInvalid. ttl 0 = no expiry. Only the token's SHA-256 hash
// is stored: the returned Token is the one chance to see it.
func (s *Store) CreateToken(ctx context.Context, by Principal, user, role string, ttl time.Duration) (api.Token, error) {
	if ttl < 0 {
		return api.Token{}, invalidf("token TTL %s is negative", ttl)
	}
	raw, err := newToken()
	if err != nil {
		return api.Token{}, err
	}
	var tok api.Token
	err = s.tx(ctx, func(tx pgx.Tx) error {
		u, err := users.resolve(ctx, tx, user, false)
		if err != nil {
			return err
		}
		if role == "" {
			role = u.obj.Role
		}
		if err := validRole("token for user "+u.obj.Name, role); err != nil {
			return err
		}
		if rank(role) < rank(u.obj.Role) {
			return invalidf("user %s has role %s and cannot get a %s token", u.obj.Name, u.obj.Role, role)
		}
		tok = api.Token{User: u.obj.Name, Role: role, Token: raw}
		return insertToken(ctx, tx, by, &tok, ttl)
	})
	if err != nil {
		return api.Token{}, err
	}
	return tok, nil
}

// insertToken stores the hash of tok.Token, fills tok.Expires and records the event.
func insertToken(ctx context.Context, tx pgx.Tx, by Principal, tok *api.Token, ttl time.Duration) error {
	var expires *time.Time
	if err := tx.QueryRow(ctx, `INSERT INTO tokens (hash, "user", role, expires_at)
		VALUES ($1, $2, $3, CASE WHEN $4::bigint = 0 THEN NULL ELSE now() + $4::bigint * interval '1 microsecond' END)
		RETURNING expires_at`, tokenHash(tok.Token), tok.User, tok.Role, ttl.Microseconds()).Scan(&expires); err != nil {
		return err
	}
	details := map[string]any{"Role": tok.Role}
	if expires != nil {
		tok.Expires = expires.UTC()
		details["Expires"] = tok.Expires
	}
	return recordEvent(ctx, tx, by, "create-token", api.KindUsers, tok.User, details)
}

// Authenticate returns the principal of a token, or ErrUnauthorized. The role is the token's,
// narrowed to the user's current role if the user was demoted since.
func (s *Store) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, classed(ErrUnauthorized, "no token given")
	}
	var p Principal
	var userRole string
	var expired bool
	err := s.pool.QueryRow(ctx, `SELECT t."user", t.role, u.role, coalesce(t.expires_at <= now(), false)
		FROM tokens t JOIN users u ON u.name = t."user" WHERE t.hash = $1`, tokenHash(token)).Scan(&p.User, &p.Role, &userRole, &expired)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Principal{}, classed(ErrUnauthorized, "unknown token")
	case err != nil:
		return Principal{}, classify(err)
	case expired:
		return Principal{}, classed(ErrUnauthorized, "token of user %s has expired", p.User)
	}
	if rank(userRole) > rank(p.Role) {
		p.Role = userRole
	}
	return p, nil
}

// adminUser is the account BootstrapAdmin maintains.
const adminUser = "admin"

// bootstrapLock serialises BootstrapAdmin of region processes starting together.
const bootstrapLock int64 = 0x69726f6e61646d6e

// BootstrapAdmin makes sure an "admin" user exists. When no admin token exists yet it stores
// token (if non-empty, e.g. from IRONFLOW_ADMIN_TOKEN) or a new random one and returns it with
// created=true; otherwise created=false. If token is non-empty and not yet known it is added.
func (s *Store) BootstrapAdmin(ctx context.Context, token string) (minted string, created bool, err error) {
	system := Principal{User: "system", Role: api.RoleAdmin}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", bootstrapLock); err != nil {
			return err
		}
		if _, err := users.resolve(ctx, tx, adminUser, false); errors.Is(err, ErrNotFound) {
			if err := users.create(ctx, tx, system, &api.User{Name: adminUser, Role: api.RoleAdmin}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		var haveAdminToken, known bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE role = 'admin'),
			EXISTS (SELECT 1 FROM tokens WHERE hash = $1)`, tokenHash(token)).Scan(&haveAdminToken, &known); err != nil {
			return err
		}
		switch {
		case known && !haveAdminToken:
			return invalidf("the admin token given is already a token of a non-admin user")
		case !haveAdminToken:
			if token == "" {
				var err error
				if token, err = newToken(); err != nil {
					return err
				}
			}
			minted, created = token, true
		case token == "" || known:
			return nil
		}
		return insertToken(ctx, tx, system, &api.Token{User: adminUser, Role: api.RoleAdmin, Token: token}, 0)
	})
	if err != nil {
		return "", false, err
	}
	return minted, created, nil
}
