package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// Writes that touch a paused rack wait for its pause to end (region/api/queue.go): the
// generic kind routes queue them as the rack's pending operations, and the end of the pause
// replays them here, on the region that then owns the rack.

// replayTimeout bounds the replay of one rack's queued writes.
const replayTimeout = 5 * time.Minute

// rackTie is a field of an object that ties a write to it to a rack.
type rackTie struct {
	field string
	ref   func(*store.RackRefs) *[]string
}

func tieRack(field string) rackTie {
	return rackTie{field, func(r *store.RackRefs) *[]string { return &r.Racks }}
}

// rackTies lists, per kind, what ties its objects to a rack; writes to other kinds
// (fabrics included: one may carry several racks' VLANs) are never queued.
var rackTies = map[string][]rackTie{
	api.KindRacks:    {tieRack("Uuid")},
	api.KindMachines: {tieRack("Rack")},
	api.KindPods:     {tieRack("Rack")},
	api.KindVLANs:    {tieRack("PrimaryRack"), tieRack("SecondaryRack")},
	api.KindJobs:     {{"Machine", func(r *store.RackRefs) *[]string { return &r.Machines }}},
	api.KindSubnets:  {{"VLAN", func(r *store.RackRefs) *[]string { return &r.VLANs }}},
	api.KindLeases:   {{"Subnet", func(r *store.RackRefs) *[]string { return &r.Subnets }}},
}

// isMoveWrite says whether r is a write of the move that holds the rack: marked so by an admin
// (the workers' regions-file tokens are admin's; an operator's mark is ignored, so an operator
// cannot write past a transfer), or a DELETE naming the migration, which the delete itself
// then checks (store.ForMigration).
func isMoveWrite(r *http.Request, c *call) bool {
	if r.Header.Get(api.HeaderMove) != "" && c.by.Role == api.RoleAdmin {
		return true
	}
	return r.Method == http.MethodDelete && r.URL.Query().Has(paramMigration)
}

// holdWrite queues the write r to kind k when it touches a paused rack, answering 202, and
// reports whether it did. A write it does not queue goes on to the handler h with its body
// intact. A write it would queue is first run as a dry run, so what h refuses now (a bad body,
// a missing object, a conflict) is answered now instead.
func (s *Server) holdWrite(w http.ResponseWriter, r *http.Request, c *call, k kind, h handlerFunc) (bool, error) {
	if isMoveWrite(r, c) || len(rackTies[k.name]) == 0 {
		return false, nil // the move's own writes (it holds the rack), or a kind no rack ties
	}
	if paused, err := s.st.AnyRackPaused(r.Context()); err != nil || !paused {
		return false, err // the usual case: no rack is moving, nothing to look up
	}
	body, err := readBody(w, r)
	if err != nil {
		return false, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body)) // for the handler, or its dry run
	refs, err := s.rackRefs(r.Context(), k, r.PathValue("key"), body)
	if err != nil {
		return false, err
	}
	rack, held, err := s.st.PausedRack(r.Context(), refs)
	if err != nil || !held {
		return false, err
	}
	if len(body) > api.MaxQueuedWriteBody {
		return false, errorf(http.StatusRequestEntityTooLarge, "rack %s is paused, and a write queued until its pause ends may have a body of at most %d bytes, not %d",
			rack.Name, api.MaxQueuedWriteBody, len(body))
	}
	if err := h(&answerRecorder{}, r.WithContext(store.DryRun(r.Context())), c); err != nil && !errors.Is(err, store.ErrDryRun) {
		return false, err
	}
	payload, err := toPayload(api.WriteRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(body), User: c.by.User, Role: c.by.Role})
	if err != nil {
		return false, err
	}
	op := api.PendingOperation{Target: rack.Uuid, Kind: api.OperationWrite, Payload: payload}
	if err := s.st.QueueRackOperation(r.Context(), c.by, rack.Uuid, &op); err != nil {
		return false, err
	}
	w.Header().Set("Location", api.PathPrefix+"/"+api.KindRacks+"/"+rack.Uuid+"/operations/"+strconv.FormatInt(op.ID, 10))
	writeJSON(w, http.StatusAccepted, api.QueuedWrite{Operation: op, Rack: rack.Uuid, RackName: rack.Name, Transfer: api.RackHoldOf(rack)})
	return true, nil
}

// rackRefs collects what ties a write to kind k to racks: the object now at key (none for a
// create, or when there is no such object: the handler answers that) and the body.
func (s *Server) rackRefs(ctx context.Context, k kind, key string, body []byte) (store.RackRefs, error) {
	var refs store.RackRefs
	ties := rackTies[k.name]
	if key != "" {
		cur := k.newObj()
		err := s.st.Get(ctx, k.name, key, cur)
		switch {
		case err == nil:
			for _, t := range ties {
				*t.ref(&refs) = append(*t.ref(&refs), stringField(cur, t.field))
			}
		case !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid):
			return refs, err
		}
	}
	var fields map[string]any
	if json.Unmarshal(body, &fields) == nil { // a body that is no object is the handler's to refuse
		for _, t := range ties {
			if v, ok := fields[t.field].(string); ok {
				*t.ref(&refs) = append(*t.ref(&refs), v)
			}
		}
	}
	return refs, nil
}

