package httpboot

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/ironflow/ironflow/internal/ratelimit"
	"github.com/ironflow/ironflow/region/api"
)

// Enlister forwards enlistment to the region with the rack's own credential (the rack's
// region API implements it): machines that boot unknown have none.
type Enlister interface {
	Enlist(ctx context.Context, e api.Enlistment) (api.EnlistResult, error)
	CommissioningScripts(ctx context.Context) ([]api.CommissioningScript, error)
}

// StatusCoder is an Enlister error that carries the region's HTTP status (a refusal), which
// the rack passes on; any other error is answered 502.
type StatusCoder interface {
	error
	StatusCode() int
}

// enlistTimeout bounds one forwarded enlistment: a booting machine waits for it.
const enlistTimeout = 15 * time.Second

// EnlistLimits bound the enlistment reports (GET /ipxe/enlist and POST /api/v1/enlist) the
// rack forwards: anybody on the machine network may send them, and each unknown MAC may
// become a machine. A report over a limit is answered 503 with Retry-After: iPXE then boots
// the discovery environment all the same, and `ironflow agent enlist` retries there.
type EnlistLimits struct {
	// Reports one client (source address) may send per second on average, and at once. A
	// machine sends two per boot (iPXE, then the discovery environment).
	PerClient      rate.Limit
	PerClientBurst int
	// Reports of all clients together: a storm from many addresses reaches the region at
	// this pace at most.
	PerRack      rate.Limit
	PerRackBurst int
	MaxClients   int // clients tracked at once; more wait until some go quiet
}

// DefaultEnlistLimits are the limits of a rack's zero EnlistLimits fields.
var DefaultEnlistLimits = EnlistLimits{PerClient: 0.2, PerClientBurst: 5, PerRack: 5, PerRackBurst: 50, MaxClients: 4096}

func (l *EnlistLimits) defaults() {
	d := DefaultEnlistLimits
	setDefault(&l.PerClient, d.PerClient)
	setDefault(&l.PerClientBurst, d.PerClientBurst)
	setDefault(&l.PerRack, d.PerRack)
	setDefault(&l.PerRackBurst, d.PerRackBurst)
	setDefault(&l.MaxClients, d.MaxClients)
}

// enlistLimiter applies EnlistLimits.
type enlistLimiter struct {
	perClient *ratelimit.Keyed[netip.Addr]
	perRack   *rate.Limiter
}

func newEnlistLimiter(l EnlistLimits) *enlistLimiter {
	return &enlistLimiter{perClient: ratelimit.NewKeyed[netip.Addr](l.PerClient, l.PerClientBurst, l.MaxClients),
		perRack: rate.NewLimiter(l.PerRack, l.PerRackBurst)}
}

// admitEnlist spends one report of the client's budget and of the rack's; over either, it
// answers 503 with Retry-After, counts the report and returns false. Reports the rack refuses
// itself (invalid) cost the region nothing and spend no budget.
func (s *Server) admitEnlist(w http.ResponseWriter, r *http.Request) bool {
	now := time.Now()
	client, _ := netip.ParseAddrPort(r.RemoteAddr) // net/http's ip:port; nothing else shares the zero address
	limit := "client"
	ok, retry := s.enlistLimit.perClient.Take(client.Addr().Unmap(), now)
	if ok {
		limit = "rack"
		ok, retry = ratelimit.Take(s.enlistLimit.perRack, now)
	}
	if ok {
		return true
	}
	s.metrics.enlist.WithLabelValues("limited").Inc()
	s.metrics.enlistLimited.WithLabelValues(limit).Inc()
	s.log.Debug("enlistment report over the rack's limit", "remote", r.RemoteAddr, "limit", limit)
	writeRetryLater(w, retry, fmt.Sprintf("enlistment report: over the rack's limit of reports per %s; retry later", limit))
	return false
}

// writeRetryLater answers 503 with a Retry-After of at least a second.
func writeRetryLater(w http.ResponseWriter, after time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(after.Seconds())))))
	writeError(w, http.StatusServiceUnavailable, msg)
}

// bootFact is a query parameter of GET /ipxe/enlist, iPXE's setting of the same name.
type bootFact struct {
	field func(*api.BootFacts) *string
	hex   bool // sent as ${name:hexraw}: a free-form SMBIOS string (enlistScript)
}

// bootFactParams are the query parameters of GET /ipxe/enlist; each appears at most once.
var bootFactParams = map[string]bootFact{
	"mac":          {field: func(b *api.BootFacts) *string { return &b.MAC }},
	"uuid":         {field: func(b *api.BootFacts) *string { return &b.UUID }},
	"serial":       {field: func(b *api.BootFacts) *string { return &b.Serial }, hex: true},
	"manufacturer": {field: func(b *api.BootFacts) *string { return &b.Manufacturer }, hex: true},
	"product":      {field: func(b *api.BootFacts) *string { return &b.Product }, hex: true},
	"buildarch":    {field: func(b *api.BootFacts) *string { return &b.BuildArch }},
	"platform":     {field: func(b *api.BootFacts) *string { return &b.Platform }},
}

