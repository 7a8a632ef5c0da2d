package integration

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	regiondns "github.com/ironflow/ironflow/region/dns"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// The abuse suite calls every route of the region and every listener of a rack as every kind
// of caller, and states what each may do; it also names what a body may not name, the
// limits of bodies and connections, and that no outsider is answered more than it asked.
// A route or listener it does not cover fails it, by name: the route table
// (server.Routes) and the rack's listeners (rack.Options.Listeners) are compared with the
// rows of abuseRoutes, abuseKinds and abuseListeners. ARCHITECTURE.md's threat model says who
// holds which credential.

// principal is one kind of caller.
type principal int

const (
	anonymous    principal = iota // no Authorization header
	readonly                      // a readonly user's token
	operator                      // an operator's token
	admin                         // the admin token
	ownRack                       // the token of the rack the path names
	otherRack                     // the token of another rack of the region
	machineToken                  // a machine-role token of machine A
	ownAgent                      // machine A's agent credential (machine:<uuid>:<secret>)
	otherAgent                    // machine B's agent credential, on machine A's paths
	rackSecret                    // the region's rack registration secret as a bearer
	principals
)

var principalNames = [principals]string{"anonymous", "readonly", "operator", "admin", "own rack", "other rack", "machine token", "own agent", "other agent", "rack secret"}

func (p principal) String() string { return principalNames[p] }

// abuseStack is one region on PostgreSQL serving HTTP and DNS on loopback, with a token of
// every principal: two registered racks and two machines with agent secrets.
type abuseStack struct {
	srv      *server.Server
	st       *store.Store
	url      string
	dns      string // the region's DNS address, UDP and TCP
	admin    *client.Client
	tokens   [principals]string
	rackA    rack.State // the rack the paths name; startAbuseRack serves it
	rackADir string     // its state dir
	rackB    rack.State // startLinkRack serves it in a network namespace
	rackBDir string
	machineA api.Machine
	machineB api.Machine
	jobA     api.Job // a job of machine A, which its agent may write
	secret   string  // the rack secret
}

// abuseSlowClientTimeout is the region's read timeout in the suite: a client that has not
// sent its request by then is cut off.
const abuseSlowClientTimeout = 2 * time.Second

// abuseMissing is a UUID no object has.
const abuseMissing = "5d0c1f0e-7a1b-4c2d-8e3f-00000000dead"

func startAbuseStack(t *testing.T) *abuseStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, adminToken := startRegionStore(t, "abuse", "abuse-admin-token")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &abuseStack{st: st, url: "http://" + ln.Addr().String(), dns: testutil.FreeDNSAddr(t), secret: "abuse-rack-secret"}
	s.srv = server.New(st, server.Config{Name: "region-a", PublicURL: s.url, RackSecret: s.secret, Version: "test",
		DNSListen: s.dns, Logger: abuseLogger(t), UI: true, Limits: server.Limits{ReadTimeout: abuseSlowClientTimeout}, ImagesDir: t.TempDir(),
		// Transfers only to 127.0.0.1, so another loopback address stands in for a network
		// the operator did not allow.
		DNSTransferFrom: regiondns.TransferFrom{netip.MustParsePrefix("127.0.0.1/32")}})
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("region: %v", err)
		}
	})
	s.admin = client.New(s.url, adminToken)
	s.tokens[admin] = adminToken
	s.tokens[readonly] = s.userToken(t, "reader", api.RoleReadonly)
	s.tokens[operator] = s.userToken(t, "oper", api.RoleOperator)
	s.rackADir = t.TempDir()
	if s.rackA, err = rack.Register(ctx, rack.RegisterOptions{URLs: []string{s.url}, Secret: s.secret, Name: "rack-a", StateDir: s.rackADir}); err != nil {
		t.Fatal(err)
	}
	s.rackBDir = t.TempDir()
	if s.rackB, err = rack.Register(ctx, rack.RegisterOptions{URLs: []string{s.url}, Secret: s.secret, Name: "rack-b", StateDir: s.rackBDir}); err != nil {
		t.Fatal(err)
	}
	s.tokens[ownRack], s.tokens[otherRack] = s.rackA.Token, s.rackB.Token
	s.servedNet(t, s.rackA.Uuid, abuseServedNet())
	s.servedNet(t, s.rackB.Uuid, abuseRackBNet)
	s.machineA = agentMachine(t, s.admin, api.Machine{Name: "machine-a", Rack: s.rackA.Uuid, HardwareAddrs: []string{"52:54:00:aa:00:01"},
		Address: abuseAddr(abuseServedNet(), 50).String()})
	s.machineB = agentMachine(t, s.admin, api.Machine{Name: "machine-b", Rack: s.rackB.Uuid, HardwareAddrs: []string{"52:54:00:bb:00:01"},
		Address: abuseAddr(abuseRackBNet, 50).String()})
	if s.jobA, err = s.admin.Jobs().Create(ctx, api.Job{Machine: s.machineA.Uuid, StartTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.tokens[machineToken] = s.userToken(t, s.machineA.Uuid, api.RoleMachine)
	s.tokens[ownAgent] = "machine:" + s.machineA.Uuid + ":" + s.machineA.Secret
	s.tokens[otherAgent] = "machine:" + s.machineB.Uuid + ":" + s.machineB.Secret
	s.tokens[rackSecret] = s.secret
	s.abuseZone(t)
	return s
}

// abuseServedNet is rack A's subnet: a loopback /24 of this test process, clear of the
// ranges the rack and DHCP packages' tests use (127.1/8 to 127.31/8), so the rack's
// listeners on loopback can tell its clients (.2 to .254) from outsiders (abuseOutsider).
func abuseServedNet() netip.Prefix {
	pid := os.Getpid()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(32 + pid%16), byte(pid / 16 % 256), 0}), 24)
}

