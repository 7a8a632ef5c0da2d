package tickets

import (
	"errors"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// TestGrantsAreNotTickets: a grant verifies as a grant until it expires, never as an import
// ticket, and a ticket never verifies as a grant, though both are signed with the same key.
func TestGrantsAreNotTickets(t *testing.T) {
	s := newSigner(t, "region-a")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g, err := s.MintGrant(now, 0, api.GrantClaims{Kind: api.GrantMachine, Subject: "m-1", TargetRegion: "region-b", GrantedTo: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.VerifyGrant(g.Token, now.Add(api.DefaultGrantTTL-time.Second))
	if err != nil || c.Subject != "m-1" || c.GrantedTo != "alice" || c.Region != "region-a" || c.ID == "" {
		t.Fatalf("verify %+v, %v", c, err)
	}
	if _, err := s.VerifyGrant(g.Token, now.Add(api.DefaultGrantTTL)); !errors.Is(err, ErrExpired) {
		t.Errorf("expired grant: %v", err)
	}
	if _, err := s.Verify(g.Token, now, ScopeImport); !errors.Is(err, ErrWrongScope) {
		t.Errorf("grant as a ticket: %v", err)
	}
	tk, err := s.Mint(now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyGrant(tk.Token, now); !errors.Is(err, ErrWrongScope) {
		t.Errorf("ticket as a grant: %v", err)
	}
	if _, err := newSigner(t, "region-a").VerifyGrant(g.Token, now); !errors.Is(err, ErrForged) {
		t.Errorf("grant of another key: %v", err)
	}
	if _, err := s.MintGrant(now, api.MaxGrantTTL+time.Second, api.GrantClaims{}); err == nil {
		t.Error("a grant beyond MaxGrantTTL was minted")
	}
}
