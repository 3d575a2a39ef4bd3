package replay

// imageRoutes registers the mock's images endpoints: mux routes for paths of
// their own, s.methods entries for operations on shared routes.
func (s *Server) imageRoutes() {}
