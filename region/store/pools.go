package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// defaultPool always exists (created by the first migration).
const defaultPool = "default"

var pools = newKind(kind[api.Pool]{
	name: api.KindPools, noun: "pool", table: "pools",
	self:  func(p *api.Pool) *string { return &p.Name },
	bare:  "name",
	keys:  map[string]string{"Name": "name = $1"},
	order: "name",
	columns: func(p *api.Pool) []column {
		return []column{{"name", p.Name}}
	},
	prepare:  func(p, _ *api.Pool) { emptyMeta(&p.Meta) },
	validate: func(p *api.Pool) error { return validName("pool", p.Name, true) },
	deps: []dependents{
		"SELECT 'machine ' || name FROM machines WHERE pool = $1 ORDER BY name",
		"SELECT 'pod ' || name FROM pods WHERE pool = $1 ORDER BY name",
	},
	beforeDelete: func(_ context.Context, _ pgx.Tx, _ Principal, p *api.Pool, _ bool) error {
		if p.Name == defaultPool {
			return invalidf("pool %q cannot be deleted: every region keeps it", defaultPool)
		}
		return nil
	},
})
