package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

var profiles = newKind(kind[api.Profile]{
	name: api.KindProfiles, noun: "profile", table: "profiles",
	self:  func(p *api.Profile) *string { return &p.Name },
	bare:  "name",
	keys:  map[string]string{"Name": "name = $1"},
	order: "name",
	columns: func(p *api.Profile) []column {
		return []column{{"name", p.Name}}
	},
	validate: func(p *api.Profile) error {
		if err := validName("profile", p.Name, true); err != nil {
			return err
		}
		return uniqueStrings("profile "+p.Name, "Profiles", p.Profiles)
	},
	children: func(ctx context.Context, tx pgx.Tx, p *api.Profile) error {
		if err := replaceRelation(ctx, tx, "profile_profiles", "profile", "uses", p.Name, p.Profiles); err != nil {
			return err
		}
		var cycle bool
		if err := tx.QueryRow(ctx, `WITH RECURSIVE reach(name) AS (
				SELECT uses FROM profile_profiles WHERE profile = $1
				UNION SELECT pp.uses FROM profile_profiles pp JOIN reach r ON pp.profile = r.name)
			SELECT EXISTS (SELECT 1 FROM reach WHERE name = $1)`, p.Name).Scan(&cycle); err != nil {
			return err
		}
		if cycle {
			return invalidf("profile %s would include itself through its Profiles", p.Name)
		}
		return nil
	},
	deps: []dependents{
		"SELECT 'machine ' || m.name FROM machine_profiles mp JOIN machines m ON m.uuid = mp.machine WHERE mp.profile = $1 ORDER BY m.name",
		"SELECT 'profile ' || profile FROM profile_profiles WHERE uses = $1 ORDER BY profile",
	},
})
