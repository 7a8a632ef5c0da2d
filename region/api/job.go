package api

import "time"

// Job is one task run on a machine.
type Job struct {
	Archived     bool              `json:"Archived"`
	Available    bool              `json:"Available"`
	BootEnv      string            `json:"BootEnv"`
	Bundle       string            `json:"Bundle"`
	Context      string            `json:"Context"`
	Current      bool              `json:"Current"`
	CurrentIndex int               `json:"CurrentIndex"`
	EndTime      time.Time         `json:"EndTime"`
	Endpoint     string            `json:"Endpoint"`
	Errors       []string          `json:"Errors"`
	ExitState    string            `json:"ExitState"`
	Machine      string            `json:"Machine"`
	Meta         map[string]string `json:"Meta"`
	NextIndex    int               `json:"NextIndex"`
	Previous     string            `json:"Previous"`
	ReadOnly     bool              `json:"ReadOnly"`
	ResultErrors []string          `json:"ResultErrors"`
	Stage        string            `json:"Stage"`
	StartTime    time.Time         `json:"StartTime"`
	State        string            `json:"State"`
	Task         string            `json:"Task"`
	Uuid         string            `json:"Uuid"`
	Validated    bool              `json:"Validated"`
	Workflow     string            `json:"Workflow"`
}

// Job states.
const (
	JobCreated  = "created"
	JobRunning  = "running"
	JobFinished = "finished"
	JobFailed   = "failed"
)

// NilUUID is DRP's "no previous job" marker.
const NilUUID = "00000000-0000-0000-0000-000000000000"

// Normalize replaces nil collections with empty ones (ResultErrors stays null as in DRP).
func (j *Job) Normalize() {
	if j.Errors == nil {
		j.Errors = []string{}
	}
	if j.Meta == nil {
		j.Meta = map[string]string{}
	}
	if j.Previous == "" {
		j.Previous = NilUUID
	}
}

// JobLog is the output of a job, appended in chunks.
type JobLog struct {
	Job  string `json:"Job"`
	Text string `json:"Text"`
}
