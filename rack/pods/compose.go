package pods

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"

	"github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
	"libvirt.org/go/libvirtxml"

	"github.com/ironflow/ironflow/region/api"
)

// names libvirt objects may have here: they end up in file names and XML.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validate checks vm before a compose asks libvirt for anything.
func validate(vm api.PodVM) error {
	if !validName.MatchString(vm.Name) {
		return fmt.Errorf("VM name %q: want letters, digits, '.', '_' or '-', at most 63", vm.Name)
	}
	if vm.Cores < 1 {
		return fmt.Errorf("VM %s: cores %d: want at least 1", vm.Name, vm.Cores)
	}
	if vm.MemoryBytes < 1<<20 {
		return fmt.Errorf("VM %s: memory %d bytes: want at least 1 MiB", vm.Name, vm.MemoryBytes)
	}
	if len(vm.Disks) == 0 {
		return fmt.Errorf("VM %s: no disk", vm.Name)
	}
	for i, d := range vm.Disks {
		if d.Pool == "" || d.SizeBytes == 0 {
			return fmt.Errorf("VM %s: disk %d: want a storage pool and a size", vm.Name, i)
		}
	}
	if (vm.NIC.Bridge == "") == (vm.NIC.Network == "") {
		return fmt.Errorf("VM %s: NIC: want exactly one of a bridge or a network", vm.Name)
	}
	if vm.NIC.MAC != "" {
		if _, err := net.ParseMAC(vm.NIC.MAC); err != nil {
			return fmt.Errorf("VM %s: NIC MAC: %w", vm.Name, err)
		}
	}
	return nil
}

// Compose defines the VM's domain (not started), booting from the network first so it
// PXE-boots from the rack, then creates the volumes it names. It either succeeds or leaves
// nothing behind: when a step fails, what it created is removed again, on a new connection
// when libvirtd restarted under it; only a pod that cannot be reached again keeps it (the
// error names it).
func (c *Conn) Compose(vm api.PodVM) (api.ComposedVM, error) {
	return bounded(c, func() (api.ComposedVM, error) { return c.compose(vm) })
}

func (c *Conn) compose(vm api.PodVM) (api.ComposedVM, error) {
	if err := validate(vm); err != nil {
		return api.ComposedVM{}, refuse(err)
	}
	caps, err := c.capabilities()
	if err != nil {
		return api.ComposedVM{}, err
	}
	arch := vm.Arch
	if arch == "" && caps.Host.CPU != nil {
		arch = caps.Host.CPU.Arch
	}
	domainType, err := guestDomainType(caps, arch)
	if err != nil {
		return api.ComposedVM{}, refuse(fmt.Errorf("VM %s: %w", vm.Name, err))
	}
	if err := c.checkFits(vm); err != nil {
		return api.ComposedVM{}, refuse(fmt.Errorf("VM %s: %w", vm.Name, err))
	}
	if err := c.checkRoom(vm.Disks); err != nil {
		return api.ComposedVM{}, fmt.Errorf("VM %s: %w", vm.Name, err)
	}
	if err := c.checkNamesFree(vm); err != nil {
		return api.ComposedVM{}, fmt.Errorf("VM %s: %w", vm.Name, err)
	}

	out := api.ComposedVM{Name: vm.Name, UUID: vm.UUID}
	if out.UUID == "" {
		out.UUID = uuid.NewString()
	}
	for i, d := range vm.Disks {
		out.Volumes = append(out.Volumes, api.PodVolume{Pool: d.Pool, Name: volumeName(vm, i)})
	}
	// The domain first: it names its volumes before they exist, so a compose the rack did not
	// live to finish or undo is found by its UUID, whole (Existing), and removed with them.
	doc, err := domainXML(vm, out, arch, domainType)
	if err != nil {
		return api.ComposedVM{}, fmt.Errorf("VM %s: %w", vm.Name, err)
	}
	// made is what the compose created, or may have created: a call the connection broke under
	// may have been done.
	var made []api.PodVolume
	undo := func(cause error) (api.ComposedVM, error) {
		return api.ComposedVM{}, errors.Join(cause, c.undoCompose(out.UUID, made))
	}
	dom, err := c.lv.DomainDefineXMLFlags(doc, 0)
	if err != nil {
		err = fmt.Errorf("VM %s: define domain: %w", vm.Name, err)
		var lerr libvirt.Error
		if errors.As(err, &lerr) && (lerr.Code == uint32(libvirt.ErrDomExist) || lerr.Code == uint32(libvirt.ErrOperationFailed)) {
			return api.ComposedVM{}, refuse(err) // the name (or UUID) is another domain's: nothing was made
		}
		return undo(err)
	}
	for i, d := range vm.Disks {
		_, err := c.createVolume(d, out.Volumes[i].Name)
		if err == nil || c.watch.broken() {
			made = append(made, out.Volumes[i])
		}
		if err != nil {
			return undo(fmt.Errorf("VM %s: %w", vm.Name, err))
		}
	}
	if out.MAC, err = c.domainMAC(dom); err != nil {
		return undo(fmt.Errorf("VM %s: %w", vm.Name, err))
	}
	return out, nil
}

