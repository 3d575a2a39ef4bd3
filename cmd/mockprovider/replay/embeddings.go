package replay

// embeddingRoutes registers the mock's embeddings endpoints: mux routes for paths of
// their own, s.methods entries for operations on shared routes.
func (s *Server) embeddingRoutes() {}
