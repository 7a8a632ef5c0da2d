// Package tickets mints and verifies migrate tickets: short-lived, signed, single-use
// authorisations to import one machine into the region that minted them.
//
// A ticket is "<base64url claims JSON>.<base64url HMAC-SHA256>". The claims are readable
// without the key, so a ticket also tells its holder where the destination is; only the
// destination, which holds the key, can verify it. Single use is enforced by the caller
// (the region records the ticket ID when it is spent).
package tickets

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// DefaultTTL is how long a ticket is valid when the caller does not say.
const DefaultTTL = time.Hour

// MaxTTL bounds tickets so a leaked one cannot be used for long.
const MaxTTL = 24 * time.Hour

// ScopeImport is the only scope tickets carry today.
const ScopeImport = "import"

// Errors a verification can end with; each is wrapped with details.
var (
	ErrMalformed   = errors.New("malformed ticket")
	ErrForged      = errors.New("ticket signature does not verify")
	ErrExpired     = errors.New("ticket expired")
	ErrWrongRegion = errors.New("ticket was minted for another region")
	ErrWrongScope  = errors.New("ticket does not allow this operation")
)

// Claims is what a ticket says.
type Claims struct {
	ID       string `json:"jti"`
	Region   string `json:"region"`
	Endpoint string `json:"endpoint"`
	Scope    string `json:"scope"`
	Expires  int64  `json:"exp"` // unix seconds
}

// Signer mints and verifies the tickets of one region.
type Signer struct {
	key      []byte
	region   string
	endpoint string
}

// NewSigner returns a signer for region (name and public URL) with its secret key.
func NewSigner(key []byte, region, endpoint string) (*Signer, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("ticket signing key must be at least 32 bytes, got %d", len(key))
	}
	return &Signer{key: key, region: region, endpoint: endpoint}, nil
}

// NewKey returns a random signing key.
func NewKey() ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	return key, nil
}

// Mint issues a new ticket valid for ttl (DefaultTTL when 0).
func (s *Signer) Mint(now time.Time, ttl time.Duration) (api.Ticket, error) {
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < 0 || ttl > MaxTTL:
		return api.Ticket{}, fmt.Errorf("ticket TTL %s is outside (0, %s]", ttl, MaxTTL)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return api.Ticket{}, fmt.Errorf("ticket id: %w", err)
	}
	expires := now.Add(ttl).Truncate(time.Second)
	claims := Claims{
		ID:       base64.RawURLEncoding.EncodeToString(id),
		Region:   s.region,
		Endpoint: s.endpoint,
		Scope:    ScopeImport,
		Expires:  expires.Unix(),
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return api.Ticket{}, fmt.Errorf("encode ticket: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	token := payload + "." + base64.RawURLEncoding.EncodeToString(s.sign(payload))
	return api.Ticket{Endpoint: s.endpoint, Region: s.region, ID: claims.ID, Expires: expires.UTC(), Token: token}, nil
}

// Verify checks the signature, expiry, region and scope of token.
func (s *Signer) Verify(token string, now time.Time, scope string) (Claims, error) {
	claims, err := Parse(token)
	if err != nil {
		return Claims{}, err
	}
	payload, sig, _ := strings.Cut(token, ".")
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.sign(payload)) {
		return Claims{}, ErrForged
	}
	if claims.Region != s.region {
		return Claims{}, fmt.Errorf("%w: it is for %q, this is %q", ErrWrongRegion, claims.Region, s.region)
	}
	if claims.Scope != scope {
		return Claims{}, fmt.Errorf("%w: scope %q, need %q", ErrWrongScope, claims.Scope, scope)
	}
	if exp := time.Unix(claims.Expires, 0); !now.Before(exp) {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	return claims, nil
}

// Parse reads a ticket's claims without verifying it: enough to learn where it points.
func Parse(token string) (Claims, error) {
	payload, sig, ok := strings.Cut(strings.TrimSpace(token), ".")
	if !ok || payload == "" || sig == "" {
		return Claims{}, fmt.Errorf("%w: want <claims>.<signature>", ErrMalformed)
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var claims Claims
	if err := json.Unmarshal(body, &claims); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if claims.ID == "" || claims.Endpoint == "" || claims.Region == "" {
		return Claims{}, fmt.Errorf("%w: missing id, region or endpoint", ErrMalformed)
	}
	return claims, nil
}

func (s *Signer) sign(payload string) []byte {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(payload))
	return mac.Sum(nil)
}
