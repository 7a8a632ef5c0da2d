package api

import "time"

// Syslog through the rack: racks receive the syslog of the machines they serve, attribute
// each message by its source address and post them to their region in batches.
//
//	POST /api/v1/racks/{uuid}/syslog      []SyslogMessage -> SyslogSyncResult (rack tokens
//	     only, for the rack's own UUID; a message is refused on its own, in Rejected, when it
//	     is malformed, holds a control or format character, comes from an address outside
//	     the subnets the rack serves or held by another rack's live lease, names no machine
//	     by MAC, or names a machine the rack does not serve: not behind it (Machine.Rack), its
//	     Address in no subnet the rack serves, no live lease of the rack for the MAC, and held
//	     by another rack in one of these ways)
//	GET  /api/v1/machines/{key}/logs?Since=TIME&After=ID&offset=&limit=
//	     -> []SyslogMessage, oldest first, paged like every list (HeaderNext). Since is an
//	     RFC 3339 time (messages received then or later), After an ID (messages stored after
//	     it: what a follower asks for next). Every field is escaped (syslogmsg.EscapeRecord).

// SyslogMessage is one syslog message of a machine. The rack fills everything but ID and
// Machine, which the region sets when it stores it. Text fields never hold control or format
// characters: the rack escapes them (internal/syslogmsg), the region refuses them and escapes
// what it serves.
type SyslogMessage struct {
	ID       int64     `json:"ID,omitempty"`
	Machine  string    `json:"Machine,omitempty"` // machine UUID
	Rack     string    `json:"Rack,omitempty"`    // the rack that received it
	Addr     string    `json:"Addr"`              // the sender's IP address
	MAC      string    `json:"MAC"`               // the sender's MAC, from the rack's lease or reservation
	Received time.Time `json:"Received"`          // when the rack received it
	Time     time.Time `json:"Time,omitzero"`     // the sender's own timestamp, when it gave one
	Facility int       `json:"Facility"`
	Severity int       `json:"Severity"`
	Hostname string    `json:"Hostname,omitempty"`
	App      string    `json:"App,omitempty"`
	ProcID   string    `json:"ProcID,omitempty"`
	MsgID    string    `json:"MsgID,omitempty"`
	Text     string    `json:"Text"`
}

// Size is the bytes of a message's free-text fields, which MaxMovedSyslogBytes counts.
func (m SyslogMessage) Size() int {
	return len(m.Hostname) + len(m.App) + len(m.ProcID) + len(m.MsgID) + len(m.Text)
}

// SyslogSyncResult says how many messages of a batch the region stored and which it
// refused. A refused message is refused for good: the rack drops it and counts it.
type SyslogSyncResult struct {
	Stored   int               `json:"Stored"`
	Rejected []SyslogRejection `json:"Rejected,omitempty"`
}

// SyslogRejection is one message of a batch the region refused, by its 0-based Index.
type SyslogRejection struct {
	Index  int    `json:"Index"`
	Reason string `json:"Reason"` // invalid, not_served, other_rack, no_machine, other_machine
	Error  string `json:"Error"`
}

// MaxSyslogBatch is the most messages one POST may carry.
const MaxSyslogBatch = 1000
