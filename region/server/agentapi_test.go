package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// agentClient does not follow redirects: a 307 is what the agent must see.
var agentClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// agentBox is a machine with its agent credentials on a region.
type agentBox struct {
	e            *env
	uuid, secret string
}

func newAgentBox(e *env, name string) agentBox {
	e.t.Helper()
	m := e.create(api.KindMachines, api.Machine{Name: name, Secret: "s-" + name, Runnable: true, Available: true})
	return agentBox{e: e, uuid: m["Uuid"].(string), secret: "s-" + name}
}

// do calls the agent API of machine path (the machine's own unless given) with the box's
// credentials; body is sent as is when it is a string, else as JSON.
func (b agentBox) do(method, path string, body any) response {
	b.e.t.Helper()
	return b.doAs("machine:"+b.uuid+":"+b.secret, method, "/api/v1/agent/"+b.uuid+path, body)
}

func (b agentBox) doAs(credentials, method, path string, body any) response {
	b.e.t.Helper()
	var rd *strings.Reader
	switch v := body.(type) {
	case nil:
		rd = strings.NewReader("")
	case string:
		rd = strings.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			b.e.t.Fatal(err)
		}
		rd = strings.NewReader(string(data))
	}
	req, err := http.NewRequest(method, b.e.base+path, rd)
	if err != nil {
		b.e.t.Fatal(err)
	}
	if credentials != "" {
		req.Header.Set("Authorization", "Bearer "+credentials)
	}
	resp, err := agentClient.Do(req)
	if err != nil {
		b.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

func TestAgentAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	box := newAgentBox(e, "box")
	other := newAgentBox(e, "other")
	noSecret := e.create(api.KindMachines, api.Machine{Name: "no-secret"})["Uuid"].(string)
	path := "/api/v1/agent/" + box.uuid + "/checkin"
	cases := []struct {
		name, credentials, path string
		code                    int
		want                    string
	}{
		{"no header", "", path, http.StatusUnauthorized, "missing Authorization"},
		{"a user token", e.tokens[api.RoleAdmin], path, http.StatusUnauthorized, "machine:<machine-uuid>:<secret>"},
		{"wrong secret", "machine:" + box.uuid + ":nope", path, http.StatusUnauthorized, "unknown machine or wrong secret"},
		{"unknown machine", "machine:0a000000-0000-4000-8000-000000000009:s-box", path, http.StatusUnauthorized, "unknown machine or wrong secret"},
		{"not a uuid", "machine:box:s-box", path, http.StatusUnauthorized, "unknown machine or wrong secret"},
		{"machine without secret", "machine:" + noSecret + ":x", "/api/v1/agent/" + noSecret + "/checkin", http.StatusUnauthorized, "unknown machine or wrong secret"},
		{"another machine's API", "machine:" + other.uuid + ":s-other", path, http.StatusForbidden, "may only use its own agent API"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := box.doAs(c.credentials, http.MethodPost, c.path, api.AgentCheckin{}).apiError(t, c.code)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not say %q", msg, c.want)
			}
		})
	}
	var m api.Machine
	if err := json.Unmarshal(e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines/"+box.uuid, nil, http.StatusOK).body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Meta[api.MetaAgentLastSeen] != "" {
		t.Fatalf("a refused check-in was recorded: %v", m.Meta)
	}
}

