package store

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

var rackStatuses = []string{"", api.RackOnline, api.RackDegraded, api.RackOffline, api.RackPaused}

var racks = newKind(kind[api.Rack]{
	name: api.KindRacks, noun: "rack", table: "racks",
	self:    func(r *api.Rack) *string { return &r.Uuid },
	genUUID: true, bare: "uuid",
	keys:    map[string]string{"Uuid": "uuid = $1::uuid", "Name": "name = $1"},
	norm:    map[string]func(string) (string, error){"Uuid": normUUID},
	order:   "name, seq",
	columns: func(r *api.Rack) []column { return []column{{"uuid", r.Uuid}, {"name", r.Name}} },
	prepare: func(r, _ *api.Rack) {
		emptyMeta(&r.Meta)
		if r.RegionEndpoints == nil {
			r.RegionEndpoints = []string{}
		}
		if r.Interfaces == nil {
			r.Interfaces = []string{}
		}
	},
	validate: func(r *api.Rack) error {
		if err := validName("rack", r.Name, false); err != nil {
			return err
		}
		noun := "rack " + r.Name
		if !slices.Contains(rackStatuses, r.Status) {
			return invalidf("%s Status %q is not one of %v", noun, r.Status, rackStatuses[1:])
		}
		for _, u := range r.RegionEndpoints {
			if err := validURL(noun, "RegionEndpoints", u); err != nil {
				return err
			}
		}
		if err := uniqueStrings(noun, "RegionEndpoints", r.RegionEndpoints); err != nil {
			return err
		}
		return uniqueStrings(noun, "Interfaces", r.Interfaces)
	},
	beforeDelete: releaseRack,
})

// releaseRack detaches a rack that is being deleted. A VLAN it serves as primary moves DHCP
// to its secondary rack; a VLAN with no secondary, and a pod the rack hosts, block the
// deletion unless force is set, in which case the VLAN loses the rack (DHCP off) and the pod
// is removed. Secondary duties are simply dropped. The rack's tokens are revoked.
func releaseRack(ctx context.Context, tx pgx.Tx, by Principal, rack *api.Rack, force bool) error {
	served := &where{}
	served.add("(primary_rack = $1 OR secondary_rack = $1)", rack.Uuid)
	vlanRows, err := vlans.selectRows(ctx, tx, served, " FOR UPDATE")
	if err != nil {
		return err
	}
	hosted := &where{}
	hosted.add("rack = $1", rack.Uuid)
	podRows, err := pods.selectRows(ctx, tx, hosted, " FOR UPDATE")
	if err != nil {
		return err
	}
	var blocking []string
	for _, v := range vlanRows {
		if v.obj.PrimaryRack == rack.Uuid && v.obj.SecondaryRack == "" {
			blocking = append(blocking, "vlan "+vlanLabel(v.obj)+" (primary DHCP, no secondary)")
		}
	}
	for _, p := range podRows {
		blocking = append(blocking, "pod "+p.obj.Name)
	}
	if len(blocking) > 0 && !force {
		return &DependencyError{Kind: "rack", Key: rack.Name, Dependents: blocking}
	}
	for _, v := range vlanRows {
		next := *v.obj
		switch {
		case next.PrimaryRack == rack.Uuid && next.SecondaryRack != "":
			next.PrimaryRack, next.SecondaryRack = next.SecondaryRack, ""
		case next.PrimaryRack == rack.Uuid:
			next.PrimaryRack, next.DHCPOn = "", false
		default:
			next.SecondaryRack = ""
		}
		if _, err := vlans.write(ctx, tx, by, v.seq, v, &next); err != nil {
			return err
		}
	}
	for _, p := range podRows {
		if err := pods.deleteRow(ctx, tx, by, p, map[string]any{"Reason": "rack " + rack.Name + " deleted with force"}); err != nil {
			return err
		}
	}
	return revokeRack(ctx, tx, rack.Uuid)
}
