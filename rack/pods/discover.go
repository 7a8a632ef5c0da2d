package pods

import (
	"fmt"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

// Facts is what a pod has, as its libvirt daemon reports it.
type Facts struct {
	Arch         string // the host CPU's architecture as libvirt names it: x86_64, aarch64, ppc64le
	Cores        int    // logical CPUs
	MemoryBytes  uint64
	StoragePools []StoragePool
	Networks     []Network
}

// StoragePool is one libvirt storage pool with its usage at discovery time.
type StoragePool struct {
	Name            string
	Type            string // dir, logical, netfs, ...
	Path            string // the pool's target path
	Active          bool
	CapacityBytes   uint64
	AllocationBytes uint64
	AvailableBytes  uint64
}

// Network is one libvirt virtual network.
type Network struct {
	Name   string
	Bridge string
	Active bool
}

// Discover reads the pod's architecture, CPUs, memory, storage pools (refreshed first, so their
// usage is current) and networks.
// The caller gets all the facts or an error, never a part of them.
func (c *Conn) Discover() (Facts, error) { return bounded(c, c.discover) }

func (c *Conn) discover() (Facts, error) {
	caps, err := c.capabilities()
	if err != nil {
		return Facts{}, err
	}
	_, memKiB, cpus, _, _, _, _, _, err := c.lv.NodeGetInfo()
	if err != nil {
		return Facts{}, fmt.Errorf("read node info: %w", err)
	}
	f := Facts{Cores: int(cpus), MemoryBytes: memKiB * 1024}
	if caps.Host.CPU != nil {
		f.Arch = caps.Host.CPU.Arch
	}
	if f.StoragePools, err = c.storagePools(); err != nil {
		return Facts{}, err
	}
	if f.Networks, err = c.networks(); err != nil {
		return Facts{}, err
	}
	return f, nil
}

func (c *Conn) capabilities() (libvirtxml.Caps, error) {
	doc, err := c.lv.ConnectGetCapabilities()
	if err != nil {
		return libvirtxml.Caps{}, fmt.Errorf("read capabilities: %w", err)
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(doc); err != nil {
		return libvirtxml.Caps{}, fmt.Errorf("parse capabilities: %w", err)
	}
	return caps, nil
}

func (c *Conn) storagePools() ([]StoragePool, error) {
	pools, _, err := c.lv.ConnectListAllStoragePools(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list storage pools: %w", err)
	}
	out := make([]StoragePool, 0, len(pools))
	for _, p := range pools {
		sp, err := c.storagePool(p)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

func (c *Conn) storagePool(p libvirt.StoragePool) (StoragePool, error) {
	state, _, _, _, err := c.lv.StoragePoolGetInfo(p)
	if err != nil {
		return StoragePool{}, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	active := libvirt.StoragePoolState(state) == libvirt.StoragePoolRunning
	if active {
		// The pool's numbers are only as fresh as its last refresh: files written outside libvirt
		// (or volumes of another client) count only after one.
		if err := c.lv.StoragePoolRefresh(p, 0); err != nil {
			return StoragePool{}, fmt.Errorf("refresh storage pool %s: %w", p.Name, err)
		}
	}
	_, capacity, allocation, available, err := c.lv.StoragePoolGetInfo(p)
	if err != nil {
		return StoragePool{}, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	doc, err := c.lv.StoragePoolGetXMLDesc(p, 0)
	if err != nil {
		return StoragePool{}, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	var x libvirtxml.StoragePool
	if err := x.Unmarshal(doc); err != nil {
		return StoragePool{}, fmt.Errorf("parse storage pool %s: %w", p.Name, err)
	}
	sp := StoragePool{
		Name: p.Name, Type: x.Type, Active: active,
		CapacityBytes: capacity, AllocationBytes: allocation, AvailableBytes: available,
	}
	if x.Target != nil {
		sp.Path = x.Target.Path
	}
	return sp, nil
}

func (c *Conn) networks() ([]Network, error) {
	nets, _, err := c.lv.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := make([]Network, 0, len(nets))
	for _, n := range nets {
		active, err := c.lv.NetworkIsActive(n)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
		doc, err := c.lv.NetworkGetXMLDesc(n, 0)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
		var x libvirtxml.Network
		if err := x.Unmarshal(doc); err != nil {
			return nil, fmt.Errorf("parse network %s: %w", n.Name, err)
		}
		nw := Network{Name: n.Name, Active: active == 1}
		if x.Bridge != nil {
			nw.Bridge = x.Bridge.Name
		}
		out = append(out, nw)
	}
	return out, nil
}