// undoCompose removes what a failed compose made: the domain of its UUID, if it was defined,
// and the volumes. When the connection broke (libvirtd restarted, or stopped answering), it
// does so on a new one.
func (c *Conn) undoCompose(id string, made []api.PodVolume) error {
	if !c.watch.broken() {
		return c.removeComposed(id, made)
	}
	fresh, err := c.redial()
	if err != nil {
		return fmt.Errorf("undo: %w; left on the pod maybe: domain %s, volumes %v", err, id, made)
	}
	defer fresh.Close()
	return fresh.do(func() error { return fresh.removeComposed(id, made) })
}

func (c *Conn) removeComposed(id string, made []api.PodVolume) error {
	var errs []error
	dom, err := c.lookupDomain(id)
	switch {
	case err == nil:
		errs = append(errs, c.undefine(dom))
	case !isNotFound(err, libvirt.ErrNoDomain):
		errs = append(errs, fmt.Errorf("domain %s: %w", id, err))
	}
	for _, v := range made {
		errs = append(errs, c.deleteVolume(v.Pool, v.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	return nil
}

// guestDomainType picks the fastest way the pod runs arch: kvm when it has it, else qemu (TCG).
func guestDomainType(caps libvirtxml.Caps, arch string) (string, error) {
	var archs []string
	for _, g := range caps.Guests {
		if g.OSType != "hvm" {
			continue
		}
		archs = append(archs, g.Arch.Name)
		if g.Arch.Name != arch {
			continue
		}
		types := make([]string, 0, len(g.Arch.Domains))
		for _, d := range g.Arch.Domains {
			types = append(types, d.Type)
		}
		if slices.Contains(types, "kvm") {
			return "kvm", nil
		}
		if slices.Contains(types, "qemu") {
			return "qemu", nil
		}
	}
	return "", fmt.Errorf("the pod cannot run architecture %q (it runs %v)", arch, archs)
}

// checkFits refuses a VM with more CPUs or memory than the whole host has: libvirt defines
// it all the same, and it could never start (or only by swapping the host to a halt). Pods
// are overcommitted VM by VM, as on any KVM host; only one VM larger than the host is refused.
func (c *Conn) checkFits(vm api.PodVM) error {
	_, memKiB, cpus, _, _, _, _, _, err := c.lv.NodeGetInfo()
	if err != nil {
		return fmt.Errorf("read node info: %w", err)
	}
	if vm.Cores > int(cpus) {
		return fmt.Errorf("%d cores asked, the pod has %d", vm.Cores, cpus)
	}
	if vm.MemoryBytes > memKiB*1024 {
		return fmt.Errorf("%d MiB of memory asked, the pod has %d MiB", vm.MemoryBytes>>20, memKiB>>10)
	}
	return nil
}

// checkRoom refuses disks their pools have no room for, before anything is created.
func (c *Conn) checkRoom(disks []api.PodDisk) error {
	want := map[string]uint64{}
	for _, d := range disks {
		want[d.Pool] += d.SizeBytes
	}
	for name, size := range want {
		p, err := c.lv.StoragePoolLookupByName(name)
		if isNotFound(err, libvirt.ErrNoStoragePool) {
			return refuse(fmt.Errorf("storage pool %s: %w", name, err))
		}
		if err != nil {
			return fmt.Errorf("storage pool %s: %w", name, err)
		}
		sp, err := c.storagePool(p)
		if err != nil {
			return err
		}
		if !sp.Active {
			return refuse(fmt.Errorf("storage pool %s is not active", name))
		}
		if size > sp.AvailableBytes {
			return refuse(fmt.Errorf("storage pool %s has %d bytes available, the disks want %d", name, sp.AvailableBytes, size))
		}
	}
	return nil
}

// volumeName names the volume of the VM's disk i.
func volumeName(vm api.PodVM, i int) string { return fmt.Sprintf("%s-disk%d", vm.Name, i) }

// checkNamesFree refuses a VM whose domain or volume names the pod has already (defined outside
// Ironflow, or another VM's), before anything is created: libvirt refuses a taken name only
// when the object is created, half-way through a compose. The pools were refreshed by
// checkRoom, so a volume file written outside libvirt counts.
func (c *Conn) checkNamesFree(vm api.PodVM) error {
	_, err := c.lv.DomainLookupByName(vm.Name)
	if err == nil {
		return fmt.Errorf("the pod has a domain named %s already", vm.Name)
	}
	if !isNotFound(err, libvirt.ErrNoDomain) {
		return fmt.Errorf("look up domain %s: %w", vm.Name, err)
	}
	for i, d := range vm.Disks {
		name := volumeName(vm, i)
		p, err := c.lv.StoragePoolLookupByName(d.Pool)
		if err != nil {
			return fmt.Errorf("storage pool %s: %w", d.Pool, err)
		}
		_, err = c.lv.StorageVolLookupByName(p, name)
		if err == nil {
			return fmt.Errorf("storage pool %s has a volume named %s already", d.Pool, name)
		}
		if !isNotFound(err, libvirt.ErrNoStorageVol) {
			return fmt.Errorf("look up volume %s/%s: %w", d.Pool, name, err)
		}
	}
	return nil
}

func (c *Conn) createVolume(d api.PodDisk, name string) (libvirt.StorageVol, error) {
	p, err := c.lv.StoragePoolLookupByName(d.Pool)
	if err != nil {
		return libvirt.StorageVol{}, fmt.Errorf("storage pool %s: %w", d.Pool, err)
	}
	// Sparse (allocation 0): the pool's free space is checked above; a raw file costs what the
	// machine writes.
	x := libvirtxml.StorageVolume{
		Name:       name,
		Capacity:   &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: d.SizeBytes},
		Allocation: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 0},
		Target:     &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}},
	}
	doc, err := x.Marshal()
	if err != nil {
		return libvirt.StorageVol{}, fmt.Errorf("volume %s: %w", name, err)
	}
	vol, err := c.lv.StorageVolCreateXML(p, doc, 0)
	if err != nil {
		return libvirt.StorageVol{}, fmt.Errorf("create volume %s in pool %s: %w", name, d.Pool, err)
	}
	return vol, nil
}

