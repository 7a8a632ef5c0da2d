package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestSecretsOverHTTP: secrets are for admins and operators only, names may contain "/", and
// values show nowhere but in their own GET.
func TestSecretsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	box := newAgentBox(e, "box")
	e.tokens[api.RoleMachine] = e.machineToken(box.uuid)
	const value = "-----BEGIN OPENSSH PRIVATE KEY----- s3cr3t"
	path := "/api/v1/machines/" + box.uuid + "/secrets/migrate-machine/esxi-ssh-priv-key"

	e.mustDo(api.RoleOperator, http.MethodPut, path, api.Secret{Value: value}, http.StatusNoContent)
	got := into[api.Secret](t, e.mustDo(api.RoleAdmin, http.MethodGet, path, nil, http.StatusOK))
	if got != (api.Secret{Name: "migrate-machine/esxi-ssh-priv-key", Value: value}) {
		t.Fatalf("secret %+v", got)
	}
	for _, role := range []string{api.RoleReadonly, api.RoleRack, api.RoleMachine} {
		e.do(role, http.MethodGet, path, nil).apiError(t, http.StatusForbidden)
		e.do(role, http.MethodPut, path, api.Secret{Value: "x"}).apiError(t, http.StatusForbidden)
	}
	e.do(api.RoleOperator, http.MethodPut, path, api.Secret{Name: "other", Value: "x"}).apiError(t, http.StatusUnprocessableEntity)
	e.do(api.RoleOperator, http.MethodGet, "/api/v1/machines/"+box.uuid+"/secrets/absent", nil).apiError(t, http.StatusNotFound)
	e.do(api.RoleOperator, http.MethodPut, "/api/v1/machines/Name:nope/secrets/x", api.Secret{Value: "x"}).apiError(t, http.StatusNotFound)

	for what, p := range map[string]string{
		"machine": "/api/v1/machines/" + box.uuid,
		"export":  "/api/v1/machines/" + box.uuid + "/export",
		"events":  "/api/v1/events",
	} {
		if body := e.mustDo(api.RoleAdmin, http.MethodGet, p, nil, http.StatusOK).body; strings.Contains(string(body), "s3cr3t") {
			t.Fatalf("the secret value shows in the %s: %s", what, body)
		}
	}

	e.mustDo(api.RoleOperator, http.MethodDelete, path, nil, http.StatusNoContent)
	e.mustDo(api.RoleOperator, http.MethodDelete, path, nil, http.StatusNoContent)
	e.do(api.RoleOperator, http.MethodGet, path, nil).apiError(t, http.StatusNotFound)
}

// TestAdhocRun: a script queued with run is the machine's next job.
func TestAdhocRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	box := newAgentBox(e, "box")
	run := "/api/v1/machines/" + box.uuid + "/run"
	job := into[api.Job](t, e.mustDo(api.RoleOperator, http.MethodPost, run, api.AdhocRequest{Script: "uname -a", TimeoutSeconds: 5}, http.StatusCreated))
	if job.State != api.JobCreated || job.Task != api.AdhocTaskPrefix+job.Uuid || job.Machine != box.uuid {
		t.Fatalf("ad-hoc job %+v", job)
	}
	next := into[api.AgentJob](t, box.do(http.MethodGet, "/next-job?wait=1s", nil))
	if next.Job.Uuid != job.Uuid || next.Script != "uname -a" || next.Timeout.Seconds() != 5 {
		t.Fatalf("next job %+v", next)
	}
	e.do(api.RoleOperator, http.MethodPost, run, api.AdhocRequest{}).apiError(t, http.StatusUnprocessableEntity)
	e.do(api.RoleReadonly, http.MethodPost, run, api.AdhocRequest{Script: "true"}).apiError(t, http.StatusForbidden)
}
