package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// reloadCheckInterval bounds how often a handshake looks at the files: a
// stat per handshake is cheap, but a burst of handshakes needs only one.
const reloadCheckInterval = time.Second

// certSource hands out the serving certificate of a key pair on disk and
// reads it again when a file's size or modification time changes.
type certSource struct {
	certPath, keyPath string
	log               *slog.Logger
	now               func() time.Time // tests move it on

	mu        sync.Mutex
	cert      *tls.Certificate
	certStamp fileStamp
	keyStamp  fileStamp
	checked   time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stat(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

func newCertSource(certPath, keyPath string, log *slog.Logger) (*certSource, error) {
	s := &certSource{certPath: certPath, keyPath: keyPath, log: log, now: time.Now}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the key pair; the caller holds mu or owns s.
func (s *certSource) load() error {
	cs, err := stat(s.certPath)
	if err != nil {
		return fmt.Errorf("webhook: serving certificate: %w", err)
	}
	ks, err := stat(s.keyPath)
	if err != nil {
		return fmt.Errorf("webhook: serving key: %w", err)
	}
	certPEM, err := os.ReadFile(s.certPath)
	if err != nil {
		return fmt.Errorf("webhook: serving certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(s.keyPath)
	if err != nil {
		return fmt.Errorf("webhook: serving key: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("webhook: serving certificate %s and key %s do not make a key pair: %w", s.certPath, s.keyPath, err)
	}
	s.cert, s.certStamp, s.keyStamp = &c, cs, ks
	return nil
}

var errNoCert = errors.New("webhook: no serving certificate")

// get is tls.Config.GetCertificate.
func (s *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.checked) >= reloadCheckInterval {
		s.checked = now
		cs, cerr := stat(s.certPath)
		ks, kerr := stat(s.keyPath)
		if cerr == nil && kerr == nil && (cs != s.certStamp || ks != s.keyStamp) {
			// A Secret volume swaps both files at once, but a writer of
			// plain files may be caught between the two: the old pair is
			// kept until a file changes again.
			if err := s.load(); err != nil {
				s.certStamp, s.keyStamp = cs, ks
				s.log.Error("Reloading the webhook serving certificate failed; serving the previous one", "err", err)
			} else {
				s.log.Info("Reloaded the webhook serving certificate", "cert", s.certPath)
			}
		}
	}
	if s.cert == nil {
		return nil, errNoCert
	}
	return s.cert, nil
}
