package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Transfers starts and controls rack transfers, which are Temporal workflows: the region
// itself never drives a move, so the process that serves the UI is given this (region/ui/uitemporal).
type Transfers interface {
	// Start starts the transfer of rack from source to target under grant (the source's).
	Start(ctx context.Context, source, target, rack, grant string) error
	// Status is the rack's running or last transfer; ErrNoTransfer when it has none.
	Status(ctx context.Context, rack string) (TransferStatus, error)
	// Pause and Resume are the transfer's controls, audited under by.
	Pause(ctx context.Context, rack, by string) error
	Resume(ctx context.Context, rack, by string) error
}

// ErrNoTransfer is Status of a rack that was never transferred.
var ErrNoTransfer = errors.New("no transfer of this rack")

// TransferStatus is a transfer's progress, as its progress query reports it.
type TransferStatus struct {
	ID, Phase, Target string
	Running, Paused   bool
	Total, Done       int
	Failed, Migrating int
	Errors            []string
}

// resRackTransfer is the API's permission resource of rack transfers: pausing and resuming
// one is a write of it, as the pause of the rack itself is.
const resRackTransfer = "racktransfer"

// rack shows a rack with its transfer. After a transfer the rack is gone from this region;
// its page still shows how the transfer ended.
func (u *UI) rack(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	uuid := r.PathValue("uuid")
	rack, err := s.api.Racks().Get(r.Context(), uuid)
	var ae *client.APIError
	gone := errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
	if err != nil && !gone {
		return err
	}
	data := map[string]any{"Rack": rack, "UUID": uuid, "Gone": gone, "Transfers": u.cfg.Transfers != nil,
		"MayTransfer": u.cfg.May(s.sess.By.Role, resRackTransfer, true)}
	if !gone {
		leases, err := s.api.Leases().List(r.Context(), url.Values{"Rack": {rack.Uuid}, "limit": {"500"}})
		if err != nil {
			return err
		}
		data["Leases"] = leases
	}
	if u.cfg.Transfers != nil {
		st, err := u.cfg.Transfers.Status(r.Context(), uuid)
		switch {
		case errors.Is(err, ErrNoTransfer):
		case err != nil:
			data["TransferProblem"] = err.Error()
		default:
			data["Transfer"] = st
		}
	}
	if gone && data["Transfer"] == nil {
		return err
	}
	part := "layout.html"
	if r.URL.Query().Has("progress") { // the part the page polls while a transfer runs
		part = "progress"
	}
	u.renderPart(w, r, s, http.StatusOK, "rack", part, data)
	return nil
}

// startTransfer has the source region issue a rack grant to the session's principal (the
// API refuses one to a readonly user, and so does the UI before it asks) and starts the
// transfer under it.
func (u *UI) startTransfer(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	if !u.cfg.May(s.sess.By.Role, resGrants, true) {
		return &statusError{http.StatusForbidden, "role " + s.sess.By.Role + " may not start rack transfers"}
	}
	if u.cfg.Transfers == nil {
		return &statusError{http.StatusNotFound, "this region's UI does not start transfers"}
	}
	uuid := r.PathValue("uuid")
	target := strings.TrimSpace(r.PostFormValue("target"))
	if target == "" {
		return &statusError{http.StatusBadRequest, "name the region to move the rack to"}
	}
	rack, err := s.api.Racks().Get(r.Context(), uuid)
	if err != nil {
		return err
	}
	info, err := s.api.Info(r.Context())
	if err != nil {
		return err
	}
	if target == info.Name {
		return &statusError{http.StatusBadRequest, "the rack is on region " + target + " already"}
	}
	grant, err := s.api.IssueGrant(r.Context(), api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: target})
	if err != nil {
		return err
	}
	if err := u.cfg.Transfers.Start(r.Context(), info.Name, target, rack.Uuid, grant.Token); err != nil {
		return &statusError{http.StatusConflict, err.Error()}
	}
	http.Redirect(w, r, "/racks/"+url.PathEscape(rack.Uuid), http.StatusSeeOther)
	return nil
}

// controlTransfer is the pause and resume buttons: for the roles the API lets write rack
// transfers, audited as the session's user.
func (u *UI) controlTransfer(pause bool) page {
	return func(w http.ResponseWriter, r *http.Request, s *signedIn) error {
		if !u.cfg.May(s.sess.By.Role, resRackTransfer, true) {
			return &statusError{http.StatusForbidden, "role " + s.sess.By.Role + " may not control rack transfers"}
		}
		if u.cfg.Transfers == nil {
			return &statusError{http.StatusNotFound, "this region's UI does not control transfers"}
		}
		uuid := r.PathValue("uuid")
		control := u.cfg.Transfers.Resume
		if pause {
			control = u.cfg.Transfers.Pause
		}
		if err := control(r.Context(), uuid, s.sess.By.User); err != nil {
			return &statusError{http.StatusConflict, err.Error()}
		}
		http.Redirect(w, r, "/racks/"+url.PathEscape(uuid), http.StatusSeeOther)
		return nil
	}
}
