package server

import (
	"net/http"
	"slices"
	"strings"
)

// secretFields are the object fields only roles that may read secrets see (Machine.Secret,
// the agent's credential). Other roles may not filter or address objects by them either:
// the answer (a match or not) would let them test guesses.
var secretFields = []string{"Secret"}

// refuseSecretLookups answers 403 when a caller that may not read secrets filters by a
// secret field (?Secret=...) or addresses an object by one (Secret:... keys).
func refuseSecretLookups(r *http.Request, role string) error {
	if mayReadSecrets(role) {
		return nil
	}
	for name := range r.URL.Query() {
		if slices.Contains(secretFields, name) {
			return errorf(http.StatusForbidden, "role %q may not filter by %s", role, name)
		}
	}
	if field, _, ok := strings.Cut(r.PathValue("key"), ":"); ok && slices.Contains(secretFields, field) {
		return errorf(http.StatusForbidden, "role %q may not address objects by %s", role, field)
	}
	return nil
}
