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

// redactor is a redact function that applies blank to a *T or each element of a *[]T.
func redactor[T any](blank func(*T)) func(any) {
	return func(v any) {
		switch v := v.(type) {
		case *T:
			blank(v)
		case *[]T:
			for i := range *v {
				blank(&(*v)[i])
			}
		}
	}
}

// hideSecrets redacts obj for callers that may not read secrets.
func hideSecrets(c *call, k kind, obj any) {
	if k.redact != nil && !mayReadSecrets(c.by.Role) {
		k.redact(obj)
	}
}

// kinds are the kinds of region/api.Kinds as the routes serve them.
var kinds = serverKinds(api.Kinds)

// redactions blank the secret fields of the kinds that have them.
var redactions = map[string]func(any){
	// Machine.Secret is the agent's credential: only admins and operators see it.
	api.KindMachines: redactor(func(m *api.Machine) { m.Secret = "" }),
}

func serverKinds(list []api.Kind) []kind {
	out := make([]kind, len(list))
	for i, k := range list {
		sliceType := reflect.SliceOf(k.Type)
		out[i] = kind{
			name:   k.Name,
			newObj: func() any { return reflect.New(k.Type).Interface() },
			newList: func() any { // an empty list, not nil: it answers [] rather than null
				list := reflect.New(sliceType)
				list.Elem().Set(reflect.MakeSlice(sliceType, 0, 0))
				return list.Interface()
			},
			ownerField: k.Owner,
			redact:     redactions[k.Name],
		}
	}
	return out
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