// abuseOutsider is a loopback address outside every subnet of the region.
func abuseOutsider() netip.Addr {
	b := abuseServedNet().Addr().As4()
	b[1] += 16
	b[3] = 9
	return netip.AddrFrom4(b)
}

// abuseRackBNet is rack B's subnet, on the link of its network namespace.
var abuseRackBNet = netip.MustParsePrefix("10.201.0.0/24")

// abuseAddr is the address of net ending in last.
func abuseAddr(net netip.Prefix, last byte) netip.Addr {
	b := net.Addr().As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// servedNet makes rack the primary of a VLAN with DHCP on and the subnet prefix, its
// dynamic range .100 to .200.
func (s *abuseStack) servedNet(t *testing.T, rack string, prefix netip.Prefix) {
	t.Helper()
	ctx := context.Background()
	fabric, err := s.admin.Fabrics().Create(ctx, api.Fabric{Name: "fabric-" + rack})
	if err != nil {
		t.Fatal(err)
	}
	vlan, err := s.admin.VLANs().Create(ctx, api.VLAN{Fabric: fabric.Uuid, VID: 1, DHCPOn: true, PrimaryRack: rack})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.Subnets().Create(ctx, api.Subnet{Name: "net-" + rack, CIDR: prefix.String(), VLAN: vlan.Uuid,
		DynamicRange: api.IPRange{Start: abuseAddr(prefix, 100).String(), End: abuseAddr(prefix, 200).String()}}); err != nil {
		t.Fatal(err)
	}
}

// abuseLogger shows the components' logs with a failing test's output.
func abuseLogger(t *testing.T) *slog.Logger {
	if os.Getenv("IRONFLOW_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(logWriter{t}, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// userToken creates a user with role and mints a token for it.
func (s *abuseStack) userToken(t *testing.T, name, role string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := s.admin.Users().Create(ctx, api.User{Name: name, Role: role}); err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	tok, err := s.admin.MintToken(ctx, name, api.TokenRequest{})
	if err != nil {
		t.Fatalf("token of %s: %v", name, err)
	}
	return tok.Token
}

// abuseAnswer is a status and body read in full.
type abuseAnswer struct {
	code int
	body []byte
}

// call sends body (nil for none) to the region as who.
func (s *abuseStack) call(t *testing.T, who principal, method, path string, body []byte) abuseAnswer {
	t.Helper()
	return callAs(t, s.tokens[who], method, s.url+path, body)
}

// callAs sends body to target with token as the bearer ("" for none).
func callAs(t *testing.T, token, method, target string, body []byte) abuseAnswer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return abuseAnswer{code: resp.StatusCode, body: b}
}

// TestAbuse is the abuse suite: one region, two racks, one of them serving on loopback.
func TestAbuse(t *testing.T) {
	s := startAbuseStack(t)
	t.Run("routes", func(t *testing.T) { abuseRouteMatrix(t, s) })
	t.Run("bodies", func(t *testing.T) { abuseBodies(t, s) })
	t.Run("limits", func(t *testing.T) { abuseLimits(t, s) })
	t.Run("region DNS", func(t *testing.T) { abuseRegionDNS(t, s) })
	t.Run("rack", func(t *testing.T) { abuseRackListeners(t, s) })
	t.Run("codec endpoint", func(t *testing.T) { abuseCodecEndpoint(t, s) })
	t.Run("web UI", func(t *testing.T) { abuseUI(t, s) })
}

// newUUID is a fresh UUID for an object a check creates.
func newUUID() string { return uuid.NewString() }
