package store_test

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, api.KindUsers, &api.User{Name: "bob", Role: api.RoleOperator})

	tok, err := s.CreateToken(ctx, alice, "bob", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if tok.User != "bob" || tok.Role != api.RoleOperator || len(tok.Token) != 43 {
		t.Fatalf("token %+v: want bob/operator and 43 base64url characters", tok)
	}
	if d := time.Until(tok.Expires); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("token expires in %s, want about an hour", d)
	}
	var dump string
	if err := s.DB().QueryRow(ctx, "SELECT (SELECT string_agg(t::text, ',') FROM tokens t) || (SELECT string_agg(e::text, ',') FROM events e)").Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, tok.Token) {
		t.Fatal("the raw token is stored in the database")
	}
	sum := sha256.Sum256([]byte(tok.Token))
	var found bool
	if err := s.DB().QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tokens WHERE hash = $1)", sum[:]).Scan(&found); err != nil || !found {
		t.Fatalf("the token's SHA-256 is not stored (%v)", err)
	}
	p, err := s.Authenticate(ctx, tok.Token)
	if err != nil || p != (store.Principal{User: "bob", Role: api.RoleOperator}) {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}

	forever, err := s.CreateToken(ctx, alice, "bob", api.RoleReadonly, 0)
	if err != nil || !forever.Expires.IsZero() || forever.Role != api.RoleReadonly {
		t.Fatalf("narrowed token without expiry: %+v, %v", forever, err)
	}
	// A user demoted after minting keeps only the narrower role.
	if err := s.Replace(ctx, alice, api.KindUsers, "bob", &api.User{Role: api.RoleMachine}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Authenticate(ctx, forever.Token); err != nil || p.Role != api.RoleMachine {
		t.Fatalf("demoted user's token: %+v, %v", p, err)
	}

	if _, err := s.DB().Exec(ctx, "UPDATE tokens SET expires_at = now() - interval '1 second' WHERE hash = $1", sum[:]); err != nil {
		t.Fatal(err)
	}
	_, err = s.Authenticate(ctx, tok.Token)
	wantErr(t, err, store.ErrUnauthorized, "token of user bob has expired")
	_, err = s.Authenticate(ctx, "bogus")
	wantErr(t, err, store.ErrUnauthorized, "unknown token")
	_, err = s.Authenticate(ctx, "")
	wantErr(t, err, store.ErrUnauthorized, "no token")

	before := snapshot(t, s)
	for _, c := range []struct {
		user, role string
		ttl        time.Duration
		class      error
		want       string
	}{
		{"bob", api.RoleAdmin, 0, store.ErrInvalid, "user bob has role machine and cannot get a admin token"},
		{"bob", "root", 0, store.ErrInvalid, `unknown role "root"`},
		{"nobody", "", 0, store.ErrNotFound, "user nobody not found"},
		{"bob", "", -time.Second, store.ErrInvalid, "negative"},
	} {
		_, err := s.CreateToken(ctx, alice, c.user, c.role, c.ttl)
		wantErr(t, err, c.class, c.want)
	}
	if snapshot(t, s) != before {
		t.Fatal("a refused CreateToken changed the database")
	}

	// Deleting the user revokes its tokens.
	if err := s.Delete(ctx, alice, api.KindUsers, "bob", false); err != nil {
		t.Fatal(err)
	}
	_, err = s.Authenticate(ctx, forever.Token)
	wantErr(t, err, store.ErrUnauthorized, "unknown token")
}

func TestBootstrapAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("random", func(t *testing.T) {
		s, _ := newStore(t)
		minted, created, err := s.BootstrapAdmin(ctx, "")
		if err != nil || !created || len(minted) != 43 {
			t.Fatalf("first BootstrapAdmin = %q, %v, %v", minted, created, err)
		}
		if p, err := s.Authenticate(ctx, minted); err != nil || p != (store.Principal{User: "admin", Role: api.RoleAdmin}) {
			t.Fatalf("Authenticate(minted) = %+v, %v", p, err)
		}
		again, created, err := s.BootstrapAdmin(ctx, "")
		if err != nil || created || again != "" {
			t.Fatalf("second BootstrapAdmin = %q, %v, %v", again, created, err)
		}
		const fromEnv = "operator-chosen-admin-token"
		if _, created, err := s.BootstrapAdmin(ctx, fromEnv); err != nil || created {
			t.Fatalf("BootstrapAdmin(env) on a bootstrapped region: created %v, %v", created, err)
		}
		for _, tok := range []string{minted, fromEnv} {
			if _, err := s.Authenticate(ctx, tok); err != nil {
				t.Fatalf("token %q: %v", tok, err)
			}
		}
		var n int
		if err := s.DB().QueryRow(ctx, `SELECT count(*) FROM tokens WHERE "user" = 'admin'`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d admin tokens (%v), want 2", n, err)
		}
		if _, _, err := s.BootstrapAdmin(ctx, fromEnv); err != nil {
			t.Fatal(err)
		}
		if err := s.DB().QueryRow(ctx, `SELECT count(*) FROM tokens WHERE "user" = 'admin'`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("a known token was added again: %d tokens (%v)", n, err)
		}
	})
	t.Run("token of another user", func(t *testing.T) {
		s, _ := newStore(t)
		mustCreate(t, s, api.KindUsers, &api.User{Name: "bob", Role: api.RoleReadonly})
		tok, err := s.CreateToken(ctx, alice, "bob", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, s)
		_, _, err = s.BootstrapAdmin(ctx, tok.Token)
		wantErr(t, err, store.ErrInvalid, "already a token of a non-admin user")
		if snapshot(t, s) != before {
			t.Fatal("a refused BootstrapAdmin changed the database")
		}
	})
	t.Run("from environment", func(t *testing.T) {
		s, _ := newStore(t)
		minted, created, err := s.BootstrapAdmin(ctx, "env-token-0123456789")
		if err != nil || !created || minted != "env-token-0123456789" {
			t.Fatalf("BootstrapAdmin(env) = %q, %v, %v", minted, created, err)
		}
		var u api.User
		if err := s.Get(ctx, api.KindUsers, "admin", &u); err != nil || u.Role != api.RoleAdmin {
			t.Fatalf("admin user %+v, %v", u, err)
		}
	})
}
