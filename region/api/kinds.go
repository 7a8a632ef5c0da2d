package api

import "reflect"

// Kind describes one object kind of the generic CRUD routes (/api/v1/{Name}). Kinds is the
// one list of them: the region server serves exactly these, and tests of the store, the
// client and the CLI fail naming a kind that one of them lacks (ARCHITECTURE.md "How to
// add a kind").
type Kind struct {
	Name string       // the path segment and CLI noun, e.g. "machines"
	Type reflect.Type // the type of its objects, e.g. Machine
	// Owner is the field holding the UUID of the machine an object belongs to ("" for
	// none): the machine role reads only the objects of its own machine.
	Owner string
}

func kindOf[T any](name, owner string) Kind {
	return Kind{Name: name, Type: reflect.TypeFor[T](), Owner: owner}
}

// Kinds lists every kind of the generic CRUD routes.
var Kinds = []Kind{
	kindOf[Machine](KindMachines, "Uuid"),
	kindOf[Job](KindJobs, "Machine"),
	kindOf[Profile](KindProfiles, ""),
	kindOf[Pool](KindPools, ""),
	kindOf[Pod](KindPods, ""),
	kindOf[Fabric](KindFabrics, ""),
	kindOf[VLAN](KindVLANs, ""),
	kindOf[Subnet](KindSubnets, ""),
	kindOf[Lease](KindLeases, ""),
	kindOf[Rack](KindRacks, ""),
	kindOf[User](KindUsers, ""),
	kindOf[Task](KindTasks, ""),
	kindOf[Domain](KindDomains, ""),
	kindOf[DNSRecord](KindDNSRecords, ""),
	kindOf[CommissioningScript](KindCommissioningScripts, ""),
}
