package store

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

var jobStates = []string{api.JobCreated, api.JobRunning, api.JobFinished, api.JobFailed}

var jobs = newKind(kind[api.Job]{
	name: api.KindJobs, noun: "job", table: "jobs",
	self:    func(j *api.Job) *string { return &j.Uuid },
	genUUID: true, bare: "uuid",
	keys: map[string]string{
		"Uuid":    "uuid = $1::uuid",
		"Machine": "machine = $1::uuid",
	},
	norm:  map[string]func(string) (string, error){"Uuid": normUUID, "Machine": normUUID},
	order: "start_time, uuid",
	columns: func(j *api.Job) []column {
		return []column{{"uuid", j.Uuid}, {"machine", j.Machine}, {"start_time", j.StartTime}}
	},
	prepare: func(j, _ *api.Job) {
		if j.State == "" {
			j.State = api.JobCreated
		}
	},
	validate: func(j *api.Job) error {
		if err := canonUUID("job", "Machine", &j.Machine, false); err != nil {
			return err
		}
		if err := canonUUID("job", "Previous", &j.Previous, false); err != nil {
			return err
		}
		if !slices.Contains(jobStates, j.State) {
			return invalidf("job State %q is not one of %v", j.State, jobStates)
		}
		return nil
	},
})

// AppendJobLog appends text to the log of a job.
func (s *Store) AppendJobLog(ctx context.Context, by Principal, jobKey, text string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		j, err := jobs.resolve(ctx, tx, jobKey, false)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO job_logs (job, text) VALUES ($1, $2)
			ON CONFLICT (job) DO UPDATE SET text = job_logs.text || excluded.text`, j.obj.Uuid, text); err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "append-log", api.KindJobs, j.obj.Uuid, map[string]any{"Bytes": len(text)})
	})
}

// JobLog returns the whole log of a job ("" when nothing was appended yet).
func (s *Store) JobLog(ctx context.Context, jobKey string) (string, error) {
	j, err := jobs.resolve(ctx, s.pool, jobKey, false)
	if err != nil {
		return "", classify(err)
	}
	var text string
	err = s.pool.QueryRow(ctx, "SELECT text FROM job_logs WHERE job = $1", j.obj.Uuid).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return text, classify(err)
}
