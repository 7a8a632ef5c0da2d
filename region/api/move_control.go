package api

// An operator's control of a running bulk migration or rack transfer (the workflow's pause,
// resume and set-window Updates) is audited on the move's source region:
//
//	POST /api/v1/move-controls   MoveControl (204; event move-pause, move-resume or move-set-window)
//
// The event's kind is KindMoveControls and its key the move's workflow ID.

// KindMoveControls is the kind of the audit events of operators' move controls; it is no
// CRUD kind (not in Kinds).
const KindMoveControls = "move-controls"

// MoveControl is one operator control a move accepted.
type MoveControl struct {
	Migration string `json:"Migration"`        // workflow ID
	Action    string `json:"Action"`           // "pause", "resume" or "set-window"
	Window    int    `json:"Window,omitempty"` // set-window: the new window
	By        string `json:"By"`               // the operator (whoami of their token)
}