func domainXML(vm api.PodVM, out api.ComposedVM, arch, domainType string) (string, error) {
	disks := make([]libvirtxml.DomainDisk, len(out.Volumes))
	for i, v := range out.Volumes {
		disks[i] = libvirtxml.DomainDisk{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source: &libvirtxml.DomainDiskSource{Volume: &libvirtxml.DomainDiskSourceVolume{Pool: v.Pool, Volume: v.Name}},
			Target: &libvirtxml.DomainDiskTarget{Dev: fmt.Sprintf("vd%c", 'a'+i), Bus: "virtio"},
		}
	}
	nic := libvirtxml.DomainInterface{Model: &libvirtxml.DomainInterfaceModel{Type: "virtio"}}
	if vm.NIC.Bridge != "" {
		nic.Source = &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: vm.NIC.Bridge}}
	} else {
		nic.Source = &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: vm.NIC.Network}}
	}
	if vm.NIC.MAC != "" {
		nic.MAC = &libvirtxml.DomainInterfaceMAC{Address: vm.NIC.MAC}
	}
	d := libvirtxml.Domain{
		Type:   domainType,
		Name:   vm.Name,
		UUID:   out.UUID, // fresh, so an existing domain of that name is a clash, never redefined
		Memory: &libvirtxml.DomainMemory{Value: uint(vm.MemoryBytes), Unit: "b"},
		VCPU:   &libvirtxml.DomainVCPU{Value: uint(vm.Cores)},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Arch: arch, Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "network"}, {Dev: "hd"}},
		},
		Devices: &libvirtxml.DomainDeviceList{Disks: disks, Interfaces: []libvirtxml.DomainInterface{nic}},
	}
	return d.Marshal()
}

