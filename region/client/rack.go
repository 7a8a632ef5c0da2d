package client

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// The rack API (region/api/rack.go): the calls a rack makes about itself, with its own token.

// RackHeartbeat reports the health of the rack with UUID rack and returns its record.
func (c *Client) RackHeartbeat(ctx context.Context, rack string, hb api.RackHeartbeat) (api.Rack, error) {
	return callKey[api.Rack](ctx, c, http.MethodPost, hb, api.KindRacks, rack, "heartbeat")
}

// SyncLeases uploads one batch of the rack's leases.
func (c *Client) SyncLeases(ctx context.Context, rack string, batch []api.Lease) (api.LeaseSyncResult, error) {
	return callKey[api.LeaseSyncResult](ctx, c, http.MethodPost, batch, api.KindRacks, rack, "leases")
}

// PostSyslog uploads one batch of the syslog of the rack's machines.
func (c *Client) PostSyslog(ctx context.Context, rack string, batch []api.SyslogMessage) (api.SyslogSyncResult, error) {
	return callKey[api.SyslogSyncResult](ctx, c, http.MethodPost, batch, api.KindRacks, rack, "syslog")
}

// StorePodFacts stores what a refresh of the rack's pod found, in one transaction.
func (c *Client) StorePodFacts(ctx context.Context, rack, pod string, f api.PodFacts) (api.Pod, error) {
	return callKey[api.Pod](ctx, c, http.MethodPut, f, api.KindRacks, rack, "pods", pod, "facts")
}

// DeclarePodVM declares the machine of a VM composed on the rack's pod.
func (c *Client) DeclarePodVM(ctx context.Context, rack, pod string, m api.Machine) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPost, m, api.KindRacks, rack, "pods", pod, "vms")
}

// ForgetPodVM deletes the machine of a VM of the rack's pod and drops it from the pod.
func (c *Client) ForgetPodVM(ctx context.Context, rack, pod, machine string) error {
	path, err := keyPath(api.KindRacks, rack, "pods", pod, "vms", machine)
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodDelete, Path: path})
}
