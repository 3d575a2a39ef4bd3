package replay

// audioRoutes registers the mock's audio endpoints: mux routes for paths of
// their own, s.methods entries for operations on shared routes.
func (s *Server) audioRoutes() {}
