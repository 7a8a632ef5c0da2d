package ui

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
)

// dns shows the region's domains and the operators' records (the machines' own names are
// derived from their addresses, not stored).
func (u *UI) dns(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	domains, err := s.api.Domains().List(r.Context(), nil)
	if err != nil {
		return err
	}
	records, err := s.api.DNSRecords().List(r.Context(), url.Values{"limit": {strconv.Itoa(api.MaxPageSize)}})
	if err != nil {
		return err
	}
	u.render(w, r, s, http.StatusOK, "dns", map[string]any{"Domains": domains, "Records": records})
	return nil
}

// moveLink is one list of moves in the Temporal UI.
type moveLink struct{ Title, URL string }

// moves links to this region's moves in the Temporal UI, filtered by the search attributes
// the workflows set, and lists the moves the audit log recorded here.
func (u *UI) moves(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	info, err := s.api.Info(r.Context())
	if err != nil {
		return err
	}
	region := strconv.Quote(info.Name)
	var links []moveLink
	for _, l := range []moveLink{
		{"Running moves from this region", "SourceRegion=" + region + " AND ExecutionStatus=\"Running\""},
		{"Moves to this region", "TargetRegion=" + region},
		{"Rack transfers from this region", "WorkflowType=\"TransferRack\" AND SourceRegion=" + region},
		{"Bulk migrations from this region", "WorkflowType=\"BulkMigrate\" AND SourceRegion=" + region},
		{"Machine migrations from this region", "WorkflowType=\"MigrateMachine\" AND SourceRegion=" + region},
	} {
		if link := u.temporalLink(l.URL); link != "" {
			links = append(links, moveLink{l.Title, link})
		}
	}
	controls, _, err := listPage[api.Event](r, s.api, api.PathPrefix+"/"+resEvents, url.Values{"Kind": {api.KindMoveControls}}, 0, eventsPerPage)
	if err != nil {
		return err
	}
	u.render(w, r, s, http.StatusOK, "moves", map[string]any{"Region": info.Name, "Links": links, "Controls": controls})
	return nil
}
