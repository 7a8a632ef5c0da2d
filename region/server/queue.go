package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironflow/ironflow/internal/jsonfields"
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

// isMoveCall says whether r is a call of a move, marked so by an admin: the workers'
// regions-file tokens are admin's, and an operator's mark is ignored, so an operator cannot
// pass for the move.
func isMoveCall(r *http.Request, c *call) bool {
	return r.Header.Get(api.HeaderMove) != "" && c.by.Role == api.RoleAdmin
}

// isMoveWrite says whether r is a write of the move that holds the rack: a move's call, or a
// DELETE naming the migration, which the delete itself then checks (store.ForMigration).
func isMoveWrite(r *http.Request, c *call) bool {
	return isMoveCall(r, c) || r.Method == http.MethodDelete && r.URL.Query().Has(paramMigration)
}

// holdWrite queues the write r to kind k when it touches a paused rack, answering 202, and
// reports whether it did. A write it does not queue goes on to the handler h with its body
// intact. A write it would queue is first run as a dry run, so what h refuses now (a bad body,
// a missing object, a conflict) is answered now instead. The queued write records the
// authenticated caller (the operation's QueuedBy and QueuedRole) and, for a PUT or PATCH, the
// fields it sets as they are now (WriteRequest.Base).
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
	write, err := s.writeOf(r.Context(), k, r, body)
	if err != nil {
		return false, err
	}
	rack, held, err := s.st.PausedRack(r.Context(), write.rackRefs())
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
	req := api.WriteRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(body)}
	if req.Base, err = s.baseOf(r.Context(), rack.Uuid, write); err != nil {
		return false, err
	}
	payload, err := toPayload(req)
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

// objectWrite is what a write to kind k touches: the object now at its key (cur, nil for a
// create or when there is none: the handler answers that) and, for a write of the kind's own
// routes, the object as the handler would store it (next: the body decoded as the handler
// decodes it, case-insensitive keys included, merged onto cur for a PATCH; nil for a DELETE
// and for the routes whose body is no object of the kind, a machine's secrets and scripts).
type objectWrite struct {
	k         kind
	cur, next any
	fields    []string // the top-level fields of next the write sets (PUT, PATCH)
}

// writeOf decodes the write r with body to kind k.
func (s *Server) writeOf(ctx context.Context, k kind, r *http.Request, body []byte) (objectWrite, error) {
	ow := objectWrite{k: k}
	if key := r.PathValue("key"); key != "" {
		cur := k.newObj()
		switch err := s.st.Get(ctx, k.name, key, cur); {
		case err == nil:
			ow.cur = cur
		case !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid):
			return ow, err
		}
	}
	generic := r.Pattern == r.Method+" "+api.PathPrefix+"/"+k.name || r.Pattern == r.Method+" "+api.PathPrefix+"/"+k.name+"/{key}"
	if !generic || r.Method == http.MethodDelete {
		return ow, nil
	}
	// A body the handler refuses ties to nothing here: the dry run answers it.
	next, fields, ok := applyWrite(k, r.Method, ow.cur, body)
	if ok {
		ow.next, ow.fields = next, fields
	}
	return ow, nil
}

// applyWrite is the object a POST, PUT or PATCH with body leaves of cur (nil for a create),
// decoded as the kind's handlers decode it, and the top-level fields the write sets; false
// when the body is no object of the kind.
func applyWrite(k kind, method string, cur any, body []byte) (any, []string, bool) {
	next := k.newObj()
	fields := jsonfields.Of(reflect.TypeOf(next).Elem())
	if method != http.MethodPatch {
		if json.Unmarshal(body, next) != nil {
			return nil, nil, false
		}
		return next, jsonfields.Names(fields), true
	}
	var patch map[string]any
	if cur == nil || json.Unmarshal(body, &patch) != nil {
		return nil, nil, false
	}
	merged, err := applyMergePatch(cur, patch)
	if err != nil || json.Unmarshal(merged, next) != nil {
		return nil, nil, false
	}
	var set []string
	for key := range patch {
		if f, ok := jsonfields.Lookup(fields, key); ok && !slices.Contains(set, f.Name) {
			set = append(set, f.Name)
		}
	}
	return next, set, true
}

// rackRefs collects what ties the write to racks: the fields of rackTies in the object now and
// in the object the write leaves, as decoded, never the raw JSON keys of its body.
func (ow objectWrite) rackRefs() store.RackRefs {
	var refs store.RackRefs
	for _, obj := range []any{ow.cur, ow.next} {
		if obj == nil {
			continue
		}
		for _, t := range rackTies[ow.k.name] {
			*t.ref(&refs) = append(*t.ref(&refs), stringField(obj, t.field))
		}
	}
	return refs
}

// baseOf fingerprints the fields the PUT or PATCH ow sets as its object will be when its
// replay comes: as now, after the writes queued before it on the rack for the same object
// (nil for other writes).
func (s *Server) baseOf(ctx context.Context, rackUUID string, ow objectWrite) (map[string]string, error) {
	if ow.cur == nil || len(ow.fields) == 0 {
		return nil, nil
	}
	ahead, err := s.st.UnsettledWritesFor(ctx, rackUUID)
	if err != nil {
		return nil, err
	}
	projected, id := ow.cur, stableKey(ow.cur, "")
	for _, op := range ahead {
		req, err := writeRequestOf(op)
		if err != nil {
			continue
		}
		k, key, ok := objectAt(req.Path)
		if !ok || k.name != ow.k.name || key != id && !s.sameObject(ctx, k, key, id) {
			continue
		}
		if req.Method == http.MethodDelete {
			return nil, nil // the write will find no object, and be refused then
		}
		if next, _, ok := applyWrite(k, req.Method, projected, []byte(req.Body)); ok {
			projected = next
		}
	}
	return store.Fingerprints(projected, ow.fields)
}

