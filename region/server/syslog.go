package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// resSyslog is machines' syslog as read by GET /machines/{key}/logs.
const resSyslog = "syslog"

// syslogRoutes registers the syslog API (region/api/syslog.go).
func (s *Server) syslogRoutes() {
	p := api.PathPrefix
	s.handle(route{pattern: "POST " + p + "/" + api.KindRacks + "/{uuid}/syslog", resource: resRackAPI, write: true, h: s.syncRackSyslog})
	s.handle(route{pattern: "GET " + p + "/" + api.KindMachines + "/{key}/logs", resource: resSyslog, h: s.machineLogs})
}

// syncRackSyslog stores a rack's batch. Only a rack posts syslog, and only for itself: an
// admin token, which reaches every rack API call, is refused here, so every stored message
// was received by the rack its row names.
func (s *Server) syncRackSyslog(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.by.Role != api.RoleRack {
		return errorf(http.StatusForbidden, "only racks post syslog, not role %q", c.by.Role)
	}
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var batch []api.SyslogMessage
	if err := decodeBodyForStore(w, r, &batch); err != nil {
		return err
	}
	if len(batch) > api.MaxSyslogBatch {
		return errorf(http.StatusRequestEntityTooLarge, "a syslog batch holds at most %d messages, not %d", api.MaxSyslogBatch, len(batch))
	}
	res, err := s.st.SyncSyslog(r.Context(), c.by, id, batch)
	if err != nil {
		return err
	}
	for _, rej := range res.Rejected {
		s.metrics.syslogRejected.WithLabelValues(rej.Reason).Inc()
	}
	if len(res.Rejected) > 0 {
		s.log.Warn("rack sent syslog messages the region refused", "rack", id, "rejected", len(res.Rejected), "first", res.Rejected[0].Error)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// machineLogs answers a machine's syslog, oldest first, filtered by Since (RFC 3339) and
// After (an ID), paged. Every field is escaped again: rows stored before a character was
// refused on the way in hold it raw.
func (s *Server) machineLogs(w http.ResponseWriter, r *http.Request, _ *call) error {
	opts, err := listOptions(r)
	if err != nil {
		return err
	}
	q := store.SyslogQuery{Offset: opts.Offset, Limit: opts.Limit + 1}
	for name, v := range opts.Filters {
		switch name {
		case "Since":
			if q.Since, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return errorf(http.StatusBadRequest, "Since=%q is not an RFC 3339 time", v)
			}
		case "After":
			if q.After, err = strconv.ParseInt(v, 10, 64); err != nil || q.After < 0 {
				return errorf(http.StatusBadRequest, "After=%q is not a message ID", v)
			}
		default:
			return errorf(http.StatusBadRequest, "machine logs cannot be filtered on %q (use Since or After)", name)
		}
	}
	var m api.Machine
	if err := s.st.Get(r.Context(), api.KindMachines, r.PathValue("key"), &m); err != nil {
		return err
	}
	q.Machine = m.Uuid
	logs, err := s.st.Syslog(r.Context(), q)
	if err != nil {
		return err
	}
	opts.page(w, &logs)
	for i := range logs {
		syslogmsg.EscapeRecord(&logs[i])
	}
	writeList(w, &logs)
	return nil
}
