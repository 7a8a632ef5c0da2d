package ui_test

import (
	"context"
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

func TestMovesPageLinksToThisRegionsMovesInTheTemporalUI(t *testing.T) {
	e := newUIEnv(t)
	b := e.browser()
	b.mustSignIn(e.tokens[api.RoleReadonly])
	p := b.get("/moves")
	want := "http://temporal.example:8233/namespaces/default/workflows?query=" + url.QueryEscape(`WorkflowType="TransferRack" AND SourceRegion="ui-region"`)
	if p.code != 200 || !strings.Contains(html.UnescapeString(p.body), want) {
		t.Errorf("GET /moves: %d, no link %s in %s", p.code, want, p.body)
	}
}

func TestDNSPageListsDomainsAndRecords(t *testing.T) {
	e := newUIEnv(t)
	ctx := context.Background()
	if _, err := e.admin.Domains().Create(ctx, api.Domain{Name: "lab.example", Default: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.DNSRecords().Create(ctx, api.DNSRecord{Domain: "lab.example", Name: "ntp", Type: "A", Data: "192.0.2.10"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.mustSignIn(e.tokens[api.RoleReadonly])
	if p := b.get("/dns"); p.code != 200 || !strings.Contains(p.body, "lab.example") || !strings.Contains(p.body, "192.0.2.10") {
		t.Errorf("GET /dns: %d %s", p.code, p.body)
	}
}
