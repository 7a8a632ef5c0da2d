package server_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
)

// TestDNSOfSeveralProcesses: two region processes on one database answer a query over UDP
// (--dns-listen) byte for byte alike, also right after a change, and so does the racks'
// HTTP endpoint; it takes a token that may read (a rack's), and refuses the machine role and
// what is not a DNS message.
func TestDNSOfSeveralProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dnsA, dnsB := testutil.FreeDNSAddr(t), testutil.FreeDNSAddr(t)
	startServer(t, e.st, "test-region", func(c *server.Config) { c.DNSListen = dnsA })
	startServer(t, e.st, "test-region", func(c *server.Config) { c.DNSListen = dnsB })
	e.create(api.KindDomains, map[string]any{"Name": "a.example", "Default": true})
	m := e.create(api.KindMachines, map[string]any{"Name": "birdy", "Address": "10.5.0.7"})

	ask := func(addr, name string) []byte {
		q := new(mdns.Msg).SetQuestion(name, mdns.TypeA)
		q.Id = 4242
		var c mdns.Client
		ans, _, err := c.Exchange(q, addr)
		if err != nil {
			t.Fatalf("ask %s: %v", addr, err)
		}
		raw, err := ans.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	a := ask(dnsA, "birdy.a.example.")
	if b := ask(dnsB, "birdy.a.example."); !bytes.Equal(a, b) {
		t.Fatalf("the processes answer differently:\n%x\n%x", a, b)
	}
	e.mustDo(api.RoleAdmin, http.MethodPatch, "/api/v1/machines/"+m["Uuid"].(string), map[string]any{"Address": "10.5.0.8"}, http.StatusOK)
	testutil.Eventually(t, 5*time.Second, "both processes answer the new address alike", func() bool {
		a, b := ask(dnsA, "birdy.a.example."), ask(dnsB, "birdy.a.example.")
		ans := new(mdns.Msg)
		return bytes.Equal(a, b) && ans.Unpack(a) == nil && len(ans.Answer) == 1 && ans.Answer[0].(*mdns.A).A.String() == "10.5.0.8"
	})

	query, err := new(mdns.Msg).SetQuestion("birdy.a.example.", mdns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	post := func(token, contentType string, body []byte) response {
		req, err := http.NewRequest(http.MethodPost, e.base+api.DNSQueryPath, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+token)
		return send(t, req)
	}
	r := post(e.tokens[api.RoleRack], api.DNSMessageType, query)
	ans := new(mdns.Msg)
	if r.code != http.StatusOK || ans.Unpack(r.body) != nil || len(ans.Answer) != 1 || !ans.Authoritative {
		t.Fatalf("rack token over HTTP: %d %s", r.code, ans)
	}
	for _, c := range []struct {
		what, token, contentType string
		body                     []byte
		code                     int
	}{
		{"machine token", e.machineToken(m["Uuid"].(string)), api.DNSMessageType, query, http.StatusForbidden},
		{"no token", "", api.DNSMessageType, query, http.StatusUnauthorized},
		{"JSON", e.tokens[api.RoleRack], "application/json", query, http.StatusUnsupportedMediaType},
		{"garbage", e.tokens[api.RoleRack], api.DNSMessageType, []byte{1, 2, 3}, http.StatusBadRequest},
		{"oversized", e.tokens[api.RoleRack], api.DNSMessageType, make([]byte, 5000), http.StatusRequestEntityTooLarge},
	} {
		if r := post(c.token, c.contentType, c.body); r.code != c.code {
			t.Errorf("%s: %d %s, want %d", c.what, r.code, r.body, c.code)
		}
	}
}
