package api

import "time"

// The machine agent API. The agent authenticates with its machine's credentials:
//
//	Authorization: Bearer machine:<machine-uuid>:<Machine.Secret>
//
// The Secret moves with the machine when it migrates, so the same credentials work on the
// destination. For a migrated stub (Meta.redirect-endpoint set) every call below is answered
// 307 Temporary Redirect, Location = the same path on the destination, body = Redirect.
//
//	POST /api/v1/agent/{uuid}/checkin                 AgentCheckin -> AgentConfig   (records Meta.agent-last-seen / agent-endpoint)
//	GET  /api/v1/agent/{uuid}/next-job?wait=30s       -> 200 AgentJob | 204 when none came within wait (long poll, max 60s)
//	PUT  /api/v1/agent/{uuid}/jobs/{job}/log          text/plain body appended to the job log
//	POST /api/v1/agent/{uuid}/jobs/{job}/exit         AgentJobExit -> Job        (State finished/failed, ExitState, EndTime)
//
// A job is taken by the agent when it is "created" and the machine is Runnable; next-job marks
// it "running" (exactly one agent call gets it), sets StartTime, Current=true and the machine's
// CurrentJob. Its Script comes from the task named by Job.Task (kind "tasks").

// Meta keys the agent API maintains on the machine.
const (
	MetaAgentLastSeen = "agent-last-seen" // RFC 3339 time of the last check-in
	MetaAgentEndpoint = "agent-endpoint"  // the URL the agent used (region or rack proxy)
	MetaAgentVersion  = "agent-version"
)

// KindTasks holds the scripts jobs run.
const KindTasks = "tasks"

// Task is a named script that jobs run on machines.
type Task struct {
	Name           string            `json:"Name"`
	Description    string            `json:"Description"`
	Script         string            `json:"Script"` // run with /bin/sh -c
	TimeoutSeconds int               `json:"TimeoutSeconds"`
	Meta           map[string]string `json:"Meta"`
}

// AgentCheckin is what an agent reports when it starts and after every job.
type AgentCheckin struct {
	Version  string `json:"Version"`
	Hostname string `json:"Hostname"`
	Endpoint string `json:"Endpoint"` // the endpoint URL the agent is configured with
}

// AgentConfig is the region's answer to a check-in.
type AgentConfig struct {
	Machine   string   `json:"Machine"`
	Endpoints []string `json:"Endpoints"` // region (or rack proxy) URLs the agent may use
	PollWait  string   `json:"PollWait"`  // suggested long-poll wait, e.g. "30s"
}

// AgentJob is a job handed to an agent, with the script to run.
type AgentJob struct {
	Job     Job           `json:"Job"`
	Script  string        `json:"Script"`
	Timeout time.Duration `json:"Timeout"`
}

// AgentJobExit reports how a job ended.
type AgentJobExit struct {
	ExitCode  int    `json:"ExitCode"`
	ExitState string `json:"ExitState"` // "complete", "failed", "timeout"
}
