package power

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
)

// Virsh powers a VM of a KVM pod through the pod's libvirt connection (rack/pods). Its domain
// boots from the network first already, so SetPXEBoot has nothing to do.
type Virsh struct {
	Conn *pods.Conn
	VM   string // the domain's UUID, its machine's
}

func (v Virsh) power(a api.PowerAction) error {
	err := v.Conn.Power(v.VM, a)
	if errors.Is(err, pods.ErrRefused) || errors.Is(err, pods.ErrNoVM) {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

func (v Virsh) On(context.Context) error    { return v.power(api.PowerOn) }
func (v Virsh) Off(context.Context) error   { return v.power(api.PowerOff) }
func (v Virsh) Cycle(context.Context) error { return v.power(api.PowerCycle) }

func (v Virsh) Status(context.Context) (api.PowerStatus, error) {
	s, err := v.Conn.PowerState(v.VM)
	if err != nil {
		return api.PowerStateError, err
	}
	return api.PowerStatus(s), nil
}

func (Virsh) SetPXEBoot(context.Context) error { return nil }

func (v Virsh) Close() error { return v.Conn.Close() }
