package server

import (
	"reflect"

	"github.com/ironflow/ironflow/region/api"
)

// kind is one object kind served by the generic CRUD routes.
type kind struct {
	name    string
	newObj  func() any // *api.T
	newList func() any // *[]api.T
	// ownerField is the field holding the UUID of the machine an object belongs to; only
	// kinds with one can be read by the machine role.
	ownerField string
	// redact blanks the secret fields of an object or a list of them (nil: none).
	redact func(any)
}

// redacting gives k a redact function that applies blank to a *T or each element of a *[]T.
func redacting[T any](k kind, blank func(*T)) kind {
	k.redact = func(v any) {
		switch v := v.(type) {
		case *T:
			blank(v)
		case *[]T:
			for i := range *v {
				blank(&(*v)[i])
			}
		}
	}
	return k
}

// hideSecrets redacts obj for callers that may not read secrets.
func hideSecrets(c *call, k kind, obj any) {
	if k.redact != nil && !mayReadSecrets(c.by.Role) {
		k.redact(obj)
	}
}

func kindOf[T any](name, ownerField string) kind {
	return kind{
		name:       name,
		newObj:     func() any { return new(T) },
		newList:    func() any { return &[]T{} },
		ownerField: ownerField,
	}
}

// kinds lists every kind of the generic CRUD routes with its api type.
var kinds = []kind{
	// Machine.Secret is the agent's credential: only admins and operators see it.
	redacting(kindOf[api.Machine](api.KindMachines, "Uuid"), func(m *api.Machine) { m.Secret = "" }),
	kindOf[api.Job](api.KindJobs, "Machine"),
	kindOf[api.Profile](api.KindProfiles, ""),
	kindOf[api.Pool](api.KindPools, ""),
	kindOf[api.Pod](api.KindPods, ""),
	kindOf[api.Fabric](api.KindFabrics, ""),
	kindOf[api.VLAN](api.KindVLANs, ""),
	kindOf[api.Subnet](api.KindSubnets, ""),
	kindOf[api.Lease](api.KindLeases, ""),
	kindOf[api.Rack](api.KindRacks, ""),
	kindOf[api.User](api.KindUsers, ""),
	kindOf[api.Task](api.KindTasks, ""),
	kindOf[api.CommissioningScript](api.KindCommissioningScripts, ""),
}

func kindNamed(name string) kind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	panic("server: unknown kind " + name)
}

// stringField returns the string field name of the struct obj points to, or "".
func stringField(obj any, name string) string {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}

// stableKey addresses a stored object in a way that survives a rename: its Uuid, else its
// Name (name-keyed kinds cannot be renamed), else the key it was found by.
func stableKey(obj any, key string) string {
	if id := stringField(obj, "Uuid"); id != "" {
		return id
	}
	if name := stringField(obj, "Name"); name != "" {
		return name
	}
	return key
}
