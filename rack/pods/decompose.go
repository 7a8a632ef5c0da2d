package pods

import (
	"errors"
	"fmt"

	"github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
)

// ErrNoVM is returned for a VM the pod does not have.
var ErrNoVM = errors.New("no such VM on the pod")

// Decompose stops the VM (named by its domain name or UUID) if it runs, deletes the storage-pool volumes its disks use, then
// undefines it. The domain goes last so a decompose that fails half-way can be retried: the
// domain still names the volumes left. Disks that are not pool volumes are left alone.
func (c *Conn) Decompose(name string) error {
	return c.do(func() error { return c.decompose(name) })
}

func (c *Conn) decompose(name string) error {
	dom, err := c.lookupDomain(name)
	if err != nil {
		if isNotFound(err, libvirt.ErrNoDomain) {
			return fmt.Errorf("decompose %s: %w", name, ErrNoVM)
		}
		return fmt.Errorf("decompose %s: %w", name, err)
	}
	// Read the disks before the domain is gone: they are the only record of its volumes.
	x, err := c.domainXML(dom)
	if err != nil {
		return fmt.Errorf("decompose %s: %w", name, err)
	}
	on, err := c.running(dom)
	if err != nil {
		return fmt.Errorf("decompose %s: %w", name, err)
	}
	if on {
		if err := c.lv.DomainDestroy(dom); err != nil {
			return fmt.Errorf("decompose %s: stop: %w", name, err)
		}
	}
	var errs []error
	if x.Devices != nil {
		for _, d := range x.Devices.Disks {
			if d.Source == nil || d.Source.Volume == nil {
				continue
			}
			if err := c.deleteVolume(d.Source.Volume.Pool, d.Source.Volume.Volume); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("decompose %s: %w", name, err)
	}
	if err := c.undefine(dom); err != nil {
		return fmt.Errorf("decompose %s: %w", name, err)
	}
	return nil
}

// lookupDomain finds a domain by UUID, or else by name.
func (c *Conn) lookupDomain(key string) (libvirt.Domain, error) {
	if id, err := uuid.Parse(key); err == nil {
		return c.lv.DomainLookupByUUID(libvirt.UUID(id))
	}
	return c.lv.DomainLookupByName(key)
}

func (c *Conn) undefine(dom libvirt.Domain) error {
	flags := libvirt.DomainUndefineManagedSave | libvirt.DomainUndefineSnapshotsMetadata | libvirt.DomainUndefineNvram
	if err := c.lv.DomainUndefineFlags(dom, flags); err != nil {
		return fmt.Errorf("undefine domain %s: %w", dom.Name, err)
	}
	return nil
}

// deleteVolume deletes a pool's volume; one already gone is not an error, so a retried
// decompose finishes.
func (c *Conn) deleteVolume(pool, name string) error {
	p, err := c.lv.StoragePoolLookupByName(pool)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", pool, err)
	}
	vol, err := c.lv.StorageVolLookupByName(p, name)
	if err != nil {
		if isNotFound(err, libvirt.ErrNoStorageVol) {
			return nil
		}
		return fmt.Errorf("volume %s/%s: %w", pool, name, err)
	}
	if err := c.lv.StorageVolDelete(vol, 0); err != nil {
		return fmt.Errorf("delete volume %s/%s: %w", pool, name, err)
	}
	return nil
}
