package tickets

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// ScopeGrant marks a migrate grant: signed with the same key as import tickets, refused as one.
const ScopeGrant = "migrate-grant"

// MintGrant signs a grant with claims c valid for ttl (api.DefaultGrantTTL when 0); the ID,
// region, endpoint, scope and expiry are filled in.
func (s *Signer) MintGrant(now time.Time, ttl time.Duration, c api.GrantClaims) (api.Grant, error) {
	switch {
	case ttl == 0:
		ttl = api.DefaultGrantTTL
	case ttl < 0 || ttl > api.MaxGrantTTL:
		return api.Grant{}, fmt.Errorf("grant TTL %s is outside (0, %s]", ttl, api.MaxGrantTTL)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return api.Grant{}, fmt.Errorf("grant id: %w", err)
	}
	c.ID = base64.RawURLEncoding.EncodeToString(id)
	c.Region, c.Endpoint, c.Scope = s.region, s.endpoint, ScopeGrant
	c.Expires = now.Add(ttl).Unix()
	body, err := json.Marshal(c)
	if err != nil {
		return api.Grant{}, fmt.Errorf("encode grant: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	return api.Grant{GrantClaims: c, Token: payload + "." + base64.RawURLEncoding.EncodeToString(s.sign(payload))}, nil
}

// VerifyGrant checks the signature, region, scope and expiry of a grant and returns its claims.
func (s *Signer) VerifyGrant(token string, now time.Time) (api.GrantClaims, error) {
	payload, sig, ok := strings.Cut(strings.TrimSpace(token), ".")
	if !ok || payload == "" || sig == "" {
		return api.GrantClaims{}, fmt.Errorf("%w: want <claims>.<signature>", ErrMalformed)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.sign(payload)) {
		return api.GrantClaims{}, ErrForged
	}
	c, err := ParseGrant(token)
	if err != nil {
		return api.GrantClaims{}, err
	}
	switch {
	case c.Region != s.region:
		return api.GrantClaims{}, fmt.Errorf("%w: it is for %q, this is %q", ErrWrongRegion, c.Region, s.region)
	case c.Scope != ScopeGrant:
		return api.GrantClaims{}, fmt.Errorf("%w: scope %q, need %q", ErrWrongScope, c.Scope, ScopeGrant)
	case !now.Before(time.Unix(c.Expires, 0)):
		return c, fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
	}
	return c, nil
}

// ParseGrant reads a grant's claims without verifying it: enough for a client to learn its
// ID, who it was issued to and what it covers. Only the issuing region can verify it.
func ParseGrant(token string) (api.GrantClaims, error) {
	payload, _, ok := strings.Cut(strings.TrimSpace(token), ".")
	if !ok || payload == "" {
		return api.GrantClaims{}, fmt.Errorf("%w: want <claims>.<signature>", ErrMalformed)
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return api.GrantClaims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var c api.GrantClaims
	if err := json.Unmarshal(body, &c); err != nil {
		return api.GrantClaims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return c, nil
}
