package rack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// RegisterOptions says where and how a rack registers.
type RegisterOptions struct {
	URLs       []string // region endpoints, preferred first; each is tried in turn
	Secret     string   // the region's rack secret
	Name       string   // default: the name of an earlier registration, else the host name
	StateDir   string   // default DefaultStateDir
	Interfaces []string // reported to the region
	Version    string
	HTTPClient *http.Client // default: 30 s timeout
}

// RegistrationError is a region's refusal of a registration (wrong secret, bad name, ...):
// trying again with the same input cannot succeed.
type RegistrationError struct {
	URL        string
	StatusCode int
	Message    string
}

// Permanent marks the refusal as final for the rack's activities.
func (e *RegistrationError) Permanent() bool { return true }

func (e *RegistrationError) Error() string {
	return fmt.Sprintf("region %s refused the registration: %s (HTTP %d)", e.URL, e.Message, e.StatusCode)
}

// Register registers the rack with the first region of o.URLs that accepts it and stores
// the registration (UUID, token, endpoints) in the state directory, atomically. A rack
// registered before keeps its UUID and proves it with its own token to the endpoints of
// that registration (a region lets the shared secret claim a rack only once); the secret is
// used where the token is unknown (a new region, or a revoked token). Serve picks up the
// new endpoints at its next start.
func Register(ctx context.Context, o RegisterOptions) (State, error) {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	urls, err := normalizeURLs(o.URLs)
	if err != nil {
		return State{}, err
	}
	prev, err := LoadState(o.StateDir)
	if err != nil && !errors.Is(err, ErrNotRegistered) {
		return State{}, err
	}
	if o.Secret == "" && prev.Token == "" {
		return State{}, errors.New("register: no rack secret given")
	}
	if o.Name == "" {
		o.Name = prev.Name
	}
	if o.Name == "" {
		if o.Name, err = os.Hostname(); err != nil {
			return State{}, fmt.Errorf("register: rack name: %w", err)
		}
	}
	reg := api.RackRegistration{Uuid: prev.Uuid, Name: o.Name, Interfaces: o.Interfaces, Version: o.Version}
	if reg.Interfaces == nil {
		reg.Interfaces = []string{}
	}
	creds := credentials{token: prev.Token, tokenURLs: prev.Endpoints, secret: o.Secret}
	st, err := registerAny(ctx, o.HTTPClient, urls, creds, reg)
	if err != nil {
		return State{}, err
	}
	if err := saveState(o.StateDir, st); err != nil {
		return State{}, err
	}
	return st, nil
}

// normalizeURLs checks region URLs (absolute http(s)) and drops trailing slashes.
func normalizeURLs(raw []string) ([]string, error) {
	if len(raw) == 0 {
		return nil, errors.New("no region URL given")
	}
	out := make([]string, 0, len(raw))
	for _, s := range raw {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("region URL %q: want http(s)://host[:port]", s)
		}
		out = append(out, strings.TrimSuffix(u.String(), "/"))
	}
	return out, nil
}

// credentials are what a registration may present: the rack's own token, to the endpoints
// of the region that issued it only (it is a credential there and must not reach another
// region), else the region's shared rack secret.
type credentials struct {
	token     string
	tokenURLs []string
	secret    string
}

// forURL returns the bearers to try at base, in order.
func (c credentials) forURL(base string) []string {
	var out []string
	if c.token != "" && slices.Contains(c.tokenURLs, base) {
		out = append(out, c.token)
	}
	if c.secret != "" {
		out = append(out, c.secret)
	}
	return out
}

// registerAny tries each URL in turn and returns the state of the first registration that
// succeeds; with none it returns every failure. At each URL the rack's token goes first; the
// secret follows only when the region does not know the token (401).
func registerAny(ctx context.Context, hc *http.Client, urls []string, creds credentials, reg api.RackRegistration) (State, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	body, err := json.Marshal(reg)
	if err != nil {
		return State{}, fmt.Errorf("encode registration: %w", err)
	}
	var errs []error
	for _, base := range urls {
		for _, bearer := range creds.forURL(base) {
			got, err := registerAt(ctx, hc, base, bearer, body)
			if err == nil {
				return State{Uuid: got.Rack.Uuid, Name: got.Rack.Name, Token: got.Token, Endpoints: urls, Region: got.Region}, nil
			}
			errs = append(errs, err)
			var refused *RegistrationError
			if !errors.As(err, &refused) || refused.StatusCode != http.StatusUnauthorized {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return State{}, fmt.Errorf("register rack %s: %w", reg.Name, errors.Join(errs...))
}

func registerAt(ctx context.Context, hc *http.Client, base, bearer string, body []byte) (api.RackRegistered, error) {
	var out api.RackRegistered
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.PathPrefix+"/racks/register", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, fmt.Errorf("%s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data[:min(len(data), 512)]))
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return out, &RegistrationError{URL: base, StatusCode: resp.StatusCode, Message: e.Error}
		}
		return out, fmt.Errorf("%s: %s: %s", base, resp.Status, e.Error)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("%s: decode registration: %w", base, err)
	}
	if out.Rack.Uuid == "" || out.Token == "" {
		return out, fmt.Errorf("%s: registration answer has no rack UUID or token", base)
	}
	return out, nil
}
