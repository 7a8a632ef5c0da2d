package dns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/region/client"
)

// RegionExchanger asks the region. The answer must be of the region's data at serial
// minSerial or newer (the serial the rack's config names), so a region process whose zones
// are older reads its data again first.
type RegionExchanger interface {
	Exchange(ctx context.Context, q *mdns.Msg, minSerial uint32) (*mdns.Msg, error)
}

// RegionConns is how many idle connections to a region endpoint the rack's transport should
// keep: DNS forwards its clients' queries concurrently, and Go's default of 2 would open and
// close a connection for most of them.
const RegionConns = 64

// Region asks the region's DNS-over-HTTP endpoint (api.DNSQueryPath) through the rack's
// region link, so DNS fails over between region endpoints like every other region call.
type Region struct{ Link client.Doer }

// Exchange implements RegionExchanger.
func (r Region) Exchange(ctx context.Context, q *mdns.Msg, minSerial uint32) (*mdns.Msg, error) {
	body, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("pack query: %w", err)
	}
	data, err := client.New("", "", client.WithDoer(r.Link)).DNSQuery(ctx, body, minSerial)
	if err != nil {
		return nil, fmt.Errorf("region DNS answer: %w", err)
	}
	m := new(mdns.Msg)
	if err := m.Unpack(data); err != nil {
		return nil, fmt.Errorf("region DNS answer: %w", err)
	}
	return m, nil
}

// upstreams asks resolvers in order, over UDP and again over TCP when the answer is
// truncated, until one answers.
type upstreams struct {
	addrs   []netip.AddrPort
	timeout time.Duration
}

var errNoUpstream = errors.New("no upstream resolver configured")

func (u upstreams) exchange(ctx context.Context, q *mdns.Msg) (*mdns.Msg, error) {
	if len(u.addrs) == 0 {
		return nil, errNoUpstream
	}
	var errs []error
	for _, a := range u.addrs {
		m, err := u.exchangeOne(ctx, q, a.String())
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("upstream resolvers unreachable: %w", errors.Join(errs...))
}

func (u upstreams) exchangeOne(ctx context.Context, q *mdns.Msg, addr string) (*mdns.Msg, error) {
	c := &mdns.Client{Net: "udp", Timeout: u.timeout, UDPSize: mdns.DefaultMsgSize}
	m, _, err := c.ExchangeContext(ctx, q, addr)
	if err == nil && !m.Truncated {
		return m, nil
	}
	c.Net = "tcp"
	m, _, err = c.ExchangeContext(ctx, q, addr)
	return m, err
}
