package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// recordEvent appends to the audit log inside the transaction of the mutation it describes.
func recordEvent(ctx context.Context, tx pgx.Tx, by Principal, action, kind, key string, details map[string]any) error {
	_, err := tx.Exec(ctx, "INSERT INTO events (actor, action, kind, key, details) VALUES ($1, $2, $3, $4, $5)",
		by.User, action, kind, key, details)
	return err
}

// eventFilters maps the Events filters to columns.
var eventFilters = map[string]string{"Kind": "kind = $1", "Key": "key = $1", "Actor": "actor = $1"}

// Events returns the audit log, newest first. Filters: Kind, Key, Actor.
func (s *Store) Events(ctx context.Context, opts ListOptions) ([]api.Event, error) {
	w := &where{}
	for field, value := range opts.Filters {
		cond, ok := eventFilters[field]
		if !ok {
			return nil, invalidf("events cannot be filtered on %q (use Kind, Key or Actor)", field)
		}
		w.add(cond, value)
	}
	page, err := pageSQL(opts)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT id, time, actor, action, kind, key, details FROM events"+w.sql()+" ORDER BY id DESC"+page, w.args...)
	if err != nil {
		return nil, classify(err)
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Event, error) {
		var e api.Event
		err := r.Scan(&e.ID, &e.Time, &e.Actor, &e.Action, &e.Kind, &e.Key, &e.Details)
		return e, err
	})
	if err != nil {
		return nil, classify(err)
	}
	return events, nil
}
