package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Page sizes: a page of machines or events reads one page of the API, whatever the region holds.
const (
	machinesPerPage = 50
	eventsPerPage   = 100
	logTail         = 100 // syslog lines a machine's page starts with
)

// Resources of the API's permission table the UI's routes read besides the kinds.
const (
	resEvents = "events"
	resSyslog = "syslog"
	resGrants = "grants" // grants, and GET /api/v1/whoami
)

func (u *UI) table() []Route {
	return []Route{
		u.public("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/machines", http.StatusSeeOther)
		}),
		u.public("GET /sign-in", u.signInPage),
		u.public("POST /sign-in", u.signIn),
		u.public("GET "+assetPrefix+"{file}", u.assets.serve),
		u.signed("POST /sign-out", "", false, u.signOut),
		u.signed("GET /machines", api.KindMachines, false, u.machines),
		u.signed("GET /machines/{key}", api.KindMachines, false, u.machine),
		u.signed("GET /machines/{key}/logs/stream", resSyslog, false, u.logStream),
		u.signed("POST /machines/{key}/lock", api.KindMachines, true, u.setLocked(true)),
		u.signed("POST /machines/{key}/unlock", api.KindMachines, true, u.setLocked(false)),
		u.signed("GET /racks", api.KindRacks, false, u.racks),
		u.signed("GET /racks/{uuid}", api.KindRacks, false, u.rack),
		u.signed("POST /racks/{uuid}/transfer", resGrants, true, u.startTransfer),
		u.signed("POST /racks/{uuid}/transfer/pause", resRackTransfer, true, u.controlTransfer(true)),
		u.signed("POST /racks/{uuid}/transfer/resume", resRackTransfer, true, u.controlTransfer(false)),
		u.signed("GET /pods", api.KindPods, false, u.pods),
		u.signed("GET /events", resEvents, false, u.events),
		u.signed("GET /moves", resEvents, false, u.moves),
		u.signed("GET /dns", api.KindDNSRecords, false, u.dns),
		u.signed("GET /users", api.KindUsers, false, u.users),
		u.signed("GET "+api.UISessionPath, resGrants, false, u.whoami),
	}
}

// view is what every page template gets besides its own data.
type view struct {
	Title  string
	User   string
	Role   string
	CSRF   string
	Nav    string
	Data   any
	Writes map[string]bool // the kinds the role may write: which action buttons to show
}

// render executes page with data inside the layout.
func (u *UI) render(w http.ResponseWriter, r *http.Request, s *signedIn, code int, page string, data any) {
	u.renderPart(w, r, s, code, page, "layout.html", data)
}

// renderPart executes one template of page: the whole page, or a part a page polls.
func (u *UI) renderPart(w http.ResponseWriter, r *http.Request, s *signedIn, code int, page, part string, data any) {
	v := view{Title: page, Nav: page, Data: data, Writes: map[string]bool{}}
	if s != nil {
		v.User, v.Role, v.CSRF = s.sess.By.User, s.sess.By.Role, s.sess.CSRF
		for _, k := range []string{api.KindMachines, api.KindRacks, api.KindPods} {
			v.Writes[k] = u.cfg.May(v.Role, k, true)
		}
	}
	var buf bytes.Buffer
	if err := u.pages[page].ExecuteTemplate(&buf, part, v); err != nil {
		u.log.Error("UI template failed", "page", page, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// machineFilters parses the search box: Field=value words, as the CLI's list takes them.
func machineFilters(q string) (url.Values, error) {
	filters := url.Values{}
	for _, word := range strings.Fields(q) {
		field, value, ok := strings.Cut(word, "=")
		if !ok || field == "" {
			return nil, &statusError{http.StatusBadRequest, fmt.Sprintf("filter %q: want Field=value", word)}
		}
		filters.Add(field, value)
	}
	return filters, nil
}

// offsetParam is the page's offset query parameter, 0 when absent.
func offsetParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("offset")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &statusError{http.StatusBadRequest, "offset must be a non-negative integer"}
	}
	return n, nil
}

// listPage reads one page of path from the API and says where the next one starts (-1: none).
func listPage[T any](r *http.Request, c *client.Client, path string, filters url.Values, offset, limit int) ([]T, int, error) {
	query := url.Values{}
	for k, v := range filters {
		query[k] = v
	}
	query.Set("offset", strconv.Itoa(offset))
	query.Set("limit", strconv.Itoa(limit))
	a, err := c.Do(r.Context(), client.Request{Method: http.MethodGet, Path: path, Query: query})
	if err != nil {
		return nil, -1, err
	}
	var out []T
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return nil, -1, fmt.Errorf("GET %s: %w", path, err)
	}
	next := -1
	if h := a.Header.Get(api.HeaderNext); h != "" {
		if next, err = strconv.Atoi(h); err != nil {
			return nil, -1, fmt.Errorf("GET %s: %s %q: %w", path, api.HeaderNext, h, err)
		}
	}
	return out, next, nil
}

// pageLinks are the previous and next links of a paged list ("" when there is none).
type pageLinks struct{ Prev, Next string }

func links(r *http.Request, offset, next, size int) pageLinks {
	at := func(n int) string {
		q := r.URL.Query()
		q.Set("offset", strconv.Itoa(n))
		return r.URL.Path + "?" + q.Encode()
	}
	var l pageLinks
	if offset > 0 {
		l.Prev = at(max(0, offset-size))
	}
	if next > 0 {
		l.Next = at(next)
	}
	return l
}

