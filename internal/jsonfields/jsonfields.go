// Package jsonfields lists the fields of a struct as encoding/json sees them, so that error
// messages and help texts can name them without a hand-kept list.
package jsonfields

import (
	"reflect"
	"strings"
)

// Field is an exported field of a struct under its JSON key.
type Field struct {
	Name string // the key in JSON
	Type reflect.Type
}

// Of returns the fields encoding/json decodes into the struct type st, in declaration order.
func Of(st reflect.Type) []Field {
	var out []Field
	for f := range st.Fields() {
		if name, ok := jsonName(f); ok {
			out = append(out, Field{name, f.Type})
		}
	}
	return out
}

// Names are the JSON keys of fields.
func Names(fields []Field) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}

// Lookup finds the field key decodes into, matching as encoding/json does: the exact name
// first, else one equal but for case.
func Lookup(fields []Field, key string) (Field, bool) {
	for _, f := range fields {
		if f.Name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.Name, key) {
			return f, true
		}
	}
	return Field{}, false
}

// jsonName is the key of f in JSON, and false for fields encoding/json skips.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name, true
	}
	return f.Name, true
}
