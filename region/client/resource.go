package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
)

// Resource is the generic CRUD of one kind served by /api/v1/{kind}.
type Resource[T any] struct {
	c    *Client
	kind string
}

// For returns the CRUD calls of kind decoded as T, for kinds without a typed accessor.
func For[T any](c *Client, kind string) Resource[T] { return Resource[T]{c: c, kind: kind} }

// Typed accessors of the kinds in region/api/routes.go.
func (c *Client) Machines() Resource[api.Machine] { return For[api.Machine](c, api.KindMachines) }
func (c *Client) Jobs() Resource[api.Job]         { return For[api.Job](c, api.KindJobs) }
func (c *Client) Profiles() Resource[api.Profile] { return For[api.Profile](c, api.KindProfiles) }
func (c *Client) Pools() Resource[api.Pool]       { return For[api.Pool](c, api.KindPools) }
func (c *Client) Pods() Resource[api.Pod]         { return For[api.Pod](c, api.KindPods) }
func (c *Client) Fabrics() Resource[api.Fabric]   { return For[api.Fabric](c, api.KindFabrics) }
func (c *Client) VLANs() Resource[api.VLAN]       { return For[api.VLAN](c, api.KindVLANs) }
func (c *Client) Subnets() Resource[api.Subnet]   { return For[api.Subnet](c, api.KindSubnets) }
func (c *Client) Leases() Resource[api.Lease]     { return For[api.Lease](c, api.KindLeases) }
func (c *Client) Racks() Resource[api.Rack]       { return For[api.Rack](c, api.KindRacks) }
func (c *Client) Users() Resource[api.User]       { return For[api.User](c, api.KindUsers) }
func (c *Client) Domains() Resource[api.Domain]   { return For[api.Domain](c, api.KindDomains) }
func (c *Client) DNSRecords() Resource[api.DNSRecord] {
	return For[api.DNSRecord](c, api.KindDNSRecords)
}
func (c *Client) CommissioningScripts() Resource[api.CommissioningScript] {
	return For[api.CommissioningScript](c, api.KindCommissioningScripts)
}

// List returns the objects matching DRP-style filters (Field=value, plus "offset"/"limit");
// nil lists everything, page after page. An empty result is an empty, non-nil slice.
func (r Resource[T]) List(ctx context.Context, filters url.Values) ([]T, error) {
	return list[T](ctx, r.c, apiPath(r.kind), filters)
}

// Get returns the object at key (a UUID, a Name, or "Field:value").
func (r Resource[T]) Get(ctx context.Context, key string) (T, error) {
	return callKey[T](ctx, r.c, http.MethodGet, nil, r.kind, key)
}

// Create stores obj and returns the object as the region stored it.
func (r Resource[T]) Create(ctx context.Context, obj T) (T, error) {
	return call[T](ctx, r.c, Request{Method: http.MethodPost, Path: apiPath(r.kind), Body: obj})
}

// Replace overwrites the object at key with obj.
func (r Resource[T]) Replace(ctx context.Context, key string, obj T) (T, error) {
	return callKey[T](ctx, r.c, http.MethodPut, obj, r.kind, key)
}

// Patch applies an RFC 7386 JSON merge patch (a JSON object) to the object at key.
func (r Resource[T]) Patch(ctx context.Context, key string, patch json.RawMessage) (T, error) {
	if !isJSONObject(patch) {
		var zero T
		return zero, fmt.Errorf("patch %s %s: a merge patch must be a JSON object", r.kind, key)
	}
	body := Raw{ContentType: "application/merge-patch+json", Data: patch}
	return callKey[T](ctx, r.c, http.MethodPatch, body, r.kind, key)
}

// Delete removes the object at key; force overrides dependents where the kind allows it.
func (r Resource[T]) Delete(ctx context.Context, key string, force bool) error {
	path, err := keyPath(r.kind, key)
	if err != nil {
		return err
	}
	var query url.Values
	if force {
		query = url.Values{"force": {"true"}}
	}
	return r.c.send(ctx, Request{Method: http.MethodDelete, Path: path, Query: query})
}

// list GETs a collection; an answer of null becomes an empty slice. Without a "limit"
// filter it follows api.HeaderNext through every page; with one it returns that page only.
func list[T any](ctx context.Context, c *Client, path string, filters url.Values) ([]T, error) {
	query := url.Values{}
	for name, values := range filters {
		query[name] = values
	}
	offset, _ := strconv.Atoi(query.Get("offset"))
	out := []T{}
	for {
		r := Request{Method: http.MethodGet, Path: path, Query: query}
		a, err := c.Do(ctx, r)
		if err != nil {
			return nil, err
		}
		var page []T
		if err := decodeAnswer(r, a, &page); err != nil {
			return nil, err
		}
		out = append(out, page...)
		next := a.Header.Get(api.HeaderNext)
		if next == "" || filters.Has("limit") {
			return out, nil
		}
		// Each page must move forward, or a confused server would keep the loop going.
		n, err := strconv.Atoi(next)
		if err != nil || n <= offset {
			return nil, fmt.Errorf("GET %s: %s %q does not follow offset %d", path, api.HeaderNext, next, offset)
		}
		offset = n
		query.Set("offset", next)
	}
}

func isJSONObject(data []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(data, &obj) == nil && obj != nil
}
