package webhook

import "time"

// SetClock replaces the clock by which s rate-limits its looks at the
// certificate files.
func SetClock(s *Server, now func() time.Time) {
	s.certs.mu.Lock()
	defer s.certs.mu.Unlock()
	s.certs.now = now
}

// WriteCerts writes a CA and a serving certificate for host to dir, as
// NewLocal does.
func WriteCerts(dir, host string) ([]byte, error) { return writeLocalCerts(dir, host, time.Now()) }