// parseBootFacts checks the query of an enlistment report: known parameters only, once
// each, hex where the script sends hex, bounded, printable UTF-8, and a MAC. The region
// checks the values' meaning again.
func parseBootFacts(q url.Values) (api.BootFacts, net.HardwareAddr, error) {
	var b api.BootFacts
	for name, values := range q {
		param, ok := bootFactParams[name]
		if !ok {
			return b, nil, fmt.Errorf("unknown parameter %q", name)
		}
		if len(values) != 1 {
			return b, nil, fmt.Errorf("parameter %q given %d times", name, len(values))
		}
		v := values[0]
		if param.hex {
			raw, err := hex.DecodeString(v)
			if err != nil {
				return b, nil, fmt.Errorf("parameter %q is not hex (iPXE's hexraw): %w", name, err)
			}
			v = string(raw)
		}
		switch {
		case len(v) > api.MaxEnlistValue:
			return b, nil, fmt.Errorf("parameter %q is %d bytes long (at most %d)", name, len(v), api.MaxEnlistValue)
		case !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }):
			return b, nil, fmt.Errorf("parameter %q holds unprintable characters or invalid UTF-8", name)
		}
		*param.field(&b) = strings.TrimSpace(v)
	}
	mac, err := net.ParseMAC(b.MAC)
	if err != nil {
		return b, nil, fmt.Errorf("mac %q is not a MAC address", b.MAC)
	}
	b.MAC = mac.String()
	return b, mac, nil
}

// serveEnlist takes an unknown machine's iPXE report, forwards it to the region and answers
// with the discovery environment, whatever the region said: a machine boots even when its
// region is away or refuses it (the script echoes why), and `ironflow agent enlist` reports
// it again from there.
func (s *Server) serveEnlist(w http.ResponseWriter, r *http.Request) {
	facts, mac, err := parseBootFacts(r.URL.Query())
	if err != nil {
		s.metrics.enlist.WithLabelValues("invalid").Inc()
		s.log.Info("enlistment report refused", "remote", r.RemoteAddr, "error", err)
		writeError(w, http.StatusBadRequest, "enlistment report: "+err.Error())
		return
	}
	if !s.admitEnlist(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), enlistTimeout)
	defer cancel()
	res, err := s.cfg.Enlister.Enlist(ctx, api.Enlistment{Boot: &facts})
	var note string
	switch {
	case err != nil:
		result := "error"
		if _, refused := errors.AsType[StatusCoder](err); refused {
			result = "refused"
		}
		s.metrics.enlist.WithLabelValues(result).Inc()
		s.log.Warn("enlistment not recorded", "mac", facts.MAC, "remote", r.RemoteAddr, "error", err)
		note = "enlistment not recorded: " + err.Error()
	case res.Created:
		s.metrics.enlist.WithLabelValues("created").Inc()
		note = "enlisted as new machine " + res.Name
	default:
		s.metrics.enlist.WithLabelValues("matched").Inc()
		note = "enlisted as machine " + res.Name
	}
	writeScript(w, machineScript, s.discoveryScript(baseURL(r), mac, "enlisting machine", scriptNote(note)))
}

// scriptNote makes text safe to echo in an iPXE script: one line, printable ASCII, no
// setting expansion, bounded.
func scriptNote(text string) string {
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '$' {
			return ' '
		}
		return r
	}, text)
	if len(clean) > 400 {
		clean = clean[:400] + "..."
	}
	return clean
}

// maxEnlistBody bounds an agent's enlistment upload (commissioning output is bounded by
// api.MaxCommissioning × api.MaxCommissionOutput).
const maxEnlistBody = 1 << 20

// serveAgentEnlist forwards the discovery environment's report (POST /api/v1/enlist) with
// the rack's credential.
func (s *Server) serveAgentEnlist(w http.ResponseWriter, r *http.Request) {
	var e api.Enlistment
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxEnlistBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		s.metrics.enlist.WithLabelValues("invalid").Inc()
		code := http.StatusBadRequest
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			code = http.StatusRequestEntityTooLarge
		}
		writeError(w, code, "enlistment report: "+err.Error())
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		s.metrics.enlist.WithLabelValues("invalid").Inc()
		writeError(w, http.StatusBadRequest, "enlistment report: data after the JSON value")
		return
	}
	// Only iPXE reports through GET /ipxe/enlist carry boot facts: a running system cannot
	// speak for the interface it booted from.
	e.Boot = nil
	if !s.admitEnlist(w, r) {
		return
	}
	res, err := s.cfg.Enlister.Enlist(r.Context(), e)
	if err != nil {
		s.metrics.enlist.WithLabelValues(s.forwardError(w, "enlistment", err)).Inc()
		return
	}
	result, code := "matched", http.StatusOK
	if res.Created {
		result, code = "created", http.StatusCreated
	}
	s.metrics.enlist.WithLabelValues(result).Inc()
	writeJSON(w, code, res)
}

// serveCommissioningScripts lists the region's commissioning scripts for the discovery
// environment.
func (s *Server) serveCommissioningScripts(w http.ResponseWriter, r *http.Request) {
	scripts, err := s.cfg.Enlister.CommissioningScripts(r.Context())
	if err != nil {
		s.forwardError(w, "commissioning scripts", err)
		return
	}
	writeJSON(w, http.StatusOK, scripts)
}

// regionRetryAfter is the Retry-After of a region's 503 or 429, whose own header the
// region link does not carry.
const regionRetryAfter = 10 * time.Second

// forwardError answers with the region's refusal ("refused"), or 502 when no region
// answered ("error"); it returns which.
func (s *Server) forwardError(w http.ResponseWriter, what string, err error) string {
	if sc, ok := errors.AsType[StatusCoder](err); ok {
		if code := sc.StatusCode(); code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
			// The region's own limits: the agent retries on 503.
			writeRetryLater(w, regionRetryAfter, err.Error())
		} else {
			writeError(w, code, err.Error())
		}
		return "refused"
	}
	s.log.Warn("forwarding to the region failed", "what", what, "error", err)
	writeError(w, http.StatusBadGateway, what+": no region reachable: "+err.Error())
	return "error"
}
