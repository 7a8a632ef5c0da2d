package server

// Route is one route of the region API as the permission check sees it: what the abuse
// suite (integration/abuse_test.go) walks and compares with the routes it covers.
type Route struct {
	Pattern  string // "METHOD /path/{wildcard}", as registered on the mux
	Public   bool   // served without a token (the handler may check its own credential)
	Resource string // the permissions resource; "" for public routes
	Write    bool
}

// Routes lists every route the server serves, in registration order.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.table))
	for i, rt := range s.table {
		out[i] = Route{Pattern: rt.pattern, Public: rt.public, Resource: rt.resource, Write: rt.write}
	}
	return out
}
