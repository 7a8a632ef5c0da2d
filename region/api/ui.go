package api

// The web UI's session (region/ui). The cookie is the one a browser that signed in to the
// UI holds; GET UISessionPath with it answers a Whoami of the session, as GET /api/v1/whoami
// does for a token (the codec endpoint's check of a browser's credentials).
const (
	UISessionCookie       = "ironflow_session"
	UISecureSessionCookie = "__Host-ironflow_session" // served over TLS: Secure, host-only
	UISessionPath         = "/session"
)
