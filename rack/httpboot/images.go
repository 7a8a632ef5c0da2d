package httpboot

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/ironflow/ironflow/rack/imagecache"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Images opens an image of the region through the rack's cache (*imagecache.Cache).
type Images interface {
	Open(ctx context.Context, name string) (*imagecache.Handle, error)
}

// imageFetchWait bounds how long a request waits for the image's first fetch into the cache
// (the cache ends a fetch that stalls much sooner).
const imageFetchWait = time.Hour

// fullRetryAfter is what a client is told to wait when the cache has no room right now.
const fullRetryAfter = 30 * time.Second

// serveImage serves an image of the region from the rack's cache to the rack's clients, with
// Range (api.ServeImage): what a deploying machine writes to its disk.
func (s *Server) serveImage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.cfg.Images == nil {
		writeError(w, http.StatusNotFound, "this rack serves no images")
		return
	}
	if !s.imageClient(r.RemoteAddr) {
		s.log.Info("image refused to a non-client", "image", name, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "images are served to the rack's clients only")
		return
	}
	if err := api.ValidImageName(name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rc := http.NewResponseController(w)
	s.extendDeadlines(rc, name, imageFetchWait)
	h, err := s.cfg.Images.Open(r.Context(), name)
	if err != nil {
		code := http.StatusBadGateway
		var apiErr *client.APIError
		switch {
		case errors.Is(err, imagecache.ErrFull):
			code = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(int(fullRetryAfter.Seconds())))
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
			code = http.StatusNotFound
		}
		s.log.Warn("image not served", "image", name, "remote", r.RemoteAddr, "error", err)
		writeError(w, code, "image "+name+": "+err.Error())
		return
	}
	defer h.Close()
	s.extendDeadlines(rc, name, s.cfg.Limits.assetDeadline(h.Image.Size))
	api.ServeImage(w, r, h.Image, h.File)
}

func (s *Server) extendDeadlines(rc *http.ResponseController, name string, d time.Duration) {
	until := time.Now().Add(d)
	if err := errors.Join(rc.SetWriteDeadline(until), rc.SetReadDeadline(until)); err != nil {
		s.log.Warn("image: cannot extend the deadlines", "image", name, "error", err)
	}
}

// imageClient says whether remote (host:port) may download images: loopback and the rack's
// clients, never anybody on other networks, whom an image would be a cheap amplification for.
func (s *Server) imageClient(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	return addr.IsLoopback() || s.cfg.Serves != nil && s.cfg.Serves(addr)
}
