package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
)

// Query parameters of list calls that are not filters.
const (
	paramOffset = "offset"
	paramLimit  = "limit"
)

// paramMigration names the migration a DELETE is made for (store.ForMigration).
const paramMigration = "migration"

func (s *Server) list(k kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		opts, err := listOptions(r)
		if err != nil {
			return err
		}
		if c.own && opts.Filters[k.ownerField] != c.by.User {
			return errorf(http.StatusForbidden, "role %q must filter %s by %s=%s", c.by.Role, k.name, k.ownerField, c.by.User)
		}
		out := k.newList()
		if err := s.st.List(r.Context(), k.name, opts.probe(), out); err != nil {
			return err
		}
		opts.page(w, out)
		hideSecrets(c, k, out)
		writeList(w, out)
		return nil
	}
}

func (s *Server) create(k kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		obj := k.newObj()
		if err := decodeBody(w, r, obj); err != nil {
			return err
		}
		if err := s.st.Create(r.Context(), c.by, k.name, obj); err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, obj)
		return nil
	}
}

func (s *Server) show(k kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		obj := k.newObj()
		if err := s.st.Get(r.Context(), k.name, r.PathValue("key"), obj); err != nil {
			return err
		}
		if err := checkOwner(c, k, obj); err != nil {
			return err
		}
		hideSecrets(c, k, obj)
		writeJSON(w, http.StatusOK, obj)
		return nil
	}
}

func (s *Server) replace(k kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		obj := k.newObj()
		if err := decodeBody(w, r, obj); err != nil {
			return err
		}
		cur := k.newObj()
		if err := s.st.Get(r.Context(), k.name, r.PathValue("key"), cur); err != nil {
			return err
		}
		return s.replaceAndShow(w, r, c, k, cur, obj)
	}
}

// patch applies an RFC 7386 merge patch: Get, merge, Replace. Like every PUT it is last
// writer wins: the store has no object versions to detect a concurrent change.
func (s *Server) patch(k kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		var p any
		if err := decodeBody(w, r, &p); err != nil {
			return err
		}
		if _, ok := p.(map[string]any); !ok {
			return errorf(http.StatusBadRequest, "a merge patch must be a JSON object")
		}
		cur := k.newObj()
		if err := s.st.Get(r.Context(), k.name, r.PathValue("key"), cur); err != nil {
			return err
		}
		merged, err := applyMergePatch(cur, p)
		if err != nil {
			return err
		}
		obj := k.newObj()
		if err := decodeStrict(merged, obj); err != nil {
			return err
		}
		return s.replaceAndShow(w, r, c, k, cur, obj)
	}
}

// replaceAndShow stores obj in place of cur, found at the request's key, and answers with
// the object as stored.
func (s *Server) replaceAndShow(w http.ResponseWriter, r *http.Request, c *call, k kind, cur, obj any) error {
	ctx, key := r.Context(), r.PathValue("key")
	if err := s.st.Replace(ctx, c.by, k.name, key, obj); err != nil {
		return err
	}
	stored := k.newObj()
	if err := s.st.Get(ctx, k.name, stableKey(cur, key), stored); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, stored)
	return nil
}

func (s *Server) remove(k kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		force, err := boolParam(r, "force")
		if err != nil {
			return err
		}
		// A migration names itself to delete what it holds (store.ForMigration), and its
		// attempt (store.ForAttempt).
		ctx, err := stepContext(r)
		if err != nil {
			return err
		}
		if err := s.st.Delete(ctx, c.by, k.name, r.PathValue("key"), force); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// listOptions reads offset and limit (DefaultPageSize when absent, at most MaxPageSize);
// every other query parameter is an exact-match filter.
func listOptions(r *http.Request) (pageOptions, error) {
	opts := pageOptions{Filters: map[string]string{}, Limit: api.DefaultPageSize}
	for name, values := range r.URL.Query() {
		if len(values) != 1 {
			return opts, errorf(http.StatusBadRequest, "query parameter %s is given %d times, expected once", name, len(values))
		}
		switch name {
		case paramOffset, paramLimit:
			n, err := strconv.Atoi(values[0])
			if err != nil || n < 0 {
				return opts, errorf(http.StatusBadRequest, "query parameter %s=%q is not a non-negative integer", name, values[0])
			}
			if name == paramLimit && (n < 1 || n > api.MaxPageSize) {
				return opts, errorf(http.StatusBadRequest, "query parameter %s=%d is outside 1..%d", name, n, api.MaxPageSize)
			}
			if name == paramOffset {
				opts.Offset = n
			} else {
				opts.Limit = n
			}
		default:
			opts.Filters[name] = values[0]
		}
	}
	return opts, nil
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, "query parameter %s=%q is not true or false", name, v)
	}
	return b, nil
}

// writeList answers with the slice list points to, as [] rather than null when empty.
func writeList(w http.ResponseWriter, list any) {
	if v := reflect.ValueOf(list).Elem(); v.IsNil() {
		list = []struct{}{}
	}
	writeJSON(w, http.StatusOK, list)
}

// applyMergePatch merges patch (RFC 7386) into the JSON form of obj and returns the result.
func applyMergePatch(obj any, patch any) ([]byte, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode current object: %w", err)
	}
	var target any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&target); err != nil {
		return nil, fmt.Errorf("decode current object: %w", err)
	}
	merged, err := json.Marshal(mergePatch(target, patch))
	if err != nil {
		return nil, fmt.Errorf("encode patched object: %w", err)
	}
	return merged, nil
}

// mergePatch is RFC 7386 MergePatch(target, patch): members of an object patch replace those
// of the target, recursively; null removes a member; any other patch replaces the target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for name, value := range p {
		if value == nil {
			delete(t, name)
			continue
		}
		t[name] = mergePatch(t[name], value)
	}
	return t
}
