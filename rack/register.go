package rack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// RegisterOptions says where and how a rack registers.
type RegisterOptions struct {
	URLs       []string // region endpoints, preferred first; each is tried in turn
	Secret     string   // the region's rack secret
	Name       string   // default: the name of an earlier registration, else the host name
	StateDir   string   // default DefaultStateDir
	Interfaces []string // reported to the region
	Version    string
	HTTPClient *http.Client // default: region/client's, 30 s timeout
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
// secret follows only when the region does not know the token (a 401 *client.APIError).
// A refusal of the registration (wrong secret, bad name, ...) is a *client.APIError that is
// Permanent: trying again with the same input cannot succeed.
func registerAny(ctx context.Context, hc *http.Client, urls []string, creds credentials, reg api.RackRegistration) (State, error) {
	var opts []client.Option
	if hc != nil {
		opts = append(opts, client.WithHTTPClient(hc))
	}
	var errs []error
	for _, base := range urls {
		for _, bearer := range creds.forURL(base) {
			got, err := registerAt(ctx, client.New(base, bearer, opts...), reg)
			if err == nil {
				return State{Uuid: got.Rack.Uuid, Name: got.Rack.Name, Token: got.Token, Endpoints: urls, Region: got.Region}, nil
			}
			errs = append(errs, fmt.Errorf("region %s: %w", base, err))
			if refused, ok := errors.AsType[*client.APIError](err); !ok || refused.StatusCode != http.StatusUnauthorized {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return State{}, fmt.Errorf("register rack %s: %w", reg.Name, errors.Join(errs...))
}

func registerAt(ctx context.Context, region *client.Client, reg api.RackRegistration) (api.RackRegistered, error) {
	out, err := region.RegisterRack(ctx, reg)
	if err != nil {
		return out, err
	}
	if out.Rack.Uuid == "" || out.Token == "" {
		return out, errors.New("registration answer has no rack UUID or token")
	}
	return out, nil
}
