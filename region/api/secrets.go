package api

// Machine secrets and ad-hoc scripts, used by migrations that must reach into a machine
// (the ESXi path keeps its temporary SSH private key here, never in workflow history).
//
//	PUT    /api/v1/machines/{key}/secrets/{name}   Secret -> 204       (admin, operator)
//	GET    /api/v1/machines/{key}/secrets/{name}   -> Secret           (admin, operator)
//	DELETE /api/v1/machines/{key}/secrets/{name}   -> 204, also when absent
//	POST   /api/v1/machines/{key}/run              AdhocRequest -> Job (a "created" job the agent runs next)
//
// Secrets are never part of the machine's JSON, of exports or of audit event details (events
// record only the secret's name). They are deleted with the machine.

// Secret is one named secret value of a machine.
type Secret struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

// AdhocRequest asks the machine's agent to run a script once, as a job.
type AdhocRequest struct {
	Script         string `json:"Script"`
	TimeoutSeconds int    `json:"TimeoutSeconds"` // 0 = the agent's default
}

// AdhocTaskPrefix names the Task of ad-hoc jobs ("adhoc:<job uuid>"); their script is kept with the job.
const AdhocTaskPrefix = "adhoc:"
