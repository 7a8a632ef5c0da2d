package server

import "github.com/ironflow/ironflow/region/api"

// access is what a role may do to a resource.
type access int

const (
	denied  access = iota
	granted        // on every object of the resource
	ownOnly        // only on the caller's own machine and that machine's jobs
)

// grant is a role's access to one resource, for reads (GET) and writes (POST, PUT, PATCH, DELETE).
type grant struct{ read, write access }

// Resources of the permission table besides the api.Kind* names. Tokens are minted under
// /users/{name}/token and so belong to api.KindUsers.
const (
	resEvents  = "events"
	resJobLogs = "joblogs"
	resOther   = "*" // every resource a role does not list
	// resRackAPI is a rack's config, heartbeat and lease sync; a rack token reaches only its
	// own rack (checked by the handlers). resRackSecret is the registration secret.
	resRackAPI    = "rackapi"
	resRackSecret = "racksecret"
	// resDNSQuery is the DNS-over-HTTP endpoint: a read of the region's zones (racks forward
	// their clients' queries there).
	resDNSQuery = "dnsquery"
)

// permissions is the one table of who may do what. A machine token's principal User is the
// UUID of its machine; that is what ownOnly compares against.
var permissions = map[string]map[string]grant{
	api.RoleAdmin: {
		resOther: {read: granted, write: granted},
	},
	api.RoleOperator: {
		resOther:      {read: granted, write: granted},
		api.KindUsers: {read: denied, write: denied},
		resRackSecret: {read: denied, write: denied},
		resImages:     {read: granted, write: denied},
		resImageData:  {read: denied, write: denied},
	},
	api.RoleReadonly: {
		resOther:           {read: granted, write: denied},
		api.KindUsers:      {read: denied, write: denied},
		resRackSecret:      {read: denied, write: denied},
		resSecrets:         {read: denied, write: denied},
		resPowerCredential: {read: denied, write: denied},
		resImageData:       {read: denied, write: denied},
	},
	// A rack writes only through the rack API, which confines it to its own rack; the generic
	// routes would let it rewrite any rack or lease.
	api.RoleRack: {
		resOther:        {read: granted, write: denied},
		api.KindUsers:   {read: denied, write: denied},
		resRackAPI:      {read: granted, write: granted},
		resEnlist:       {read: denied, write: granted},
		resRackSecret:   {read: denied, write: denied},
		resSecrets:      {read: denied, write: denied},
		resRackTransfer: {read: denied, write: denied},
		// Its own machines' BMC credentials only (region/store/power.go rackMachine).
		resPowerCredential: {read: granted, write: denied},
		// Any image, to serve its machines: images are the region's, not a machine's.
		resImageData: {read: granted, write: denied},
	},
	api.RoleMachine: {
		resOther:         {read: denied, write: denied},
		api.KindMachines: {read: ownOnly, write: denied},
		api.KindJobs:     {read: ownOnly, write: denied},
		resJobLogs:       {read: ownOnly, write: ownOnly},
	},
}

// authorize looks role up in the permission table.
func authorize(role, resource string, write bool) access {
	rules, ok := permissions[role]
	if !ok {
		return denied
	}
	g, ok := rules[resource]
	if !ok {
		g = rules[resOther]
	}
	if write {
		return g.write
	}
	return g.read
}

func forbidden(role, resource string, write bool) error {
	verb := "read"
	if write {
		verb = "write"
	}
	return errorf(403, "role %q may not %s %s", role, verb, resource)
}

func notOwner(machine string) error {
	return errorf(403, "role %q may only access its own machine %s and that machine's jobs", api.RoleMachine, machine)
}

// ownerOf returns the machine an object belongs to, read from the kind's owner field.
func ownerOf(k kind, obj any) string {
	if k.ownerField == "" {
		return ""
	}
	return stringField(obj, k.ownerField)
}

// checkOwner refuses obj unless it belongs to the calling machine (only when c.own).
func checkOwner(c *call, k kind, obj any) error {
	if !c.own {
		return nil
	}
	if owner := ownerOf(k, obj); owner == "" || owner != c.by.User {
		return notOwner(c.by.User)
	}
	return nil
}

// mayReadSecrets says whether role sees secret fields (a machine's agent credential).
func mayReadSecrets(role string) bool {
	return role == api.RoleAdmin || role == api.RoleOperator
}
