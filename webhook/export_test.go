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

// CheckSecret is the decision on the self-signed Secret.
var CheckSecret = checkSecret

// MakeSecret makes a kubernetes.io/tls Secret with a CA and a certificate
// for dnsNames valid for validity from now, as SelfSigned does.
func MakeSecret(dnsNames []string, now time.Time, validity time.Duration) (map[string][]byte, error) {
	p, err := makeCerts("test CA", dnsNames, now, validity)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CAName: p.ca, DefaultCertName: p.cert, DefaultKeyName: p.key}, nil
}
