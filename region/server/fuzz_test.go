package server

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ironflow/ironflow/region/api"
)

// FuzzDecodeObject feeds request bodies to the strict decoder: it never panics, refuses with
// 400 only, and what it accepts holds no NUL and no invalid UTF-8 in any string.
func FuzzDecodeObject(f *testing.F) {
	for _, seed := range []string{`{"Name":"m1"}`, `{"Name":"a\u0000"}`, "{\"Description\":\"\xff\"}", `{"Meta":{"k\u0000":"v"}}`,
		`{"Params":{"x/y":[1,{"z":"\u0000"}]}}`, `[]`, `{"Name":1}`, `{"Bogus":1}`, `{} {}`, `{"Name":"\ud800"}`, `"\u0000"`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{new(api.Machine), new(api.Lease), new(any)} {
			err := decodeStrict(body, v)
			if err != nil {
				var he *httpError
				if !errors.As(err, &he) || he.code != http.StatusBadRequest {
					t.Fatalf("%q: error %v is not a 400", body, err)
				}
				continue
			}
			if bad := badString(reflect.ValueOf(v)); bad != "" {
				t.Fatalf("%q: accepted a string with NUL or invalid UTF-8: %q", body, bad)
			}
		}
	})
}

// badString returns the first string in v with NUL or invalid UTF-8 (map keys included).
func badString(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return s
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return badString(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if s := badString(v.Field(i)); s != "" {
				return s
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if s := badString(v.Index(i)); s != "" {
				return s
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if s := badString(it.Key()); s != "" {
				return s
			}
			if s := badString(it.Value()); s != "" {
				return s
			}
		}
	}
	return ""
}

// FuzzListQuery feeds raw query strings to the request text check and the list options: no
// panic, refusals are 400 or 403, and accepted pages are within bounds.
func FuzzListQuery(f *testing.F) {
	for _, seed := range []string{"", "limit=5&offset=10", "limit=0", "limit=999999", "offset=-1", "Name=a%00", "Name=%ff", "a=1&a=2",
		"Secret=x", "%zz", "Name=birdy&HardwareAddrs=52:54:00:12:34:56"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/api/v1/machines", RawQuery: rawQuery}}
		for _, check := range []func() error{
			func() error { return checkRequestText(r) },
			func() error { return refuseSecretLookups(r, api.RoleReadonly) },
			func() error {
				opts, err := listOptions(r)
				if err == nil && (opts.Limit < 1 || opts.Limit > api.MaxPageSize || opts.Offset < 0) {
					t.Fatalf("%q: page %+v out of bounds", rawQuery, opts)
				}
				return err
			},
		} {
			if err := check(); err != nil {
				var he *httpError
				if !errors.As(err, &he) || (he.code != http.StatusBadRequest && he.code != http.StatusForbidden) {
					t.Fatalf("%q: error %v is not a 400 or 403", rawQuery, err)
				}
			}
		}
	})
}
