package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestUserTokenForAMissingUserSaysHowToCreateOne: the region's 404 comes with the exact
// command that creates the user, with the role asked for (else readonly).
func TestUserTokenForAMissingUserSaysHowToCreateOne(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/users/{name}/token", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusNotFound, api.Error{Error: "user " + r.PathValue("name") + " not found", Code: http.StatusNotFound})
	})
	region := serveHTTP(t, mux)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"users", "token", "viewer"}, "ironflow -E " + region + " users create viewer --role readonly"},
		{[]string{"users", "token", "ops", "--role", "operator"}, "ironflow -E " + region + " users create ops --role operator"},
	} {
		code, out, stderr := ironflow(t, region, tc.args...)
		if code == 0 || out != "" || !strings.Contains(stderr, "not found") || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the command %q", tc.args, code, out, stderr, tc.want)
		}
	}
}
