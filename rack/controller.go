package rack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/rack/regionlink"
	"github.com/ironflow/ironflow/region/api"
)

// exportBatch is how many leases one POST carries when the rack exports them all.
const exportBatch = 500

// controller is the running rack as its activities and its heartbeat see it.
type controller struct {
	stateDir   string
	version    string
	interfaces []string
	link       *regionlink.Link
	auth       *rackAuth
	region     regionAPI
	table      *leases.Table
	hc         *http.Client
	log        *slog.Logger

	moveMu sync.Mutex // one move at a time
	mu     sync.Mutex
	st     State

	dhcpUp, tftpUp, httpUp atomic.Bool
}

func (c *controller) state() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// State implements rackacts.Controller.
func (c *controller) State() rackacts.State {
	st := c.state()
	return rackacts.State{
		Uuid:          st.Uuid,
		Name:          st.Name,
		Region:        st.Region.Name,
		CurrentRegion: c.link.Current().String(),
		Endpoints:     c.link.Endpoints(),
		ActiveLeases:  c.activeLeases(),
		Serving:       rackacts.Serving{DHCP: c.dhcpUp.Load(), TFTP: c.tftpUp.Load(), HTTP: c.httpUp.Load()},
	}
}

func (c *controller) activeLeases() int {
	n := 0
	for _, l := range c.table.Export() {
		if l.State == string(leases.Active) {
			n++
		}
	}
	return n
}

// ExportLeases implements rackacts.Controller. Leases the region refuses are logged and left
// out, so that one bad record cannot stop a transfer; it returns how many were accepted.
func (c *controller) ExportLeases(ctx context.Context) (int, error) {
	all := c.table.Export()
	accepted := 0
	for start := 0; start < len(all); start += exportBatch {
		batch := all[start:min(start+exportBatch, len(all))]
		out, err := leases.Send(ctx, c.region, batch)
		if err != nil {
			return 0, err
		}
		for _, r := range out.Rejected {
			c.log.Error("the region rejected a lease of the export", "addr", r.IP, "mac", r.MAC, "error", r.Error)
		}
		for i, err := range out.Refused {
			c.log.Error("the region refused a lease of the export", "addr", batch[i].Addr, "mac", batch[i].MAC, "error", err)
		}
		accepted += len(batch) - len(out.Rejected) - len(out.Refused)
	}
	return accepted, nil
}

// MoveToRegion implements rackacts.Controller. The registration is stored before the link
// swaps, so a crash in between is completed by the next Serve (which makes the link follow
// the stored endpoints).
func (c *controller) MoveToRegion(ctx context.Context, urls []string, secret string) (api.Info, error) {
	urls, err := normalizeURLs(urls)
	if err != nil {
		return api.Info{}, err
	}
	c.moveMu.Lock()
	defer c.moveMu.Unlock()
	cur := c.state()
	reg := api.RackRegistration{Uuid: cur.Uuid, Name: cur.Name, Interfaces: c.interfaces, Version: c.version}
	st, err := registerAny(ctx, c.hc, urls, credentials{token: cur.Token, tokenURLs: cur.Endpoints, secret: secret}, reg)
	if err != nil {
		return api.Info{}, err
	}
	if st.Uuid != cur.Uuid {
		return api.Info{}, fmt.Errorf("region %s registered the rack as %s instead of %s", st.Region.Name, st.Uuid, cur.Uuid)
	}
	if err := saveState(c.stateDir, st); err != nil {
		return api.Info{}, err
	}
	c.auth.setToken(st.Token)
	if err := c.link.SwapEndpoints(st.Endpoints); err != nil {
		return api.Info{}, err
	}
	c.mu.Lock()
	c.st = st
	c.mu.Unlock()
	c.log.Info("rack moved to region", "region", st.Region.Name, "endpoints", st.Endpoints)
	// Best effort: the link retries both on its own schedule.
	if _, err := c.link.SyncConfig(asRack(ctx)); err != nil {
		c.log.Warn("config of the new region not fetched yet", "error", err)
	}
	c.beat(ctx)
	return st.Region, nil
}

// heartbeats reports to the region every interval until ctx ends.
func (c *controller) heartbeats(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.beat(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// beat sends one heartbeat; a rack with no config from its region says it is degraded.
func (c *controller) beat(ctx context.Context) {
	hb := api.RackHeartbeat{Version: c.version, ActiveLeases: c.activeLeases(), CurrentRegion: c.link.Current().String()}
	if _, ok := c.link.Config(); !ok {
		hb.Degraded, hb.Reason = true, "no rack config from the region yet"
	}
	if err := c.region.heartbeat(ctx, hb); err != nil && ctx.Err() == nil {
		c.log.Warn("heartbeat not delivered", "error", err)
	}
}
