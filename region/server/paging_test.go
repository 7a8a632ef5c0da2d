package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// TestListPaging: a list answers at most a page (DefaultPageSize unless limit says less,
// never more than MaxPageSize) with the next page's offset in X-Ironflow-Next, and the client
// pages through transparently.
func TestListPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Fabric": fabric, "VID": 1, "PrimaryRack": rack.Rack.Uuid, "DHCPOn": true})["Uuid"]
	subnet := e.create(api.KindSubnets, map[string]any{"Name": "s", "CIDR": "10.8.0.0/16", "VLAN": vlan})["Uuid"].(string)
	total := api.DefaultPageSize + 7
	batch := make([]api.Lease, total)
	now := time.Now().UTC()
	for i := range batch {
		batch[i] = api.Lease{Addr: fmt.Sprintf("10.8.%d.%d", i/250, 1+i%250), MAC: fmt.Sprintf("52:54:01:00:%02x:%02x", byte(i>>8), byte(i)),
			Subnet: subnet, State: "active", Start: now, Expires: now.Add(time.Hour)}
	}
	if res, err := e.st.SyncLeases(ctx, store.Principal{User: "test", Role: api.RoleAdmin}, rack.Rack.Uuid, batch); err != nil || res.Stored != total {
		t.Fatalf("seed leases: %+v, %v", res, err)
	}

	page := func(query string, wantLen int, wantNext string) {
		t.Helper()
		r := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/leases"+query, nil, http.StatusOK)
		if n := len(r.list(t)); n != wantLen || r.header.Get(api.HeaderNext) != wantNext {
			t.Errorf("leases%s: %d objects, next %q; want %d, %q", query, n, r.header.Get(api.HeaderNext), wantLen, wantNext)
		}
	}
	page("", api.DefaultPageSize, fmt.Sprint(api.DefaultPageSize))
	page("?offset=1000", 7, "")
	page("?limit=5", 5, "5")
	page("?limit=5&offset=1005", 2, "")
	page(fmt.Sprintf("?limit=%d", api.MaxPageSize), total, "")
	for _, bad := range []string{fmt.Sprintf("?limit=%d", api.MaxPageSize+1), "?limit=0", "?limit=-1"} {
		e.do(api.RoleReadonly, http.MethodGet, "/api/v1/leases"+bad, nil).apiError(t, http.StatusBadRequest)
	}
	events := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?limit=2", nil, http.StatusOK)
	if len(events.list(t)) != 2 || events.header.Get(api.HeaderNext) != "2" {
		t.Errorf("events?limit=2: %s, next %q", events.body, events.header.Get(api.HeaderNext))
	}

	c := client.New(e.base, e.tokens[api.RoleReadonly])
	all, err := c.Leases().List(ctx, nil)
	if err != nil || len(all) != total {
		t.Fatalf("client list: %d leases, %v; want %d", len(all), err, total)
	}
	seen := map[string]bool{}
	for _, l := range all {
		seen[l.Addr] = true
	}
	if len(seen) != total {
		t.Errorf("client pages repeat or skip leases: %d distinct of %d", len(seen), total)
	}
	if some, err := c.Leases().List(ctx, url.Values{"limit": {"3"}}); err != nil || len(some) != 3 {
		t.Errorf("client list limit=3: %d, %v", len(some), err)
	}
}

// TestEventRetention: the region process prunes the audit log to its retention in the
// background.
func TestEventRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		e.create(api.KindPools, map[string]any{"Name": fmt.Sprintf("p%d", i)})
	}
	startServer(t, e.st, "pruning", func(c *server.Config) {
		c.Retention = server.Retention{MaxCount: 2, Interval: 50 * time.Millisecond}
	})
	eventually(t, "the audit log pruned to 2 events", func() bool {
		return len(e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events", nil, http.StatusOK).list(t)) == 2
	})
}
