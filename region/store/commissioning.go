package store

import "github.com/ironflow/ironflow/region/api"

// commissioningScripts are the scripts `ironflow agent enlist` runs in the discovery
// environment; their output is recorded on the enlisting machine (enlist.go). Keyed by Name,
// like tasks, and ":" is refused so a bare key is always the name.
var commissioningScripts = newKind(kind[api.CommissioningScript]{
	name: api.KindCommissioningScripts, noun: "commissioning script", table: "commissioning_scripts",
	self:  func(c *api.CommissioningScript) *string { return &c.Name },
	bare:  "name",
	keys:  map[string]string{"Name": "name = $1"},
	order: "name",
	columns: func(c *api.CommissioningScript) []column {
		return []column{{"name", c.Name}}
	},
	prepare: func(c, _ *api.CommissioningScript) { emptyMeta(&c.Meta) },
	validate: func(c *api.CommissioningScript) error {
		if err := validName("commissioning script", c.Name, true); err != nil {
			return err
		}
		return validNamedScript("commissioning script", c.Name, c.TimeoutSeconds, c.Script)
	},
})
