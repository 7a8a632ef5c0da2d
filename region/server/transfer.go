package server

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
)

// resRackTransfer is moving racks between regions and their queue of pending operations:
// operators and admins; readonly tokens may read; rack and machine tokens may not.
const resRackTransfer = "racktransfer"

// maxRackBundle bounds a rack bundle: its network, pods and every lease of its subnets.
const maxRackBundle = 64 << 20

// maxRelease bounds a release of a rack's queue: what one rack's queue holds (api.MaxQueuedBytes
// of payload, escaped in JSON at most six times over, and api.MaxQueuedOperations operations'
// own fields).
const maxRelease = 8 * api.MaxQueuedBytes

// maxOperation bounds the body of an operation queued explicitly, as a queued write's.
const maxOperation = api.MaxQueuedWriteBody + 4<<10

// transferRoutes registers the rack transfer endpoints (region/api/transfer.go).
func (s *Server) transferRoutes() {
	coll := api.PathPrefix + "/" + api.KindRacks
	item := coll + "/{uuid}"
	s.handle(route{pattern: "POST " + item + "/pause", resource: resRackTransfer, write: true, h: s.pauseRack})
	s.handle(route{pattern: "POST " + item + "/unpause", resource: resRackTransfer, write: true, h: s.unpauseRack})
	s.handle(route{pattern: "GET " + item + "/export", resource: resRackTransfer, h: s.exportRack})
	s.handle(route{pattern: "POST " + coll + "/import/check", resource: resRackTransfer, h: s.checkRackImport})
	s.handle(route{pattern: "POST " + coll + "/import", resource: resRackTransfer, write: true, h: s.importRack})
	s.handle(route{pattern: "DELETE " + item + "/import", resource: resRackTransfer, write: true, h: s.undoRackImport})
	s.handle(route{pattern: "POST " + item + "/hand-over", resource: resRackTransfer, write: true, h: s.handOverRack})
	s.handle(route{pattern: "GET " + item + "/operations", resource: resRackTransfer, h: s.rackOperations})
	s.handle(route{pattern: "GET " + item + "/operations/{id}", resource: resRackTransfer, h: s.rackOperation})
	s.handle(route{pattern: "POST " + item + "/operations", resource: resRackTransfer, write: true, h: s.queueRackOperation})
	s.handle(route{pattern: "POST " + item + "/operations/release", resource: resRackTransfer, write: true, h: s.releaseRackOperations})
	s.handle(route{pattern: "POST " + item + "/recover", resource: resRackTransfer, write: true, h: s.recoverRackTransfer})
}

// unpauseRack ends the rack's pause, then replays the writes queued for it that are due
// here (queue.go).
func (s *Server) unpauseRack(w http.ResponseWriter, r *http.Request, c *call) error {
	rack, err := s.st.UnpauseRack(r.Context(), c.by, r.PathValue("uuid"))
	if err != nil {
		return err
	}
	if err := s.replayWrites(r.Context(), rack.Uuid); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rack)
	return nil
}

// pauseRack pauses the rack for the transfer run its optional RackHold body names.
func (s *Server) pauseRack(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var hold api.RackHold
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeStrict(body, &hold); err != nil {
			return err
		}
	}
	rack, err := s.st.PauseRack(r.Context(), c.by, r.PathValue("uuid"), hold)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rack)
	return nil
}

func (s *Server) recoverRackTransfer(w http.ResponseWriter, r *http.Request, c *call) error {
	var rec api.RackRecovery
	if err := decodeBody(w, r, &rec); err != nil {
		return err
	}
	res, err := s.st.RecoverRackTransfer(r.Context(), c.by, r.PathValue("uuid"), rec)
	if err != nil {
		return err
	}
	if rec.Action == api.RecoverUnpause {
		if err := s.replayWrites(r.Context(), r.PathValue("uuid")); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) exportRack(w http.ResponseWriter, r *http.Request, _ *call) error {
	b, err := s.st.ExportRack(r.Context(), r.PathValue("uuid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (s *Server) checkRackImport(w http.ResponseWriter, r *http.Request, _ *call) error {
	var b api.RackBundle
	if err := decodeBodyUpTo(w, r, &b, maxRackBundle); err != nil {
		return err
	}
	res, err := s.st.CheckRackImport(r.Context(), b)
	if err != nil {
		return err
	}
	if res.Conflicts == nil {
		res.Conflicts = []string{}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) importRack(w http.ResponseWriter, r *http.Request, c *call) error {
	var b api.RackBundle
	if err := decodeBodyUpTo(w, r, &b, maxRackBundle); err != nil {
		return err
	}
	res, err := s.st.ImportRack(r.Context(), c.by, b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) undoRackImport(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.st.UndoRackImport(r.Context(), c.by, r.PathValue("uuid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handOverRack(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.st.HandOverRack(r.Context(), c.by, r.PathValue("uuid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rackOperations(w http.ResponseWriter, r *http.Request, c *call) error {
	ops, err := s.st.RackOperations(r.Context(), r.PathValue("uuid"))
	if err != nil {
		return err
	}
	hideQueuedBodies(c, ops)
	writeJSON(w, http.StatusOK, nonNil(ops))
	return nil
}

func (s *Server) rackOperation(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return errorf(http.StatusBadRequest, "operation ID %q is not a number", r.PathValue("id"))
	}
	op, err := s.st.RackOperation(r.Context(), r.PathValue("uuid"), id)
	if err != nil {
		return err
	}
	hideQueuedBodies(c, []api.PendingOperation{op})
	writeJSON(w, http.StatusOK, op)
	return nil
}

// queueRackOperation queues an operation that is not a write: writes are queued by making
// them (holdWrite), so that the region, not the body, says who made them and what they are.
func (s *Server) queueRackOperation(w http.ResponseWriter, r *http.Request, c *call) error {
	var op api.PendingOperation
	if err := decodeBodyUpTo(w, r, &op, maxOperation); err != nil {
		return err
	}
	if op.Kind == api.OperationWrite {
		return errorf(http.StatusUnprocessableEntity, "operations of Kind %q are queued by making the write itself while the rack is paused, not through this route", api.OperationWrite)
	}
	if err := s.st.QueueRackOperation(r.Context(), c.by, r.PathValue("uuid"), &op); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, op)
	return nil
}

// releaseRackOperations is the move's hand-over of a rack's queue; anyone else is refused
// before the body is read.
func (s *Server) releaseRackOperations(w http.ResponseWriter, r *http.Request, c *call) error {
	if !isMoveCall(r, c) {
		return errorf(http.StatusForbidden, "only a rack transfer releases a rack's queue (the workers' calls, marked %s)", api.HeaderMove)
	}
	var rel api.OperationsRelease
	if err := decodeBodyUpTo(w, r, &rel, maxRelease); err != nil {
		return err
	}
	ops, err := s.st.ReleaseRackOperations(r.Context(), c.by, r.PathValue("uuid"), rel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nonNil(ops))
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
