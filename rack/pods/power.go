package pods

import (
	"errors"
	"fmt"

	"github.com/digitalocean/go-libvirt"

	"github.com/ironflow/ironflow/region/api"
)

// Power applies a to the VM (its domain name or UUID). It is idempotent: on for a running VM and
// off for a stopped one change nothing, so a retried call finishes; cycle starts a stopped VM.
// On resumes a paused VM (QEMU pauses one whose sparse disk found its pool full), so that after
// on the VM runs.
func (c *Conn) Power(vm string, a api.PowerAction) error {
	return c.do(func() error { return c.power(vm, a) })
}

func (c *Conn) power(vm string, a api.PowerAction) error {
	dom, err := c.lookupDomain(vm)
	if err != nil {
		if isNotFound(err, libvirt.ErrNoDomain) {
			return fmt.Errorf("power %s %s: %w", a, vm, ErrNoVM)
		}
		return fmt.Errorf("power %s %s: %w", a, vm, err)
	}
	state, _, err := c.lv.DomainGetState(dom, 0)
	if err != nil {
		return fmt.Errorf("power %s %s: domain state: %w", a, vm, err)
	}
	if a == api.PowerOn && libvirt.DomainState(state) == libvirt.DomainPaused {
		if err := c.lv.DomainResume(dom); err != nil {
			return fmt.Errorf("power %s %s: resume: %w", a, vm, err)
		}
		return nil
	}
	on := libvirt.DomainState(state) != libvirt.DomainShutoff
	if on && (a == api.PowerOff || a == api.PowerCycle) {
		if err := c.lv.DomainDestroy(dom); err != nil {
			return fmt.Errorf("power %s %s: stop: %w", a, vm, err)
		}
		on = false
	}
	if !on && (a == api.PowerOn || a == api.PowerCycle) {
		if err := c.lv.DomainCreate(dom); err != nil {
			return fmt.Errorf("power %s %s: start: %w", a, vm, errors.Join(c.missingDisks(dom), err))
		}
	}
	return nil
}

// ErrMissingDisk is returned for a VM that does not start because a storage-pool volume its
// disks use is gone (deleted on the hypervisor behind the pod's back).
var ErrMissingDisk = errors.New("disk volume missing")

// missingDisks explains a failed start by the pool volumes of the domain's disks that are gone,
// or is nil: libvirt's own error names the volume but not its pool or the disk.
func (c *Conn) missingDisks(dom libvirt.Domain) error {
	x, err := c.domainXML(dom)
	if err != nil || x.Devices == nil {
		return nil // the start error stands on its own
	}
	var errs []error
	for _, d := range x.Devices.Disks {
		if d.Source == nil || d.Source.Volume == nil {
			continue
		}
		v := d.Source.Volume
		p, err := c.lv.StoragePoolLookupByName(v.Pool)
		if err == nil {
			if err = c.lv.StoragePoolRefresh(p, 0); err == nil {
				_, err = c.lv.StorageVolLookupByName(p, v.Volume)
			}
		}
		if isNotFound(err, libvirt.ErrNoStoragePool) || isNotFound(err, libvirt.ErrNoStorageVol) {
			dev := ""
			if d.Target != nil {
				dev = d.Target.Dev
			}
			errs = append(errs, fmt.Errorf("%w: disk %s: volume %s/%s is gone from the pod", ErrMissingDisk, dev, v.Pool, v.Volume))
		}
	}
	return errors.Join(errs...)
}

// PowerState says whether the VM runs ("on") or not ("off"); a paused or crashed VM is "on"
// to libvirt until it is destroyed, and is reported as such.
func (c *Conn) PowerState(vm string) (api.PowerAction, error) {
	return bounded(c, func() (api.PowerAction, error) { return c.powerState(vm) })
}

func (c *Conn) powerState(vm string) (api.PowerAction, error) {
	dom, err := c.lookupDomain(vm)
	if err != nil {
		if isNotFound(err, libvirt.ErrNoDomain) {
			return "", fmt.Errorf("power state of %s: %w", vm, ErrNoVM)
		}
		return "", fmt.Errorf("power state of %s: %w", vm, err)
	}
	on, err := c.running(dom)
	if err != nil {
		return "", fmt.Errorf("power state of %s: %w", vm, err)
	}
	if on {
		return api.PowerOn, nil
	}
	return api.PowerOff, nil
}

func (c *Conn) running(dom libvirt.Domain) (bool, error) {
	state, _, err := c.lv.DomainGetState(dom, 0)
	if err != nil {
		return false, fmt.Errorf("domain state: %w", err)
	}
	return libvirt.DomainState(state) != libvirt.DomainShutoff, nil
}