// hideQueuedBodies drops the bodies of queued writes for callers that may not read secrets:
// a body may carry one (a machine's Secret).
func hideQueuedBodies(c *call, ops []api.PendingOperation) {
	if mayReadSecrets(c.by.Role) {
		return
	}
	for _, op := range ops {
		if op.Kind == api.OperationWrite {
			delete(op.Payload, "Body")
		}
	}
}

// toPayload turns a WriteRequest into a PendingOperation's Payload.
func toPayload(req api.WriteRequest) (map[string]any, error) {
	doc, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode queued write: %w", err)
	}
	var payload map[string]any
	if err := json.Unmarshal(doc, &payload); err != nil {
		return nil, fmt.Errorf("decode queued write: %w", err)
	}
	return payload, nil
}

// replayWrites replays the rack's queued writes that are due here (store.UnsettledWrites), in
// order, each once and as its caller: through the routes, so the write is checked as any
// other (and queued again should it touch another paused rack). A write that fails is
// settled with its error and audited; the others still run. It goes on when the request
// that ended the pause is cancelled; a retried request waits for it (store.SerialReplay),
// then replays what is left.
func (s *Server) replayWrites(ctx context.Context, rackUUID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replayTimeout)
	defer cancel()
	return s.st.SerialReplay(ctx, rackUUID, func() error {
		ops, err := s.st.UnsettledWrites(ctx, rackUUID)
		if err != nil {
			return fmt.Errorf("list queued writes of rack %s: %w", rackUUID, err)
		}
		for _, op := range ops {
			claimed, err := s.st.ClaimWrite(ctx, op.ID)
			if err != nil {
				return fmt.Errorf("claim queued write %d: %w", op.ID, err)
			}
			if !claimed {
				continue // settled by an earlier replay
			}
			by, outcome, details := s.replayWrite(ctx, op)
			if err := s.st.SettleWrite(ctx, by, op, outcome, details); err != nil {
				return fmt.Errorf("settle queued write %d: %w", op.ID, err)
			}
			if outcome != api.OutcomeApplied {
				s.log.Warn("queued write failed on replay", "rack", rackUUID, "operation", op.ID, "outcome", outcome)
			}
		}
		return nil
	})
}

// replayWrite runs the queued write op and returns who made it, its outcome and the audit
// details.
func (s *Server) replayWrite(ctx context.Context, op api.PendingOperation) (store.Principal, string, map[string]any) {
	var req api.WriteRequest
	doc, err := json.Marshal(op.Payload)
	if err == nil {
		err = json.Unmarshal(doc, &req)
	}
	by := store.Principal{User: req.User, Role: req.Role}
	if err != nil {
		return by, "payload is not a queued write: " + err.Error(), map[string]any{}
	}
	details := map[string]any{"Method": req.Method, "Path": req.Path}
	target := req.Path
	if req.Query != "" {
		target += "?" + req.Query
	}
	hr, err := http.NewRequestWithContext(withReplay(ctx, by), req.Method, target, strings.NewReader(req.Body))
	if err != nil {
		return by, "request cannot be made again: " + err.Error(), details
	}
	hr.Header.Set("Content-Type", "application/json")
	answer := &answerRecorder{}
	s.mux.ServeHTTP(answer, hr)
	details["Code"] = answer.code
	switch {
	case answer.code == http.StatusAccepted:
		var q api.QueuedWrite
		_ = json.Unmarshal(answer.body.Bytes(), &q)
		return by, fmt.Sprintf("queued again as operation %d: rack %s is paused", q.Operation.ID, q.RackName), details
	case answer.code >= 200 && answer.code < 300:
		return by, api.OutcomeApplied, details
	}
	var failure api.Error
	if json.Unmarshal(answer.body.Bytes(), &failure) != nil || failure.Error == "" {
		failure.Error = strings.TrimSpace(answer.body.String())
	}
	return by, fmt.Sprintf("%d %s: %s", answer.code, http.StatusText(answer.code), failure.Error), details
}

type replayKey struct{}

// withReplay marks ctx as the replay of a write queued by by, who was authenticated then.
func withReplay(ctx context.Context, by store.Principal) context.Context {
	return context.WithValue(ctx, replayKey{}, by)
}

func replayedBy(ctx context.Context) (store.Principal, bool) {
	by, ok := ctx.Value(replayKey{}).(store.Principal)
	return by, ok
}

// answerRecorder keeps an answer made inside the server: a dry run's or a replay's.
type answerRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *answerRecorder) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}