// sameObject says whether key of kind k addresses the object whose stable key is id.
func (s *Server) sameObject(ctx context.Context, k kind, key, id string) bool {
	obj := k.newObj()
	return s.st.Get(ctx, k.name, key, obj) == nil && stableKey(obj, "") == id
}

// objectAt returns the kind and key of a path of a kind's item route, false for any other.
func objectAt(escapedPath string) (kind, string, bool) {
	rest, ok := strings.CutPrefix(escapedPath, api.PathPrefix+"/")
	name, escapedKey, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || strings.Contains(escapedKey, "/") {
		return kind{}, "", false
	}
	key, err := url.PathUnescape(escapedKey)
	for _, k := range kinds {
		if k.name == name && err == nil {
			return k, key, true
		}
	}
	return kind{}, "", false
}

// hideQueuedBodies drops the bodies of queued writes, and the fingerprints of the values
// they overwrite, for callers that may not read secrets: a body may carry one (a machine's
// Secret).
func hideQueuedBodies(c *call, ops []api.PendingOperation) {
	if mayReadSecrets(c.by.Role) {
		return
	}
	for _, op := range ops {
		if op.Kind == api.OperationWrite {
			delete(op.Payload, "Body")
			delete(op.Payload, "Base")
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

// writeRequestOf reads the queued write of op.
func writeRequestOf(op api.PendingOperation) (api.WriteRequest, error) {
	var req api.WriteRequest
	doc, err := json.Marshal(op.Payload)
	if err == nil {
		err = json.Unmarshal(doc, &req)
	}
	if err != nil {
		return req, fmt.Errorf("payload is not a queued write: %w", err)
	}
	return req, nil
}

// replayWrites replays the rack's queued writes that are due here (store.UnsettledWrites), in
// order, through the routes, so each is checked as any other (and queued again should it
// touch another paused rack): as its caller, as this region knows that user now
// (store.Caller). Each is applied at least once, counting replays cut short, and at most once
// (store.Replaying). A write that fails is settled with its error and audited; the others
// still run. It goes on when the request that ended the pause is cancelled; a retried
// request waits for it (store.SerialReplay), then replays what is left.
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
			rp, outcome := s.replayWrite(ctx, op)
			if err := s.st.SettleWrite(ctx, rp, outcome); err != nil {
				return fmt.Errorf("settle queued write %d: %w", op.ID, err)
			}
			if outcome != api.OutcomeApplied && !rp.Earlier {
				s.log.Warn("queued write failed on replay", "rack", rackUUID, "operation", op.ID, "outcome", outcome)
			}
		}
		return nil
	})
}

// replayLeftWrites replays the writes of the racks whose replay was cut short after their
// pause ended (the region stopped mid-replay, and nothing ended the pause again since): each
// region process does at start, so that no write waits for another pause to end.
func (s *Server) replayLeftWrites(ctx context.Context) {
	racks, err := s.st.RacksWithLeftWrites(ctx)
	if err != nil {
		s.log.Warn("cannot list the queued writes left unreplayed", "error", err)
		return
	}
	for _, rack := range racks {
		if err := s.replayWrites(ctx, rack); err != nil {
			s.log.Warn("cannot replay the queued writes left unreplayed", "rack", rack, "error", err)
		}
	}
}

// replayWrite runs the queued write op and returns its replay and outcome.
func (s *Server) replayWrite(ctx context.Context, op api.PendingOperation) (*store.Replay, string) {
	queuedBy := store.Principal{User: op.QueuedBy, Role: op.QueuedRole}
	req, err := writeRequestOf(op)
	details := map[string]any{"Method": req.Method, "Path": req.Path, "QueuedBy": op.QueuedBy}
	var base *store.ObjectBase
	if k, key, ok := objectAt(req.Path); ok && len(req.Base) > 0 {
		base = &store.ObjectBase{Kind: k.name, Key: key, Fields: req.Base}
	}
	ctx, rp := store.Replaying(ctx, op, queuedBy, details, base)
	if err != nil {
		return rp, err.Error()
	}
	by, err := s.st.Caller(ctx, queuedBy)
	if err != nil {
		return rp, failure(err)
	}
	target := req.Path
	if req.Query != "" {
		target += "?" + req.Query
	}
	hr, err := http.NewRequestWithContext(withReplay(ctx, by), req.Method, target, strings.NewReader(req.Body))
	if err != nil {
		return rp, "request cannot be made again: " + err.Error()
	}
	hr.Header.Set("Content-Type", "application/json")
	answer := &answerRecorder{}
	s.mux.ServeHTTP(answer, hr)
	details["Code"] = answer.code
	switch {
	case answer.code == http.StatusAccepted:
		var q api.QueuedWrite
		_ = json.Unmarshal(answer.body.Bytes(), &q)
		return rp, fmt.Sprintf("queued again as operation %d: rack %s is paused", q.Operation.ID, q.RackName)
	case answer.code >= 200 && answer.code < 300:
		return rp, api.OutcomeApplied
	}
	var refusal api.Error
	if json.Unmarshal(answer.body.Bytes(), &refusal) != nil || refusal.Error == "" {
		refusal.Error = strings.TrimSpace(answer.body.String())
	}
	return rp, fmt.Sprintf("%d %s: %s", answer.code, http.StatusText(answer.code), refusal.Error)
}

// failure is the outcome of a write refused before it ran.
func failure(err error) string {
	code := statusOf(err)
	return fmt.Sprintf("%d %s: %s", code, http.StatusText(code), err.Error())
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