// domainMAC reads back the MAC address of the domain's NIC (libvirt assigns one when none was asked for).
func (c *Conn) domainMAC(dom libvirt.Domain) (string, error) {
	x, err := c.domainXML(dom)
	if err != nil {
		return "", err
	}
	if x.Devices == nil || len(x.Devices.Interfaces) != 1 || x.Devices.Interfaces[0].MAC == nil {
		return "", fmt.Errorf("domain %s: no NIC MAC address", dom.Name)
	}
	return x.Devices.Interfaces[0].MAC.Address, nil
}

func (c *Conn) domainXML(dom libvirt.Domain) (libvirtxml.Domain, error) {
	doc, err := c.lv.DomainGetXMLDesc(dom, 0)
	if err != nil {
		return libvirtxml.Domain{}, fmt.Errorf("domain %s: %w", dom.Name, err)
	}
	var x libvirtxml.Domain
	if err := x.Unmarshal(doc); err != nil {
		return libvirtxml.Domain{}, fmt.Errorf("parse domain %s: %w", dom.Name, err)
	}
	return x, nil
}

// ErrIncompleteVM is returned with a VM whose domain names a volume its pool does not have: a
// compose that stopped half-way, or a disk deleted behind the pod's back.
var ErrIncompleteVM = errors.New("a volume of the VM is missing")

// Existing reads back the VM named name as Compose made it: its UUID, its NIC's MAC and its pool
// volumes. A compose retried after it succeeded finds its VM here instead of composing twice;
// one retried after the rack died half-way through finds it with ErrIncompleteVM.
func (c *Conn) Existing(name string) (api.ComposedVM, error) {
	var out api.ComposedVM // with ErrIncompleteVM too: it names the VM to remove
	err := c.do(func() (err error) {
		out, err = c.existing(name)
		return err
	})
	return out, err
}

func (c *Conn) existing(name string) (api.ComposedVM, error) {
	dom, err := c.lv.DomainLookupByName(name)
	if err != nil {
		if isNotFound(err, libvirt.ErrNoDomain) {
			return api.ComposedVM{}, fmt.Errorf("VM %s: %w", name, ErrNoVM)
		}
		return api.ComposedVM{}, fmt.Errorf("VM %s: %w", name, err)
	}
	x, err := c.domainXML(dom)
	if err != nil {
		return api.ComposedVM{}, err
	}
	out := api.ComposedVM{Name: name, UUID: x.UUID}
	if x.Devices != nil {
		for _, d := range x.Devices.Disks {
			if d.Source != nil && d.Source.Volume != nil {
				out.Volumes = append(out.Volumes, api.PodVolume{Pool: d.Source.Volume.Pool, Name: d.Source.Volume.Volume})
			}
		}
		if len(x.Devices.Interfaces) == 1 && x.Devices.Interfaces[0].MAC != nil {
			out.MAC = x.Devices.Interfaces[0].MAC.Address
		}
	}
	for _, v := range out.Volumes {
		p, err := c.lv.StoragePoolLookupByName(v.Pool)
		if err != nil {
			return out, fmt.Errorf("VM %s: storage pool %s: %w", name, v.Pool, err)
		}
		if _, err := c.lv.StorageVolLookupByName(p, v.Name); isNotFound(err, libvirt.ErrNoStorageVol) {
			return out, fmt.Errorf("VM %s: volume %s: %w", name, v, ErrIncompleteVM)
		} else if err != nil {
			return out, fmt.Errorf("VM %s: volume %s: %w", name, v, err)
		}
	}
	return out, nil
}
