package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Machine secrets and ad-hoc scripts (region/api/secrets.go). Secret values live only in
// machine_secrets: audit events name the secret, never its value.

func validSecret(name, value string) error {
	switch {
	case name == "":
		return invalidf("secret Name is empty")
	case strings.TrimSpace(name) != name:
		return invalidf("secret Name %q has leading or trailing spaces", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return invalidf("secret Name %q contains control characters", name)
	case strings.IndexByte(value, 0) >= 0:
		return invalidf("secret %s: the value contains a NUL byte", name)
	}
	return nil
}

// secretOp runs fn with the UUID of the machine at key, in a transaction.
func (s *Store) secretOp(ctx context.Context, key string, fn func(tx pgx.Tx, machine string) error) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, key, false)
		if err != nil {
			return err
		}
		return fn(tx, r.obj.Uuid)
	})
}

// SetSecret creates or replaces the secret sec.Name of the machine at key.
func (s *Store) SetSecret(ctx context.Context, by Principal, key string, sec api.Secret) error {
	if err := validSecret(sec.Name, sec.Value); err != nil {
		return err
	}
	return s.secretOp(ctx, key, func(tx pgx.Tx, machine string) error {
		if _, err := tx.Exec(ctx, `INSERT INTO machine_secrets (machine, name, value) VALUES ($1, $2, $3)
			ON CONFLICT (machine, name) DO UPDATE SET value = excluded.value`, machine, sec.Name, sec.Value); err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "set-secret", api.KindMachines, machine, map[string]any{"Secret": sec.Name})
	})
}

// Secret returns the secret name of the machine at key; ErrNotFound when it has none.
func (s *Store) Secret(ctx context.Context, key, name string) (api.Secret, error) {
	sec := api.Secret{Name: name}
	err := s.secretOp(ctx, key, func(tx pgx.Tx, machine string) error {
		err := tx.QueryRow(ctx, "SELECT value FROM machine_secrets WHERE machine = $1 AND name = $2", machine, name).Scan(&sec.Value)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFoundf("machine %s has no secret %q", key, name)
		}
		return err
	})
	if err != nil {
		return api.Secret{}, err
	}
	return sec, nil
}

// DeleteSecret removes the secret name of the machine at key; an absent secret is no error.
func (s *Store) DeleteSecret(ctx context.Context, by Principal, key, name string) error {
	return s.secretOp(ctx, key, func(tx pgx.Tx, machine string) error {
		tag, err := tx.Exec(ctx, "DELETE FROM machine_secrets WHERE machine = $1 AND name = $2", machine, name)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return recordEvent(ctx, tx, by, "delete-secret", api.KindMachines, machine, map[string]any{"Secret": name})
	})
}

// RunAdhoc queues a job that runs req.Script once on the machine at key: a "created" job whose
// Task is "adhoc:<job uuid>", handed to the agent like any other. A migrated stub is ErrConflict.
func (s *Store) RunAdhoc(ctx context.Context, by Principal, key string, req api.AdhocRequest) (api.Job, error) {
	if err := validScript("ad-hoc job", req.Script); err != nil {
		return api.Job{}, err
	}
	if req.TimeoutSeconds < 0 {
		return api.Job{}, invalidf("ad-hoc job TimeoutSeconds %d is negative", req.TimeoutSeconds)
	}
	var j api.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, key, true)
		if err != nil {
			return err
		}
		m := r.obj
		if isStub(m) {
			return conflictf("machine %s (%s) migrated to %s; run the script there", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		}
		id := uuid.NewString()
		meta := map[string]string{MetaAdhocScript: req.Script}
		if req.TimeoutSeconds > 0 {
			meta[MetaAdhocTimeout] = strconv.Itoa(req.TimeoutSeconds)
		}
		j = api.Job{
			Uuid: id, Machine: m.Uuid, State: api.JobCreated, Task: api.AdhocTaskPrefix + id,
			BootEnv: m.BootEnv, Stage: m.Stage, Workflow: m.Workflow, Meta: meta,
		}
		return jobs.create(ctx, tx, by, &j)
	})
	if err != nil {
		return api.Job{}, err
	}
	return j, nil
}
