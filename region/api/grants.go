package api

import (
	"strings"
	"time"
)

// Migrate grants: who may start a move. The source region of a move issues
// a grant to a caller with the operator or admin role; the grant names what may move (one
// machine, every machine of one rack, or the machines of a bulk selector), the target region,
// and who asked. Workflows carry the grant in their input and have the source verify it
// before they change anything. A grant is signed with the region cluster's ticket key,
// short-lived by default, recorded so it can be revoked, and carries no secret: it authorises
// a move to one target, not a call to any region.
//
//	POST   /api/v1/migrate-grants          GrantRequest -> Grant  (source region; admin, operator)
//	POST   /api/v1/migrate-grants/verify   GrantCheck -> GrantClaims (source region; any user token;
//	                                       401 forged/expired/revoked, 403 when it does not cover the move)
//	DELETE /api/v1/migrate-grants/{id}     revoke (admin, operator)
//	GET    /api/v1/whoami                  -> Whoami (any token)

// Grant kinds: what a grant lets move.
const (
	GrantMachine = "machine" // one machine
	GrantRack    = "rack"    // the rack transfer of one rack, and the machines in it
	GrantBulk    = "bulk"    // a bulk migration, and the machines its selector matches
	// GrantPod authorises operations on one KVM pod of the issuing region (refresh, compose,
	// decompose, power of its VMs); it has no TargetRegion.
	GrantPod = "pod"
	// GrantPower authorises power actions on one machine of the issuing region (through its
	// rack); it has no TargetRegion and is refused while a migration holds the machine.
	GrantPower = "power"
)

// DefaultGrantTTL is the validity of a grant when the request does not say: long enough to
// start a move, short enough that a leaked grant is soon worthless.
const DefaultGrantTTL = 15 * time.Minute

// MaxGrantTTL bounds grants; long ones are for schedules, revoked with them.
const MaxGrantTTL = 366 * 24 * time.Hour

// GrantRequest asks the source region for a grant.
type GrantRequest struct {
	Kind         string        `json:"Kind"`         // GrantMachine, GrantRack or GrantBulk
	Key          string        `json:"Key"`          // machine, rack or pod key (machine, rack, pod); "" for bulk
	Selector     GrantSelector `json:"Selector"`     // bulk only
	TargetRegion string        `json:"TargetRegion"` // name of the region the move goes to; "" for a pod
	TTL          time.Duration `json:"TTL"`          // 0: DefaultGrantTTL
}

// GrantSelector is the bulk selector a grant covers: every machine of Pool and/or Rack, or
// the machines Names lists (the same rules as the bulk migration's selector).
type GrantSelector struct {
	Pool  string   `json:"Pool,omitempty"`
	Rack  string   `json:"Rack,omitempty"` // rack UUID
	Names []string `json:"Names,omitempty"`
}

// String describes the selector in messages and audit events.
func (s GrantSelector) String() string {
	return "pool=" + s.Pool + " rack=" + s.Rack + " names=" + strings.Join(s.Names, ",")
}

// GrantClaims is what a grant says; the verify call answers with it.
type GrantClaims struct {
	ID           string        `json:"jti"`
	Region       string        `json:"region"` // the source region that issued it
	Endpoint     string        `json:"endpoint"`
	Scope        string        `json:"scope"` // "migrate-grant": never an import ticket
	Expires      int64         `json:"exp"`   // unix seconds
	Kind         string        `json:"kind"`
	Subject      string        `json:"subject"` // machine or rack UUID; "" for bulk
	Selector     GrantSelector `json:"selector"`
	TargetRegion string        `json:"target"`
	GrantedTo    string        `json:"sub"` // the user whose token asked for it
}

// Grant is an issued grant; Token is what workflow inputs carry as "Grant".
type Grant struct {
	GrantClaims
	Token string `json:"Token"`
}

// GrantCheck asks the source region whether a grant covers a move.
type GrantCheck struct {
	Grant        string `json:"Grant"`
	TargetRegion string `json:"TargetRegion"`
	Kind         string `json:"Kind"` // what is moving: GrantMachine, GrantRack or GrantBulk
	Key          string `json:"Key"`  // the machine or rack key; "" for bulk
	// Migration is the workflow that checks; recorded with the StartedBy in the audit log.
	Migration string `json:"Migration"`
	// Move is the root workflow of the move Migration is a child of (a transfer, a bulk run);
	// "" when Migration is the root. A grant that expired after the root's own check passed
	// still covers the root's children: a move a grant let start may finish, however long it
	// runs or stays paused. Revoking the grant stops it.
	Move string `json:"Move,omitempty"`
	// MoveRun is the first run of Move's run chain (continue-as-new keeps it), or for a root's
	// own check the run that checks: what tells the move the grant let start from a later one
	// under the same workflow ID.
	MoveRun string `json:"MoveRun,omitempty"`
}

// Whoami is the caller as the region sees it.
type Whoami struct {
	User string `json:"User"`
	Role string `json:"Role"`
}
