package webhook

import "time"

// SetClock replaces the clock by which s rate-limits its looks at the
// certificate files.
func SetClock(s *Server, now func() time.Time) {
	s.certs.mu.Lock()
	defer s.certs.mu.Unlock()
	s.certs.now = now
}
