package client

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestEveryKindHasAnAccessor: every kind of region/api.Kinds has a typed accessor on Client
// (Machines(), Jobs(), ...) for its path and its type, and no accessor names another kind.
func TestEveryKindHasAnAccessor(t *testing.T) {
	c := reflect.ValueOf(New("http://127.0.0.1:1", ""))
	accessors := map[string]reflect.Type{} // kind -> T of Resource[T]
	for i := range c.NumMethod() {
		m := c.Type().Method(i)
		if m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || !strings.HasPrefix(m.Type.Out(0).Name(), "Resource[") {
			continue
		}
		r := c.Method(i).Call(nil)[0]
		elem := r.MethodByName("List").Type().Out(0).Elem()
		accessors[r.FieldByName("kind").String()] = elem
	}
	for _, k := range api.Kinds {
		if got, ok := accessors[k.Name]; !ok || got != k.Type {
			t.Errorf("kind %s: no accessor of Resource[%s] (found %v)", k.Name, k.Type, got)
		}
		delete(accessors, k.Name)
	}
	for name := range accessors {
		t.Errorf("accessor of kind %q, which region/api.Kinds does not list", name)
	}
}
