package pods

import (
	"fmt"

	"github.com/digitalocean/go-libvirt"
)

// PowerAction is what `machines power` asks of a pod VM.
type PowerAction string

// The power actions. Off is a hard stop (a pulled plug, as for a bare-metal BMC); a VM being
// decomposed or re-commissioned must not wait for its guest to agree.
const (
	PowerOn    PowerAction = "on"
	PowerOff   PowerAction = "off"
	PowerCycle PowerAction = "cycle"
)

// ParsePowerAction checks an action named by a user.
func ParsePowerAction(s string) (PowerAction, error) {
	switch a := PowerAction(s); a {
	case PowerOn, PowerOff, PowerCycle:
		return a, nil
	}
	return "", fmt.Errorf("power action %q: want on, off or cycle", s)
}

// Power applies a to the VM (its domain name or UUID). It is idempotent: on for a running VM and
// off for a stopped one change nothing, so a retried call finishes; cycle starts a stopped VM.
func (c *Conn) Power(vm string, a PowerAction) error {
	dom, err := c.lookupDomain(vm)
	if err != nil {
		if isNotFound(err, libvirt.ErrNoDomain) {
			return fmt.Errorf("power %s %s: %w", a, vm, ErrNoVM)
		}
		return fmt.Errorf("power %s %s: %w", a, vm, err)
	}
	on, err := c.running(dom)
	if err != nil {
		return fmt.Errorf("power %s %s: %w", a, vm, err)
	}
	if on && (a == PowerOff || a == PowerCycle) {
		if err := c.lv.DomainDestroy(dom); err != nil {
			return fmt.Errorf("power %s %s: stop: %w", a, vm, err)
		}
		on = false
	}
	if !on && (a == PowerOn || a == PowerCycle) {
		if err := c.lv.DomainCreate(dom); err != nil {
			return fmt.Errorf("power %s %s: start: %w", a, vm, err)
		}
	}
	return nil
}

// PowerState says whether the VM runs ("on") or not ("off"); a paused or crashed VM is "on"
// to libvirt until it is destroyed, and is reported as such.
func (c *Conn) PowerState(vm string) (PowerAction, error) {
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
		return PowerOn, nil
	}
	return PowerOff, nil
}

func (c *Conn) running(dom libvirt.Domain) (bool, error) {
	state, _, err := c.lv.DomainGetState(dom, 0)
	if err != nil {
		return false, fmt.Errorf("domain state: %w", err)
	}
	return libvirt.DomainState(state) != libvirt.DomainShutoff, nil
}