func (u *UI) machines(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	q := r.URL.Query().Get("q")
	filters, err := machineFilters(q)
	if err != nil {
		return err
	}
	offset, err := offsetParam(r)
	if err != nil {
		return err
	}
	list, next, err := listPage[api.Machine](r, s.api, api.PathPrefix+"/"+api.KindMachines, filters, offset, machinesPerPage)
	if err != nil {
		return err
	}
	u.render(w, r, s, http.StatusOK, "machines", map[string]any{
		"Query": q, "Machines": list, "Offset": offset, "Links": links(r, offset, next, machinesPerPage)})
	return nil
}

func (u *UI) machine(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	ctx := r.Context()
	m, err := s.api.Machines().Get(ctx, r.PathValue("key"))
	if err != nil {
		return err
	}
	jobs, _, err := listPage[api.Job](r, s.api, api.PathPrefix+"/"+api.KindJobs, url.Values{"Machine": {m.Uuid}}, 0, 20)
	if err != nil {
		return err
	}
	events, _, err := listPage[api.Event](r, s.api, api.PathPrefix+"/"+resEvents, url.Values{"Kind": {api.KindMachines}, "Key": {m.Uuid}}, 0, 20)
	if err != nil {
		return err
	}
	logs, err := s.api.MachineLogs(ctx, m.Uuid, url.Values{"Since": {time.Now().Add(-24 * time.Hour).Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(api.MaxPageSize)}})
	if err != nil {
		return err
	}
	logs = logs[max(0, len(logs)-logTail):]
	var last int64
	if len(logs) > 0 {
		last = logs[len(logs)-1].ID
	}
	inventory, err := json.MarshalIndent(m.Enlisted, "", "  ")
	if err != nil {
		return fmt.Errorf("machine %s inventory: %w", m.Uuid, err)
	}
	u.render(w, r, s, http.StatusOK, "machine", map[string]any{
		"Machine": m, "Jobs": jobs, "Events": events, "Logs": logs, "LastLog": last,
		"Inventory": string(inventory), "Moves": u.temporalLink(`MachineUuid="` + m.Uuid + `" OR MachineUuids="` + m.Uuid + `"`)})
	return nil
}

// temporalLink is the Temporal UI's list of workflows matching query, "" without a Temporal UI.
func (u *UI) temporalLink(query string) string {
	if u.cfg.TemporalUI == "" {
		return ""
	}
	return strings.TrimRight(u.cfg.TemporalUI, "/") + "/namespaces/default/workflows?query=" + url.QueryEscape(query)
}

// setLocked is the lock and unlock buttons of a machine: a merge patch through the API.
func (u *UI) setLocked(locked bool) page {
	return func(w http.ResponseWriter, r *http.Request, s *signedIn) error {
		key := r.PathValue("key")
		m, err := s.api.Machines().Patch(r.Context(), key, json.RawMessage(`{"Locked":`+strconv.FormatBool(locked)+`}`))
		if err != nil {
			return err
		}
		http.Redirect(w, r, "/machines/"+url.PathEscape(m.Uuid), http.StatusSeeOther)
		return nil
	}
}

func (u *UI) racks(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	racks, err := s.api.Racks().List(r.Context(), nil)
	if err != nil {
		return err
	}
	leases, err := s.api.Leases().List(r.Context(), url.Values{"limit": {strconv.Itoa(api.MaxPageSize)}})
	if err != nil {
		return err
	}
	byRack := map[string]int{}
	for _, l := range leases {
		byRack[l.Rack]++
	}
	u.render(w, r, s, http.StatusOK, "racks", map[string]any{"Racks": racks, "Leases": byRack, "Transfers": u.temporalLink(`WorkflowType="TransferRack"`)})
	return nil
}

func (u *UI) pods(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	pods, err := s.api.Pods().List(r.Context(), nil)
	if err != nil {
		return err
	}
	slices.SortFunc(pods, func(a, b api.Pod) int { return strings.Compare(a.Name, b.Name) })
	u.render(w, r, s, http.StatusOK, "pods", map[string]any{"Pods": pods})
	return nil
}

func (u *UI) events(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	offset, err := offsetParam(r)
	if err != nil {
		return err
	}
	filters := url.Values{}
	for _, f := range []string{"Kind", "Key", "Actor"} {
		if v := r.URL.Query().Get(f); v != "" {
			filters.Set(f, v)
		}
	}
	list, next, err := listPage[api.Event](r, s.api, api.PathPrefix+"/"+resEvents, filters, offset, eventsPerPage)
	if err != nil {
		return err
	}
	u.render(w, r, s, http.StatusOK, "events", map[string]any{"Events": list, "Links": links(r, offset, next, eventsPerPage)})
	return nil
}

func (u *UI) users(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	users, err := s.api.Users().List(r.Context(), nil)
	if err != nil {
		return err
	}
	u.render(w, r, s, http.StatusOK, "users", map[string]any{"Users": users})
	return nil
}

// whoami answers who the session acts as, as the API's whoami does for a token: the codec
// endpoint asks it for a browser that signed in here (the Temporal UI's "include credentials").
func (u *UI) whoami(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	who, err := s.api.Whoami(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(who)
}

// funcs are the templates' helpers.
func funcs(a *assets) template.FuncMap {
	return template.FuncMap{
		"asset": a.url,
		"bytes": func(n uint64) string {
			const unit = 1024
			if n < unit {
				return fmt.Sprintf("%d B", n)
			}
			div, exp := uint64(unit), 0
			for m := n / unit; m >= unit; m /= unit {
				div *= unit
				exp++
			}
			return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
		},
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}
}
