package payloadcodec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// MaxRequestBytes bounds the body of an /encode or /decode request: a history page's
// payloads, far less than what would let one caller hold the endpoint's memory.
const MaxRequestBytes = 4 << 20

// Endpoint is Temporal's remote codec protocol (POST /encode and /decode of
// {"payloads": [...]}) over a Codec, for the web UI and `temporal --codec-endpoint`. Only
// a caller whose bearer token the region names admin gets an answer: a decoded history holds
// grants that would let its reader start moves.
type Endpoint struct {
	Codec *Codec
	// Region authenticates the callers' tokens (GET /api/v1/whoami).
	Region string
	// AllowOrigins are the web origins (e.g. the UI's http://127.0.0.1:8233) whose pages may
	// call the endpoint from a browser.
	AllowOrigins []string
	Logger       *slog.Logger
}

// ServeHTTP answers CORS preflights of the allowed origins, then serves authorised callers.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(e.AllowOrigins, origin) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, X-Namespace")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost || (r.URL.Path != "/encode" && r.URL.Path != "/decode") {
		http.NotFound(w, r)
		return
	}
	if status, err := e.authorize(r); err != nil {
		e.Logger.Warn("codec request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "status", status, "error", err)
		http.Error(w, err.Error(), status)
		return
	}
	if r.ContentLength > MaxRequestBytes {
		http.Error(w, fmt.Sprintf("body over %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes) // a body without a length, too
	converter.NewPayloadCodecHTTPHandler(e.Codec).ServeHTTP(w, r)
}

// authorize asks the region who the caller is; only admin may. The caller is its bearer
// token's, else (a browser: the Temporal UI with "include credentials") the region's web UI
// session its cookie names, which the region checks as it checks its own pages.
func (e *Endpoint) authorize(r *http.Request) (int, error) {
	var who api.Whoami
	var err error
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch cookie := sessionCookie(r); {
	case ok && token != "":
		who, err = client.New(e.Region, token).Whoami(r.Context())
	case cookie != "":
		who, err = client.New(e.Region, "").SessionWhoami(r.Context(), cookie)
	default:
		return http.StatusUnauthorized, errors.New(`missing Authorization header, expected "Bearer <token>" of an admin of the region, or the session cookie of its web UI`)
	}
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && (apiErr.StatusCode == http.StatusUnauthorized || apiErr.StatusCode == http.StatusForbidden):
		return http.StatusUnauthorized, fmt.Errorf("the region refuses the credential: %s", apiErr.Message)
	case err != nil:
		return http.StatusBadGateway, fmt.Errorf("cannot check the credential with the region: %w", err)
	case who.Role != api.RoleAdmin:
		return http.StatusForbidden, fmt.Errorf("role %q may not read payloads; admin only", who.Role)
	}
	return http.StatusOK, nil
}

// sessionCookie is the region UI's session cookie of r as name=value, "" without one; no
// other cookie of the browser reaches the region.
func sessionCookie(r *http.Request) string {
	for _, name := range []string{api.UISecureSessionCookie, api.UISessionCookie} {
		if c, err := r.Cookie(name); err == nil && c.Value != "" {
			return (&http.Cookie{Name: c.Name, Value: c.Value}).String()
		}
	}
	return ""
}

// Serve serves e on ln until ctx ends.
func (e *Endpoint) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	stopped := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stopped()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("codec endpoint: %w", err)
	}
	return nil
}