// TestAgentJobCycle: check in, long-poll for a job created through the normal API, stream its
// log, report its exit.
func TestAgentJobCycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(api.KindTasks, api.Task{Name: "hello-world", Script: "echo hello", TimeoutSeconds: 60})
	box := newAgentBox(e, "box")
	other := newAgentBox(e, "other")

	cfg := into[api.AgentConfig](t, box.do(http.MethodPost, "/checkin", api.AgentCheckin{Version: "1.2.3", Hostname: "box", Endpoint: e.base}))
	if cfg.Machine != box.uuid || cfg.PollWait != "30s" || len(cfg.Endpoints) != 1 || cfg.Endpoints[0] != e.base {
		t.Fatalf("agent config %+v", cfg)
	}
	m := into[api.Machine](t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines/"+box.uuid, nil, http.StatusOK))
	if m.Meta[api.MetaAgentVersion] != "1.2.3" || m.Meta[api.MetaAgentEndpoint] != e.base || m.Meta[api.MetaAgentLastSeen] == "" {
		t.Fatalf("check-in Meta %v", m.Meta)
	}

	if r := box.do(http.MethodGet, "/next-job?wait=0s", nil); r.code != http.StatusNoContent {
		t.Fatalf("next-job with nothing queued: %d %s", r.code, r.body)
	}
	for _, wait := range []string{"2m", "soon", "-1s"} {
		box.do(http.MethodGet, "/next-job?wait="+wait, nil).apiError(t, http.StatusBadRequest)
	}

	// Two long polls wait; a job created through the normal API goes to exactly one of them.
	answers := make(chan response, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { answers <- box.do(http.MethodGet, "/next-job?wait=3s", nil) })
	}
	time.Sleep(200 * time.Millisecond) // let the polls start waiting (correctness does not depend on it)
	created := e.create(api.KindJobs, api.Job{Machine: box.uuid, Task: "hello-world", State: api.JobCreated})["Uuid"].(string)
	wg.Wait()
	close(answers)
	var got []api.AgentJob
	for r := range answers {
		switch r.code {
		case http.StatusOK:
			got = append(got, into[api.AgentJob](t, r))
		case http.StatusNoContent:
		default:
			t.Fatalf("next-job: %d %s", r.code, r.body)
		}
	}
	if len(got) != 1 || got[0].Job.Uuid != created || got[0].Script != "echo hello" || got[0].Timeout != time.Minute || got[0].Job.State != api.JobRunning {
		t.Fatalf("long polls got %+v", got)
	}

	if r := box.do(http.MethodPut, "/jobs/"+created+"/log", "hello\n"); r.code != http.StatusNoContent {
		t.Fatalf("log: %d %s", r.code, r.body)
	}
	other.do(http.MethodPut, "/jobs/"+created+"/log", "intruder\n").apiError(t, http.StatusForbidden)
	if log := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/jobs/"+created+"/log", nil, http.StatusOK).body; string(log) != "hello\n" {
		t.Fatalf("job log %q", log)
	}
	other.do(http.MethodPost, "/jobs/"+created+"/exit", api.AgentJobExit{}).apiError(t, http.StatusNotFound)
	box.do(http.MethodPost, "/jobs/"+created+"/exit", api.AgentJobExit{ExitState: "bogus"}).apiError(t, http.StatusUnprocessableEntity)
	job := into[api.Job](t, box.do(http.MethodPost, "/jobs/"+created+"/exit", api.AgentJobExit{ExitCode: 0, ExitState: "complete"}))
	if job.State != api.JobFinished || job.ExitState != "complete" || job.EndTime.IsZero() || !job.Current {
		t.Fatalf("finished job %+v", job)
	}
	m = into[api.Machine](t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines/"+box.uuid, nil, http.StatusOK))
	if m.CurrentJob != created {
		t.Fatalf("machine CurrentJob %q, want %s", m.CurrentJob, created)
	}
}

// TestAgentRedirectOfAStub: every agent call of a migrated stub is answered 307 to the same
// path on the destination, with a Redirect body.
func TestAgentRedirectOfAStub(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	box := newAgentBox(e, "box")
	job := e.create(api.KindJobs, api.Job{Machine: box.uuid, Task: "hello-world"})["Uuid"].(string)
	const dest = "https://drp2:8092"
	e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/machines/"+box.uuid+"/quiesce", api.QuiesceRequest{Migration: "m-1"}, http.StatusOK)
	// While quiesced, no job is handed out; check-ins still count.
	if r := box.do(http.MethodGet, "/next-job", nil); r.code != http.StatusNoContent {
		t.Fatalf("next-job of a quiesced machine: %d %s", r.code, r.body)
	}
	e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/machines/"+box.uuid+"/finalize-migration", api.FinalizeRequest{RedirectEndpoint: dest}, http.StatusOK)

	calls := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/checkin", api.AgentCheckin{}},
		{http.MethodGet, "/next-job?wait=30s", nil},
		{http.MethodPut, "/jobs/" + job + "/log", "late line\n"},
		{http.MethodPost, "/jobs/" + job + "/exit", api.AgentJobExit{}},
	}
	for _, c := range calls {
		r := box.do(c.method, c.path, c.body)
		if r.code != http.StatusTemporaryRedirect {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.code, r.body)
		}
		if loc := r.header.Get("Location"); loc != dest+"/api/v1/agent/"+box.uuid+c.path {
			t.Errorf("%s %s: Location %q", c.method, c.path, loc)
		}
		if red := into[api.Redirect](t, response{code: 200, body: r.body}); red != (api.Redirect{Endpoint: dest, Machine: box.uuid}) {
			t.Errorf("%s %s: body %+v", c.method, c.path, red)
		}
	}
	// The stub's secret still authenticates; wrong credentials get no redirect.
	box.doAs("machine:"+box.uuid+":nope", http.MethodPost, "/api/v1/agent/"+box.uuid+"/checkin", api.AgentCheckin{}).apiError(t, http.StatusUnauthorized)
}
