package api

import "time"

// Migration endpoints (issue "migrate-machine"). The workflow never carries a Bundle in its
// payloads: one activity exports from the source and imports into the destination, and the
// source keeps its own snapshot (taken at quiesce) to restore from.
//
//	POST /api/v1/migrate-tickets                      TicketRequest -> Ticket   (on the destination)
//	POST /api/v1/machines/{key}/quiesce               QuiesceRequest -> Machine (source: Runnable=false, Meta.migrating, snapshot saved)
//	POST /api/v1/machines/{key}/unquiesce             -> Machine  (source: restore Runnable/Meta from the snapshot; compensation)
//	GET  /api/v1/machines/{key}/export                -> Bundle   (source)
//	POST /api/v1/machines/import                      ImportRequest -> Machine (destination; authorised by the ticket in
//	                                                  TicketHeader; idempotent by Uuid; arrives inactive)
//	POST /api/v1/machines/{key}/finalize-migration    FinalizeRequest -> Machine (source: the locked stub of the seed)
//	POST /api/v1/machines/{key}/restore-migration     -> Machine  (source: undo finalize from the snapshot; compensation)
//	POST /api/v1/machines/{key}/activate              -> Machine  (destination: Runnable=true, Available=true)
//	DELETE /api/v1/machines/{key}?migration=ID        (destination compensation of import; source stub removal;
//	                                                  a machine held by migration ID is refused with 409 without it)
//
// Calls for a stubbed machine (Meta.redirect-endpoint set) on the agent API are answered
// 307 with Location on the destination and the JSON body Redirect.

// TicketRequest asks a destination region for a migrate ticket.
type TicketRequest struct {
	TTL time.Duration `json:"TTL"` // 0 means the default of one hour
}

// Ticket authorises exactly one import into the region that minted it.
// Its Token is "<base64url claims>.<base64url HMAC-SHA256>"; String() is what the CLI prints.
type Ticket struct {
	Endpoint string    `json:"Endpoint"` // public URL of the destination region
	Region   string    `json:"Region"`   // destination region name
	ID       string    `json:"ID"`       // jti, single use
	Expires  time.Time `json:"Expires"`
	Token    string    `json:"Token"`
}

// Bundle is everything that moves with a machine.
type Bundle struct {
	Machine  Machine           `json:"Machine"`
	Jobs     []Job             `json:"Jobs"`
	JobLogs  map[string]string `json:"JobLogs"` // job UUID -> log text
	Profiles []Profile         `json:"Profiles"`
	// Syslog is the machine's newest syslog messages, oldest first: at most MaxMovedSyslog
	// messages and MaxMovedSyslogBytes bytes of their fields (SyslogMessage.Size).
	Syslog []MovedSyslogMessage `json:"Syslog,omitempty"`
}

// The syslog that moves with a machine is its newest messages within both bounds; older ones
// stay on the source until its retention drops them. An import carrying more is refused.
const (
	MaxMovedSyslog      = 10000
	MaxMovedSyslogBytes = 4 << 20
)

// MovedSyslogMessage is a syslog message moving with its machine. Origin is the identity the
// message got on the region that first stored it and keeps on every region it moves to, so a
// region stores it once for the machine however often it is imported; Stored is when that
// region stored it, from which every region's retention counts its age.
type MovedSyslogMessage struct {
	Origin string    `json:"Origin"`
	Stored time.Time `json:"Stored"`
	SyslogMessage
}

// QuiesceRequest names the migration that holds the machine.
type QuiesceRequest struct {
	Migration string `json:"Migration"` // workflow ID, stored in Meta.migrating
}

// TicketHeader carries the migrate ticket of POST /machines/import. The region verifies it
// before it reads the body, so an unauthorised import costs it no more than its headers.
const TicketHeader = "X-Ironflow-Ticket"

// ImportRequest carries a bundle and the ticket that authorises it. The ticket travels in
// TicketHeader, never in the body.
type ImportRequest struct {
	Ticket string `json:"-"`
	Bundle Bundle `json:"Bundle"`
	// Migration is the workflow ID the import belongs to; it holds the inactive copy against
	// deletion until the machine is activated (DELETE ...?migration= releases it).
	Migration string `json:"Migration,omitempty"`
	// StartedBy is who started the move (the grant's user), for the audit log.
	StartedBy string `json:"StartedBy,omitempty"`
}

// FinalizeRequest turns the source record into a stub that redirects to the destination.
type FinalizeRequest struct {
	RedirectEndpoint string `json:"RedirectEndpoint"`
}

// RedirectCopyRequest turns an inactive imported copy into a stub redirecting to the source.
type RedirectCopyRequest struct {
	RedirectEndpoint string `json:"RedirectEndpoint"`
	// Migration is the workflow ID undoing its import: the import's migration holds the copy
	// (as against DELETE without ?migration=), and only it may undo the copy.
	Migration string `json:"Migration,omitempty"`
}

// Redirect is the body of a 307 answer for a migrated machine.
type Redirect struct {
	Endpoint string `json:"Endpoint"`
	Machine  string `json:"Machine"`
}
