package store

import (
	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/region/api"
)

var pods = newKind(kind[api.Pod]{
	name: api.KindPods, noun: "pod", table: "pods",
	self:    func(p *api.Pod) *string { return &p.Uuid },
	genUUID: true, bare: "uuid",
	keys: map[string]string{
		"Uuid": "uuid = $1::uuid",
		"Name": "name = $1",
		"Rack": "rack = $1::uuid",
	},
	norm:  map[string]func(string) (string, error){"Uuid": normUUID, "Rack": normUUID},
	order: "name, seq",
	columns: func(p *api.Pod) []column {
		return []column{{"uuid", p.Uuid}, {"name", p.Name}, {"rack", nullable(p.Rack)}, {"pool", nullable(p.Pool)}}
	},
	prepare: func(p, _ *api.Pod) {
		emptyMeta(&p.Meta)
		if p.VMs == nil {
			p.VMs = []string{}
		}
	},
	validate: func(p *api.Pod) error {
		if err := validName("pod", p.Name, false); err != nil {
			return err
		}
		if err := canonUUID("pod "+p.Name, "Rack", &p.Rack, true); err != nil {
			return err
		}
		if p.HostKey != "" {
			if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(p.HostKey)); err != nil {
				return invalidf("pod %s HostKey: want an SSH public key as in authorized_keys (\"ssh-ed25519 AAAA...\"): %v", p.Name, err)
			}
		}
		if p.Cores < 0 || p.MemoryMiB < 0 || p.StorageGiB < 0 {
			return invalidf("pod %s capacity (Cores, MemoryMiB, StorageGiB) may not be negative", p.Name)
		}
		if err := uniqueNamed("pod "+p.Name, "StoragePools", p.StoragePools, func(sp api.PodStoragePool) string { return sp.Name }); err != nil {
			return err
		}
		if err := uniqueNamed("pod "+p.Name, "Networks", p.Networks, func(n api.PodNetwork) string { return n.Name }); err != nil {
			return err
		}
		for i := range p.VMs {
			if err := canonUUID("pod "+p.Name, "VMs", &p.VMs[i], false); err != nil {
				return err
			}
		}
		return uniqueStrings("pod "+p.Name, "VMs", p.VMs)
	},
})
