package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/ironflow/ironflow/internal/ratelimit"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// resEnlist is POST /api/v1/enlist: racks forward their booting machines' reports with their
// own token; operators and admins may enlist directly.
const resEnlist = "enlist"

// EnlistLimits bound enlistment on the region, behind the racks' own limits (a rack's
// EnlistLimits): what a rack forwards comes from anybody on its machine network.
type EnlistLimits struct {
	// Reports one caller (a rack, by its token) may send per second on average, and at
	// once (defaults 10 and 100, twice a rack's own pace). Per region process.
	PerRack      rate.Limit
	PerRackBurst int
	// MaxNew is how many New machines the region holds before reports that would create
	// another are refused (default 1000).
	MaxNew int
}

// DefaultEnlistLimits are the enlistment limits of a region unless configured.
var DefaultEnlistLimits = EnlistLimits{PerRack: 10, PerRackBurst: 100, MaxNew: 1000}

func (l EnlistLimits) orDefault() EnlistLimits {
	if l.PerRack <= 0 || l.PerRackBurst <= 0 {
		l.PerRack, l.PerRackBurst = DefaultEnlistLimits.PerRack, DefaultEnlistLimits.PerRackBurst
	}
	if l.MaxNew <= 0 {
		l.MaxNew = DefaultEnlistLimits.MaxNew
	}
	return l
}

// newMachinesRetryAfter is the Retry-After of a report refused at the New machines' cap: room
// comes when an operator commissions or deletes machines, not by itself.
const newMachinesRetryAfter = time.Minute

func (s *Server) enlistRoutes() {
	s.handle(route{pattern: "POST " + api.PathPrefix + "/enlist", resource: resEnlist, write: true, h: s.enlist})
}

// enlist answers 201 when the report created a machine, 200 when it matched one, 409 when
// it was refused, 503 with Retry-After over the caller's rate or at the cap of New machines
// (the discovery environment retries on 503). A rack's report of iPXE facts names that rack,
// whatever the body says.
func (s *Server) enlist(w http.ResponseWriter, r *http.Request, c *call) error {
	limits := s.cfg.Enlist.orDefault()
	if ok, retry := s.enlistLimit.Take(c.by.User, time.Now()); !ok {
		s.metrics.enlistLimited.WithLabelValues("rack").Inc()
		return retryLater(w, retry, "enlistment: %s sends more reports than the region takes (%g a second); retry later", c.by.User, float64(limits.PerRack))
	}
	var e api.Enlistment
	if err := decodeBody(w, r, &e); err != nil {
		return err
	}
	if rack, ok := strings.CutPrefix(c.by.User, store.RackUser("")); ok && c.by.Role == api.RoleRack && e.Boot != nil {
		e.Boot.Rack = rack
	}
	res, err := s.st.Enlist(r.Context(), c.by, e, store.EnlistOptions{MaxNew: limits.MaxNew})
	if errors.Is(err, store.ErrFull) {
		s.metrics.enlistLimited.WithLabelValues("new-machines").Inc()
		return retryLater(w, newMachinesRetryAfter, "%v", err)
	}
	if err != nil {
		s.log.Warn("enlistment refused", "by", c.by.User, "error", err)
		return err
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	s.log.Info("machine enlisted", "machine", res.Machine, "name", res.Name, "created", res.Created, "by", c.by.User)
	writeJSON(w, code, res)
	return nil
}

// retryLater is a 503 with a Retry-After of at least a second.
func retryLater(w http.ResponseWriter, after time.Duration, format string, args ...any) error {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(after.Seconds())))))
	return errorf(http.StatusServiceUnavailable, format, args...)
}

// newEnlistLimiter holds a bucket per caller; callers hold tokens, so their number is bounded
// by the region's racks and users.
func newEnlistLimiter(l EnlistLimits) *ratelimit.Keyed[string] {
	l = l.orDefault()
	return ratelimit.NewKeyed[string](l.PerRack, l.PerRackBurst, maxEnlistCallers)
}

// maxEnlistCallers bounds the callers tracked at once.
const maxEnlistCallers = 4096
