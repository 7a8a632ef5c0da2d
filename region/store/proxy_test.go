package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// TestProxySettingsReachTheRackConfig: the defaults until set; a change moves the static
// revision and every rack's config carries it; invalid settings are refused and change
// nothing.
func TestProxySettingsReachTheRackConfig(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rack, subnet := servedSubnet(t, s, "10.9.0.0/24")
	cfg, before, err := s.RackConfig(ctx, rack.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Proxy.Disabled || cfg.Proxy.Parent != "" || len(cfg.Proxy.ConnectPorts) != 0 || cfg.Proxy.CacheBytes != 0 {
		t.Fatalf("default proxy settings: %+v", cfg.Proxy)
	}
	want := api.RackProxy{Parent: "http://squid.site.example:3128", ConnectPorts: []int{443, 8443}, CacheBytes: 1 << 30}
	if _, err := s.SetProxySettings(ctx, want); err != nil {
		t.Fatal(err)
	}
	cfg, after, err := s.RackConfig(ctx, rack.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Proxy.Parent != want.Parent || !slices.Equal(cfg.Proxy.ConnectPorts, want.ConnectPorts) || cfg.Proxy.CacheBytes != want.CacheBytes {
		t.Errorf("the rack's config carries %+v, want %+v", cfg.Proxy, want)
	}
	if after.Static <= before.Static {
		t.Errorf("the static revision stayed at %d", after.Static)
	}
	for _, bad := range []api.RackProxy{
		{Parent: "https://squid:3128"},
		{Parent: "http://squid:3128/path"},
		{Parent: "squid:3128"},
		{ConnectPorts: []int{0}},
		{ConnectPorts: []int{443, 443}},
		{ConnectPorts: []int{70000}},
		{CacheBytes: -2},
	} {
		if _, err := s.SetProxySettings(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	if got, err := s.ProxySettings(ctx); err != nil || got.Parent != want.Parent {
		t.Errorf("after refused settings: %+v %v", got, err)
	}

	// A subnet's own parent: checked like the region's, carried with the subnet.
	bad := *subnet
	bad.ProxyParent = "ftp://squid:3128"
	if err := s.Replace(ctx, alice, api.KindSubnets, subnet.Uuid, &bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a subnet's parent %q: %v, want ErrInvalid", bad.ProxyParent, err)
	}
	subnet.ProxyParent = "http://squid.rack-row-3.example:3128"
	if err := s.Replace(ctx, alice, api.KindSubnets, subnet.Uuid, subnet); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err = s.RackConfig(ctx, rack.Uuid); err != nil || len(cfg.Subnets) != 1 || cfg.Subnets[0].ProxyParent != subnet.ProxyParent {
		t.Errorf("the rack's config of a subnet with its own parent: %+v %v", cfg.Subnets, err)
	}
}
