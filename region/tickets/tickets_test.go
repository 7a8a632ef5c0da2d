package tickets

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func newSigner(t *testing.T, region string) *Signer {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, region, "https://"+region+":5240")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMintThenVerify(t *testing.T) {
	s := newSigner(t, "region-b")
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	tk, err := s.Mint(now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Expires.Sub(now); got != DefaultTTL {
		t.Fatalf("default TTL: got %s", got)
	}
	claims, err := s.Verify(tk.Token, now.Add(time.Minute), ScopeImport)
	if err != nil {
		t.Fatal(err)
	}
	if claims.ID != tk.ID || claims.Endpoint != "https://region-b:5240" || claims.Region != "region-b" {
		t.Fatalf("claims %+v do not match ticket %+v", claims, tk)
	}
	parsed, err := Parse(tk.Token)
	if err != nil || parsed != claims {
		t.Fatalf("Parse = %+v, %v; want %+v", parsed, err, claims)
	}
}

func TestVerifyRefuses(t *testing.T) {
	s := newSigner(t, "region-b")
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	tk, err := s.Mint(now, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other := newSigner(t, "region-c")
	otherTicket, _ := other.Mint(now, 0)
	sameNameOtherKey := newSigner(t, "region-b")
	payload, _, _ := strings.Cut(tk.Token, ".")
	body, _ := base64.RawURLEncoding.DecodeString(payload)
	tampered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(body), "region-b\"", "region-x\"", 1))) + tk.Token[len(payload):]

	cases := []struct {
		name  string
		s     *Signer
		token string
		at    time.Time
		scope string
		want  error
	}{
		{"expired", s, tk.Token, now.Add(10 * time.Minute), ScopeImport, ErrExpired},
		{"forged by another key", sameNameOtherKey, tk.Token, now, ScopeImport, ErrForged},
		{"claims tampered", s, tampered, now, ScopeImport, ErrForged},
		{"other region's ticket", s, otherTicket.Token, now, ScopeImport, ErrForged},
		{"wrong scope", s, tk.Token, now, "delete", ErrWrongScope},
		{"garbage", s, "not-a-ticket", now, ScopeImport, ErrMalformed},
		{"empty", s, "", now, ScopeImport, ErrMalformed},
		{"bad base64", s, "!!!.???", now, ScopeImport, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.s.Verify(c.token, c.at, c.scope)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify: got %v, want %v", err, c.want)
			}
		})
	}
}

func TestWrongRegionWithSharedKey(t *testing.T) {
	key, _ := NewKey()
	a, _ := NewSigner(key, "region-a", "https://a")
	b, _ := NewSigner(key, "region-b", "https://b")
	tk, _ := a.Mint(time.Now(), 0)
	if _, err := b.Verify(tk.Token, time.Now(), ScopeImport); !errors.Is(err, ErrWrongRegion) {
		t.Fatalf("got %v, want ErrWrongRegion", err)
	}
}

func TestMintRejectsBadTTLAndShortKey(t *testing.T) {
	s := newSigner(t, "r")
	for _, ttl := range []time.Duration{-time.Second, MaxTTL + time.Second} {
		if _, err := s.Mint(time.Now(), ttl); err == nil {
			t.Errorf("TTL %s accepted", ttl)
		}
	}
	if _, err := NewSigner([]byte("short"), "r", "u"); err == nil {
		t.Error("short key accepted")
	}
}
