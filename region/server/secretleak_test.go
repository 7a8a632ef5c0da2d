package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
)

// TestNoSecretReachesRolesWithoutIt walks every route of the region with every role that may
// not hold secrets (readonly, rack, another machine's token and agent credential, nobody) and
// asserts that no answer carries a secret: a machine's agent Secret, a token or its hash,
// the rack secret, the ticket key. Secret filters and Secret: keys are tried too, and must be
// refused whether the guess is right or wrong (no oracle).
func TestNoSecretReachesRolesWithoutIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const machineSecret = "victim-agent-secret-0123456789"
	victim := e.create(api.KindMachines, api.Machine{Name: "victim", Secret: machineSecret, HardwareAddrs: []string{"52:54:00:00:00:0a"}, Runnable: true})["Uuid"].(string)
	probe := e.create(api.KindMachines, api.Machine{Name: "probe", Secret: "probe-secret", HardwareAddrs: []string{"52:54:00:00:00:0b"}})["Uuid"].(string)
	e.mustDo(api.RoleAdmin, http.MethodPut, "/api/v1/machines/"+victim+"/secrets/bmc", api.Secret{Value: "bmc-password-0123456789"}, http.StatusNoContent)
	job := e.create(api.KindJobs, map[string]any{"Machine": victim, "Task": "noop"})
	jobID, _ := job["Uuid"].(string)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	rackSecret := e.rackSecret()
	ticketKey, err := e.st.TicketKey(ctx)
	if err != nil {
		t.Fatal(err)
	}

	secrets := map[string]string{
		"machine Secret":  machineSecret,
		"machine secrets": "bmc-password-0123456789",
		"rack secret":     rackSecret,
		"ticket key":      hex.EncodeToString(ticketKey),
		"ticket key b64":  base64.StdEncoding.EncodeToString(ticketKey),
		"ticket key b64u": base64.RawURLEncoding.EncodeToString(ticketKey),
	}
	for _, role := range []string{api.RoleAdmin, api.RoleOperator} {
		sum := sha256.Sum256([]byte(e.tokens[role]))
		secrets[role+" token"] = e.tokens[role]
		secrets[role+" token hash"] = hex.EncodeToString(sum[:])
		secrets[role+" token hash b64"] = base64.StdEncoding.EncodeToString(sum[:])
	}

	callers := map[string]string{
		api.RoleReadonly: e.tokens[api.RoleReadonly],
		api.RoleRack:     rack.Token,
		api.RoleMachine:  e.machineToken(probe),
		"agent":          "machine:" + probe + ":probe-secret",
		"nobody":         "",
	}
	fill := strings.NewReplacer("{name...}", "bmc", "{name}", "readonly-user", "{job}", jobID)
	for _, pattern := range server.RoutePatterns() {
		method, path, _ := strings.Cut(pattern, " ")
		var paths []string
		switch {
		case strings.Contains(path, "{key}"):
			key := "Name:fixture"
			switch {
			case strings.HasPrefix(path, "/api/v1/machines/"):
				key = victim
			case strings.HasPrefix(path, "/api/v1/jobs/"):
				key = jobID
			case strings.HasPrefix(path, "/api/v1/racks/"):
				key = rack.Rack.Uuid
			}
			paths = append(paths, strings.Replace(path, "{key}", key, 1),
				strings.Replace(path, "{key}", "Secret:"+url.PathEscape(machineSecret), 1),
				strings.Replace(path, "{key}", "Secret:wrong-guess", 1))
		case strings.Contains(path, "{uuid}"):
			id := victim
			if strings.HasPrefix(path, "/api/v1/racks/") {
				id = rack.Rack.Uuid
			}
			paths = append(paths, strings.Replace(path, "{uuid}", id, 1))
		default:
			paths = append(paths, path, path+"?Secret="+url.QueryEscape(machineSecret), path+"?Secret=wrong-guess")
		}
		for _, p := range paths {
			p = fill.Replace(p)
			for role, token := range callers {
				var body any
				if method != http.MethodGet && method != http.MethodDelete {
					body = "{}"
				}
				r := doRequest(t, token, method, e.base+p, body)
				for what, secret := range secrets {
					if strings.Contains(string(r.body), secret) {
						t.Errorf("%s %s as %s: answer %d carries the %s: %s", method, p, role, r.code, what, r.body)
					}
				}
				// Public routes that ignore the query (/healthz, /metrics, /info) are no oracle.
				if lookup := strings.Contains(p, "Secret") && strings.HasPrefix(p, "/api/v1/") && !strings.HasPrefix(p, "/api/v1/info"); lookup && role != "nobody" && role != "agent" && r.code < 300 {
					t.Errorf("%s %s as %s: %d, want secret lookups refused", method, p, role, r.code)
				}
			}
		}
	}
}
