package kloopfake

// EndWatches ends srv's open watches, as an API server going away does.
func EndWatches(srv *Server) { srv.endWatches() }
