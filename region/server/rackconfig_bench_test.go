package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// BenchmarkRackConfigPoll measures what one config poll of a rack costs the region: a rack
// serving one subnet with 1,000 reserved machines and 1,000 leases of its own, polling with
// If-None-Match of the last ETag it got. Between polls, "own-leases" has the rack renew 10 of
// its own leases (what a rack under DHCP load uploads), "other-rack-lease" has a second rack
// of the VLAN renew one of its leases, and "unchanged" changes nothing. It reports the bytes
// of the answer and the CPU time of the process (region and client) per poll; the uploads
// between polls are not counted.
func BenchmarkRackConfigPoll(b *testing.B) {
	for _, churn := range []string{"own-leases", "other-rack-lease", "unchanged"} {
		b.Run(churn, func(b *testing.B) {
			f := newConfigFixture(b, 1000)
			ctx := context.Background()
			var etag string
			var bytes int64
			var cpu time.Duration
			round := 0
			for b.Loop() {
				round++
				b.StopTimer()
				switch churn {
				case "own-leases":
					f.renew(b, f.rack, f.ownLeases[(round*10)%len(f.ownLeases):][:10])
				case "other-rack-lease":
					f.renew(b, f.other, f.otherLeases[round%len(f.otherLeases):][:1])
				}
				before := processCPU(b)
				b.StartTimer()
				n, tag := f.poll(b, ctx, etag)
				b.StopTimer()
				cpu += processCPU(b) - before
				b.StartTimer()
				bytes += n
				etag = tag
			}
			b.ReportMetric(float64(bytes)/float64(round), "bytes/poll")
			b.ReportMetric(float64(cpu.Microseconds())/float64(round), "cpu-µs/poll")
		})
	}
}

// configFixture is a region serving a rack with reserved machines and leases.
type configFixture struct {
	st                     *store.Store
	base                   string
	rack, other            string // UUIDs
	rackToken              string
	subnet                 string
	ownLeases, otherLeases []api.Lease
}

func newConfigFixture(b *testing.B, n int) *configFixture {
	b.Helper()
	e := newEnv(b)
	// A quiet server of its own: the env's logs every request at debug level.
	base := startServer(b, e.st, "bench-region", func(c *server.Config) { c.Logger = slog.New(slog.DiscardHandler) })
	ctx := context.Background()
	admin := store.Principal{User: "bench", Role: api.RoleAdmin}
	rack, tok, err := e.st.RegisterRack(ctx, api.RackRegistration{Name: "rack-1"}, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	other, _, err := e.st.RegisterRack(ctx, api.RackRegistration{Name: "rack-2"}, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	fabric := &api.Fabric{Name: "f"}
	must(b, e.st.Create(ctx, admin, api.KindFabrics, fabric))
	vlan := &api.VLAN{VID: 1, DHCPOn: true, Fabric: fabric.Uuid, PrimaryRack: rack.Uuid, SecondaryRack: other.Uuid}
	must(b, e.st.Create(ctx, admin, api.KindVLANs, vlan))
	subnet := &api.Subnet{Name: "s", CIDR: "10.8.0.0/16", VLAN: vlan.Uuid, DynamicRange: api.IPRange{Start: "10.8.128.0", End: "10.8.255.254"}}
	must(b, e.st.Create(ctx, admin, api.KindSubnets, subnet))
	for i := range n {
		must(b, e.st.Create(ctx, admin, api.KindMachines, &api.Machine{Name: fmt.Sprintf("m%d", i),
			HardwareAddrs: []string{fmt.Sprintf("52:54:00:00:%02x:%02x", byte(i>>8), byte(i))},
			Address:       fmt.Sprintf("10.8.%d.%d", i/250, 1+i%250)}))
	}
	f := &configFixture{st: e.st, base: base, rack: rack.Uuid, other: other.Uuid, rackToken: tok.Token, subnet: subnet.Uuid}
	now := time.Now().UTC()
	for i := range n + 10 {
		l := api.Lease{Addr: fmt.Sprintf("10.8.%d.%d", 128+i/250, 1+i%250), MAC: fmt.Sprintf("52:54:01:00:%02x:%02x", byte(i>>8), byte(i)),
			Subnet: subnet.Uuid, State: "active", Start: now, Expires: now.Add(time.Hour)}
		if i < n {
			f.ownLeases = append(f.ownLeases, l)
		} else {
			f.otherLeases = append(f.otherLeases, l)
		}
	}
	f.renew(b, f.rack, f.ownLeases)
	f.renew(b, f.other, f.otherLeases)
	return f
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// renew uploads ls as rack's, each expiring later than before.
func (f *configFixture) renew(b *testing.B, rack string, ls []api.Lease) {
	b.Helper()
	for i := range ls {
		ls[i].Expires = ls[i].Expires.Add(time.Second)
		ls[i].Rack = rack
	}
	res, err := f.st.SyncLeases(context.Background(), store.Principal{User: store.RackUser(rack), Role: api.RoleRack}, rack, ls)
	if err != nil || res.Stored != len(ls) {
		b.Fatalf("sync leases: %+v, %v", res, err)
	}
}

// poll GETs the rack's config as the rack does and returns the bytes of the answer and its ETag.
func (f *configFixture) poll(b *testing.B, ctx context.Context, etag string) (int64, string) {
	b.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/api/v1/racks/"+f.rack+"/config", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.rackToken)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotModified) {
		b.Fatalf("config poll: %s, %v", resp.Status, err)
	}
	return n, resp.Header.Get("ETag")
}

// processCPU is the user and system CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
