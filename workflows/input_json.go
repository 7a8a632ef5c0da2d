package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/ironflow/ironflow/internal/jsonfields"
	"github.com/ironflow/ironflow/internal/suggest"
)

// Workflow inputs are typed by hand (temporal workflow start --input, schedules), so they are
// decoded strictly: a misspelt field is an error naming it rather than a zero value that
// fails later for another reason, and durations may be written as Go durations ("10m") as
// well as integer nanoseconds. Inputs are still encoded as before (durations as integers),
// so recorded histories replay unchanged. A decode error fails the workflow at its start:
// the SDK ends a run whose input does not decode with that error, and does not retry it.

// UnmarshalJSON decodes a MigrateMachineInput strictly (see decodeInput).
func (in *MigrateMachineInput) UnmarshalJSON(data []byte) error {
	type plain MigrateMachineInput
	return decodeInput("MigrateMachineInput", data, (*plain)(in))
}

// UnmarshalJSON decodes a BulkMigrateInput strictly (see decodeInput).
func (in *BulkMigrateInput) UnmarshalJSON(data []byte) error {
	type plain BulkMigrateInput
	return decodeInput("BulkMigrateInput", data, (*plain)(in))
}

// UnmarshalJSON decodes a TransferRackInput strictly (see decodeInput).
func (in *TransferRackInput) UnmarshalJSON(data []byte) error {
	type plain TransferRackInput
	return decodeInput("TransferRackInput", data, (*plain)(in))
}

var durationType = reflect.TypeFor[time.Duration]()

// decodeInput decodes the JSON object data into out, a pointer to a struct without an
// UnmarshalJSON method of its own. A key that names no field is an error listing the fields
// (derived from the struct, so new fields need no change here); a time.Duration field may be
// a JSON number of nanoseconds or a Go duration string.
func decodeInput(typeName string, data []byte, out any) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("%s: want a JSON object: %w", typeName, err)
	}
	known := jsonfields.Of(reflect.TypeOf(out).Elem())
	names := jsonfields.Names(known)
	for key, raw := range fields {
		f, ok := jsonfields.Lookup(known, key)
		if !ok {
			return fmt.Errorf("%s has no field %q%s; its fields are %s",
				typeName, key, suggest.Hint(key, names), strings.Join(names, ", "))
		}
		if f.Type != durationType || len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return fmt.Errorf("%s.%s: %w", typeName, f.Name, err)
		}
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("%s.%s: %q is not a duration (e.g. \"10m\", \"1h30m\", or integer nanoseconds)", typeName, f.Name, text)
		}
		fields[key] = json.RawMessage(fmt.Sprint(int64(d)))
	}
	normalized, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("%s: %w", typeName, err)
	}
	dec := json.NewDecoder(bytes.NewReader(normalized))
	dec.DisallowUnknownFields() // nested objects (Selector) are strict too
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: %w", typeName, err)
	}
	return nil
}
