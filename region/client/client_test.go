package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// seen is one request as the test server received it.
type seen struct {
	method, path, query, body, contentType, auth string
}

// recorder answers every request with status/body and remembers what it received.
type recorder struct {
	t        *testing.T
	mu       sync.Mutex
	requests []seen
	status   int
	header   http.Header
	body     string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rec.t.Errorf("read request body: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.requests = append(rec.requests, seen{
		method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery, body: string(body),
		contentType: r.Header.Get("Content-Type"), auth: r.Header.Get("Authorization"),
	})
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	io.WriteString(w, rec.body)
}

// newTestClient starts a recorder answering status/body and returns a client for it.
func newTestClient(t *testing.T, status int, body string) (*Client, *recorder) {
	t.Helper()
	rec := &recorder{t: t, status: status, body: body}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return New(srv.URL+"/", "tok"), rec
}

func (rec *recorder) only(t *testing.T) seen {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) != 1 {
		t.Fatalf("server saw %d requests, want 1: %+v", len(rec.requests), rec.requests)
	}
	return rec.requests[0]
}

func TestCallsUseTheRoutesOfTheContract(t *testing.T) {
	ctx := context.Background()
	machine := api.Machine{Name: "birdy"}
	tests := []struct {
		name       string
		call       func(c *Client) error
		method     string
		path       string
		query      string
		wantBody   string // JSON the request must carry, "" for none
		answer     string
		answerType string
	}{
		{"list machines", func(c *Client) error {
			_, err := c.Machines().List(ctx, url.Values{"Pool": {"default"}, "limit": {"2"}})
			return err
		}, "GET", "/api/v1/machines", "Pool=default&limit=2", "", `[]`, ""},
		{"get machine", func(c *Client) error { _, err := c.Machines().Get(ctx, "Name:birdy"); return err },
			"GET", "/api/v1/machines/Name:birdy", "", "", `{}`, ""},
		{"create machine", func(c *Client) error { _, err := c.Machines().Create(ctx, machine); return err },
			"POST", "/api/v1/machines", "", mustJSON(t, machine), `{}`, "application/json"},
		{"replace machine", func(c *Client) error { _, err := c.Machines().Replace(ctx, "u1", machine); return err },
			"PUT", "/api/v1/machines/u1", "", mustJSON(t, machine), `{}`, "application/json"},
		{"patch machine", func(c *Client) error {
			_, err := c.Machines().Patch(ctx, "u1", json.RawMessage(`{"Runnable":false}`))
			return err
		}, "PATCH", "/api/v1/machines/u1", "", `{"Runnable":false}`, `{}`, "application/merge-patch+json"},
		{"delete machine", func(c *Client) error { return c.Machines().Delete(ctx, "u1", false) },
			"DELETE", "/api/v1/machines/u1", "", "", ``, ""},
		{"force delete rack", func(c *Client) error { return c.Racks().Delete(ctx, "r1", true) },
			"DELETE", "/api/v1/racks/r1", "force=true", "", ``, ""},
		{"jobs", func(c *Client) error { _, err := c.Jobs().Get(ctx, "j1"); return err }, "GET", "/api/v1/jobs/j1", "", "", `{}`, ""},
		{"profiles", func(c *Client) error { _, err := c.Profiles().Get(ctx, "p"); return err }, "GET", "/api/v1/profiles/p", "", "", `{}`, ""},
		{"pools", func(c *Client) error { _, err := c.Pools().Get(ctx, "default"); return err }, "GET", "/api/v1/pools/default", "", "", `{}`, ""},
		{"pods", func(c *Client) error { _, err := c.Pods().Get(ctx, "kvm"); return err }, "GET", "/api/v1/pods/kvm", "", "", `{}`, ""},
		{"fabrics", func(c *Client) error { _, err := c.Fabrics().List(ctx, nil); return err }, "GET", "/api/v1/fabrics", "", "", `[]`, ""},
		{"vlans", func(c *Client) error { _, err := c.VLANs().List(ctx, nil); return err }, "GET", "/api/v1/vlans", "", "", `[]`, ""},
		{"subnets", func(c *Client) error { _, err := c.Subnets().List(ctx, nil); return err }, "GET", "/api/v1/subnets", "", "", `[]`, ""},
		{"leases", func(c *Client) error { _, err := c.Leases().List(ctx, nil); return err }, "GET", "/api/v1/leases", "", "", `[]`, ""},
		{"racks", func(c *Client) error { _, err := c.Racks().List(ctx, nil); return err }, "GET", "/api/v1/racks", "", "", `[]`, ""},
		{"users", func(c *Client) error { _, err := c.Users().List(ctx, nil); return err }, "GET", "/api/v1/users", "", "", `[]`, ""},
		{"job log", func(c *Client) error { _, err := c.JobLog(ctx, "j1"); return err }, "GET", "/api/v1/jobs/j1/log", "", "", `text`, ""},
		{"append job log", func(c *Client) error { return c.AppendJobLog(ctx, "j1", "line\n") },
			"PUT", "/api/v1/jobs/j1/log", "", "", ``, "text/plain; charset=utf-8"},
		{"mint token", func(c *Client) error {
			_, err := c.MintToken(ctx, "alice", api.TokenRequest{Role: api.RoleOperator, TTL: time.Hour})
			return err
		}, "POST", "/api/v1/users/alice/token", "", `{"Role":"operator","TTL":3600000000000}`, `{}`, "application/json"},
		{"events", func(c *Client) error {
			_, err := c.Events(ctx, url.Values{"Kind": {"machines"}, "Key": {"u1"}})
			return err
		}, "GET", "/api/v1/events", "Key=u1&Kind=machines", "", `[]`, ""},
		{"info", func(c *Client) error { _, err := c.Info(ctx); return err }, "GET", "/api/v1/info", "", "", `{}`, ""},
		{"health", func(c *Client) error { return c.Health(ctx) }, "GET", "/healthz", "", "", `ok`, ""},
		{"mint ticket", func(c *Client) error { _, err := c.MintTicket(ctx, api.TicketRequest{TTL: time.Minute}); return err },
			"POST", "/api/v1/migrate-tickets", "", `{"TTL":60000000000}`, `{}`, "application/json"},
		{"quiesce", func(c *Client) error {
			_, err := c.Quiesce(ctx, "Name:birdy", api.QuiesceRequest{Migration: "migrate-machine/u1"})
			return err
		}, "POST", "/api/v1/machines/Name:birdy/quiesce", "", `{"Migration":"migrate-machine/u1"}`, `{}`, "application/json"},
		{"unquiesce", func(c *Client) error { _, err := c.Unquiesce(ctx, "u1"); return err },
			"POST", "/api/v1/machines/u1/unquiesce", "", "", `{}`, ""},
		{"export", func(c *Client) error { _, err := c.Export(ctx, "u1"); return err },
			"GET", "/api/v1/machines/u1/export", "", "", `{}`, ""},
		{"import", func(c *Client) error { _, err := c.Import(ctx, api.ImportRequest{Ticket: "t"}); return err },
			"POST", "/api/v1/machines/import", "", mustJSON(t, api.ImportRequest{Ticket: "t"}), `{}`, "application/json"},
		{"finalize", func(c *Client) error {
			_, err := c.FinalizeMigration(ctx, "u1", api.FinalizeRequest{RedirectEndpoint: "https://drp2:8092"})
			return err
		}, "POST", "/api/v1/machines/u1/finalize-migration", "", `{"RedirectEndpoint":"https://drp2:8092"}`, `{}`, "application/json"},
		{"restore", func(c *Client) error { _, err := c.RestoreMigration(ctx, "u1"); return err },
			"POST", "/api/v1/machines/u1/restore-migration", "", "", `{}`, ""},
		{"activate", func(c *Client) error { _, err := c.Activate(ctx, "u1"); return err },
			"POST", "/api/v1/machines/u1/activate", "", "", `{}`, ""},
		{"register rack", func(c *Client) error { _, err := c.RegisterRack(ctx, api.RackRegistration{Name: "r1"}); return err },
			"POST", "/api/v1/racks/register", "", mustJSON(t, api.RackRegistration{Name: "r1"}), `{}`, "application/json"},
		{"rack heartbeat", func(c *Client) error { _, err := c.RackHeartbeat(ctx, "r1", api.RackHeartbeat{}); return err },
			"POST", "/api/v1/racks/r1/heartbeat", "", mustJSON(t, api.RackHeartbeat{}), `{}`, "application/json"},
		{"sync leases", func(c *Client) error { _, err := c.SyncLeases(ctx, "r1", []api.Lease{}); return err },
			"POST", "/api/v1/racks/r1/leases", "", `[]`, `{}`, "application/json"},
		{"post syslog", func(c *Client) error { _, err := c.PostSyslog(ctx, "r1", []api.SyslogMessage{}); return err },
			"POST", "/api/v1/racks/r1/syslog", "", `[]`, `{}`, "application/json"},
		{"pod facts", func(c *Client) error { _, err := c.StorePodFacts(ctx, "r1", "kvm 1", api.PodFacts{}); return err },
			"PUT", "/api/v1/racks/r1/pods/kvm%201/facts", "", mustJSON(t, api.PodFacts{}), `{}`, "application/json"},
		{"declare pod vm", func(c *Client) error { _, err := c.DeclarePodVM(ctx, "r1", "kvm", machine); return err },
			"POST", "/api/v1/racks/r1/pods/kvm/vms", "", mustJSON(t, machine), `{}`, "application/json"},
		{"forget pod vm", func(c *Client) error { return c.ForgetPodVM(ctx, "r1", "kvm", "u1") },
			"DELETE", "/api/v1/racks/r1/pods/kvm/vms/u1", "", "", ``, ""},
		{"dns query", func(c *Client) error { _, err := c.DNSQuery(ctx, []byte("query"), 7); return err },
			"POST", api.DNSQueryPath, "", "query", "answer", api.DNSMessageType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := newTestClient(t, http.StatusOK, tt.answer)
			if err := tt.call(c); err != nil {
				t.Fatalf("call: %v", err)
			}
			got := rec.only(t)
			if got.method != tt.method || got.path != tt.path || got.query != tt.query {
				t.Errorf("request %s %s?%s, want %s %s?%s", got.method, got.path, got.query, tt.method, tt.path, tt.query)
			}
			if got.contentType != tt.answerType {
				t.Errorf("Content-Type %q, want %q", got.contentType, tt.answerType)
			}
			if tt.wantBody != "" && got.body != tt.wantBody {
				t.Errorf("body %s, want %s", got.body, tt.wantBody)
			}
			if got.auth != "Bearer tok" {
				t.Errorf("Authorization %q, want Bearer tok", got.auth)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestKeysStayOneSegment routes through a real ServeMux pattern: the server must see the key
// the caller gave, whatever characters it holds.
func TestKeysStayOneSegment(t *testing.T) {
	tests := []struct{ key, escaped string }{
		{"Name:birdy", "/api/v1/machines/Name:birdy"},
		{"HardwareAddrs:52:54:00:12:34:56", "/api/v1/machines/HardwareAddrs:52:54:00:12:34:56"},
		{"Name:a/b c", "/api/v1/machines/Name:a%2Fb%20c"},
		{"Name:50%?x#y", "/api/v1/machines/Name:50%25%3Fx%23y"},
		{"01d8828f-2f7d-4a1c-a1fa-f668274c7c44", "/api/v1/machines/01d8828f-2f7d-4a1c-a1fa-f668274c7c44"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			var gotKey, gotPath string
			mux := http.NewServeMux()
			mux.HandleFunc("GET /api/v1/machines/{key}", func(w http.ResponseWriter, r *http.Request) {
				gotKey, gotPath = r.PathValue("key"), r.URL.EscapedPath()
				json.NewEncoder(w).Encode(api.Machine{Name: "birdy"})
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			m, err := New(srv.URL, "").Machines().Get(context.Background(), tt.key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if gotKey != tt.key || gotPath != tt.escaped || m.Name != "birdy" {
				t.Errorf("server saw key %q path %q, want %q %q", gotKey, gotPath, tt.key, tt.escaped)
			}
		})
	}
}

func TestErrorAnswersBecomeAPIErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		message string
		foreign bool // not a region's error document
	}{
		{"not found", 404, `{"Error":"machines Name:nope not found","Code":404}`, "machines Name:nope not found", false},
		{"conflict", 409, `{"Error":"Name birdy already used","Code":409}`, "Name birdy already used", false},
		{"invalid", 422, `{"Error":"CIDR is not a network","Code":422}`, "CIDR is not a network", false},
		{"plain text proxy error", 502, "upstream down\n", "upstream down", true},
		{"another server's 404", 404, "404 page not found\n", "404 page not found", true},
		{"empty body", 500, "", "Internal Server Error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTestClient(t, tt.status, tt.body)
			_, err := c.Machines().Get(context.Background(), "Name:nope")
			apiErr, ok := errors.AsType[*APIError](err)
			if !ok {
				t.Fatalf("error %v (%T), want *APIError", err, err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Message != tt.message || apiErr.Foreign != tt.foreign {
				t.Errorf("got %+v, want %d %q", apiErr, tt.status, tt.message)
			}
			if want := fmt.Sprintf("%s (HTTP %d)", tt.message, tt.status); err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
}

func TestRedirectIsReturnedNotFollowed(t *testing.T) {
	var followed atomic.Bool
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Store(true) }))
	defer dest.Close()
	tests := []struct {
		name string
		body string
		want RedirectError
	}{
		{"body", `{"Endpoint":"https://drp2:8092","Machine":"01d8828f"}`, RedirectError{Endpoint: "https://drp2:8092", Machine: "01d8828f"}},
		{"location only", ``, RedirectError{Endpoint: dest.URL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := newTestClient(t, http.StatusTemporaryRedirect, tt.body)
			rec.header = http.Header{"Location": {dest.URL + "/api/v1/machines/01d8828f"}}
			_, err := c.Machines().Get(context.Background(), "01d8828f")
			redirect, ok := errors.AsType[*RedirectError](err)
			if !ok {
				t.Fatalf("error %v (%T), want *RedirectError", err, err)
			}
			if *redirect != tt.want {
				t.Errorf("got %+v, want %+v", *redirect, tt.want)
			}
			if followed.Load() {
				t.Error("the client followed the redirect")
			}
		})
	}
}

func TestNetworkFailureIsWrapped(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL
	srv.Close()
	_, err := New(endpoint, "").Info(context.Background())
	if err == nil {
		t.Fatal("Info on a closed server succeeded")
	}
	if _, ok := errors.AsType[*APIError](err); ok {
		t.Errorf("network failure reported as an API error: %v", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not wrap ECONNREFUSED", err)
	}
}

func TestTimeoutEndsAHungRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	err := New(srv.URL, "", WithTimeout(50*time.Millisecond)).Health(context.Background())
	if netErr, ok := errors.AsType[net.Error](err); !ok || !netErr.Timeout() {
		t.Errorf("Health on a hung server: %v, want a timeout", err)
	}
}

func TestBadArgumentsSendNothing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		call func(c *Client) error
	}{
		{"empty key", func(c *Client) error { _, err := c.Machines().Get(ctx, ""); return err }},
		{"empty delete key", func(c *Client) error { return c.Racks().Delete(ctx, "", true) }},
		{"empty user", func(c *Client) error { _, err := c.MintToken(ctx, "", api.TokenRequest{}); return err }},
		{"patch array", func(c *Client) error { _, err := c.Machines().Patch(ctx, "u1", json.RawMessage(`[1]`)); return err }},
		{"patch null", func(c *Client) error { _, err := c.Machines().Patch(ctx, "u1", json.RawMessage(`null`)); return err }},
		{"patch garbage", func(c *Client) error { _, err := c.Machines().Patch(ctx, "u1", json.RawMessage(`{"a":`)); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := newTestClient(t, http.StatusOK, `{}`)
			if err := tt.call(c); err == nil {
				t.Error("call succeeded")
			}
			if len(rec.requests) != 0 {
				t.Errorf("server saw %+v", rec.requests)
			}
		})
	}
}

func TestNoTokenSendsNoAuthorization(t *testing.T) {
	rec := &recorder{t: t, status: http.StatusOK, body: `{}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	if _, err := New(srv.URL, "").Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.only(t).auth; got != "" {
		t.Errorf("Authorization %q, want none", got)
	}
}

func TestAnswersAreDecoded(t *testing.T) {
	ctx := context.Background()
	t.Run("null list is empty", func(t *testing.T) {
		c, _ := newTestClient(t, http.StatusOK, `null`)
		ms, err := c.Machines().List(ctx, nil)
		if err != nil || ms == nil || len(ms) != 0 {
			t.Errorf("List = %#v, %v; want an empty slice", ms, err)
		}
	})
	t.Run("param numbers keep their text", func(t *testing.T) {
		c, _ := newTestClient(t, http.StatusOK, `{"Name":"birdy","Params":{"big":9007199254740993,"f":1.50}}`)
		m, err := c.Machines().Get(ctx, "Name:birdy")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(m.Params)
		if string(data) != `{"big":9007199254740993,"f":1.50}` {
			t.Errorf("Params re-encode as %s", data)
		}
	})
	t.Run("job log is text", func(t *testing.T) {
		c, _ := newTestClient(t, http.StatusOK, "step 1\nstep 2\n")
		text, err := c.JobLog(ctx, "j1")
		if err != nil || text != "step 1\nstep 2\n" {
			t.Errorf("JobLog = %q, %v", text, err)
		}
	})
	t.Run("append job log sends text", func(t *testing.T) {
		c, rec := newTestClient(t, http.StatusNoContent, "")
		if err := c.AppendJobLog(ctx, "j1", "hello\n"); err != nil {
			t.Fatal(err)
		}
		if got := rec.only(t).body; got != "hello\n" {
			t.Errorf("body %q", got)
		}
	})
	t.Run("malformed answer", func(t *testing.T) {
		c, _ := newTestClient(t, http.StatusOK, `{"Name":`)
		if _, err := c.Machines().Get(ctx, "u1"); err == nil {
			t.Error("a truncated answer decoded")
		}
	})
}

// countingTransport counts the requests it carries.
type countingTransport struct{ n atomic.Int32 }

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ct.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestWithHTTPClientKeepsRedirectsVisible(t *testing.T) {
	rec := &recorder{t: t, status: http.StatusTemporaryRedirect, body: `{"Endpoint":"https://drp2:8092","Machine":"u1"}`,
		header: http.Header{"Location": {"https://drp2:8092/api/v1/machines/u1"}}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	transport := &countingTransport{}
	c := New(srv.URL, "", WithHTTPClient(&http.Client{Transport: transport}))
	_, err := c.Machines().Get(context.Background(), "u1")
	if _, ok := errors.AsType[*RedirectError](err); !ok {
		t.Errorf("error %v, want *RedirectError", err)
	}
	if n := transport.n.Load(); n != 1 {
		t.Errorf("custom transport carried %d requests, want 1", n)
	}
}

func TestAnswersAreBoundedByTheirLimit(t *testing.T) {
	c, _ := newTestClient(t, http.StatusOK, `"`+strings.Repeat("x", 100)+`"`)
	ctx := context.Background()
	if _, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/big", Limit: 64}); err == nil || !strings.Contains(err.Error(), "longer than 64 bytes") {
		t.Errorf("answer over the limit: %v, want an error naming the limit", err)
	}
	a, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/big", Limit: 102})
	if err != nil || len(a.Body) != 102 {
		t.Errorf("answer at the limit: %d bytes, %v", len(a.Body), err)
	}
}

func TestNotModifiedIsAnAnswer(t *testing.T) {
	c, rec := newTestClient(t, http.StatusNotModified, "")
	rec.header = http.Header{"Etag": {`"7"`}}
	a, err := c.Do(context.Background(), Request{Method: http.MethodGet, Path: "/config", Header: http.Header{"If-None-Match": {`"7"`}}})
	if err != nil || a.StatusCode != http.StatusNotModified || a.Header.Get("ETag") != `"7"` {
		t.Errorf("304: %+v, %v", a, err)
	}
}

func TestPermanentIsARefusal(t *testing.T) {
	for status, want := range map[int]bool{400: true, 401: true, 404: true, 409: true, 422: true, 408: false, 429: false, 500: false, 503: false} {
		if got := (&APIError{StatusCode: status}).Permanent(); got != want {
			t.Errorf("HTTP %d: Permanent() = %v, want %v", status, got, want)
		}
	}
}

// doerFunc is a Doer of a test.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

func TestWithDoerSendsPathsThroughTheDoer(t *testing.T) {
	var got *http.Request
	via := doerFunc(func(req *http.Request) (*http.Response, error) {
		got = req
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"Name":"r"}`))}, nil
	})
	info, err := New("", "", WithDoer(via)).Info(context.Background())
	if err != nil || info.Name != "r" {
		t.Fatalf("Info through the doer: %+v, %v", info, err)
	}
	if got.URL.String() != "/api/v1/info" || got.Header.Get("Authorization") != "" {
		t.Errorf("the doer got %s with Authorization %q, want the path alone and none", got.URL, got.Header.Get("Authorization"))
	}
}
