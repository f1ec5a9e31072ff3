package secure

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// certSource hands out the serving certificate: a fixed self-signed one, or
// the files of CertDir, read again when their size or modification time
// changes.
type certSource struct {
	certPath, keyPath string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod fileStamp
	keyMod  fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

func newCertSource(o Options) (*certSource, error) {
	if o.CertDir == "" {
		c, err := selfSigned(time.Now())
		if err != nil {
			return nil, err
		}
		return &certSource{cert: c, log: o.Logger}, nil
	}
	s := &certSource{
		certPath: filepath.Join(o.CertDir, o.CertName),
		keyPath:  filepath.Join(o.CertDir, o.KeyName),
		log:      o.Logger,
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the key pair; the caller holds mu or owns s.
func (s *certSource) load() error {
	cm, err := stamp(s.certPath)
	if err != nil {
		return fmt.Errorf("secure: serving certificate: %w", err)
	}
	km, err := stamp(s.keyPath)
	if err != nil {
		return fmt.Errorf("secure: serving key: %w", err)
	}
	c, err := tls.LoadX509KeyPair(s.certPath, s.keyPath)
	if err != nil {
		return fmt.Errorf("secure: serving certificate %s and key %s: %w", s.certPath, s.keyPath, err)
	}
	s.cert, s.certMod, s.keyMod = &c, cm, km
	return nil
}

func (s *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certPath == "" {
		return s.cert, nil
	}
	cm, cerr := stamp(s.certPath)
	km, kerr := stamp(s.keyPath)
	if cerr == nil && kerr == nil && (cm != s.certMod || km != s.keyMod) {
		// A Secret update swaps both files at once (an atomic symlink
		// swap); should one be read mid-change, the old pair is kept and
		// the next handshake tries again.
		if err := s.load(); err != nil {
			s.log.Error("Reloading the metrics serving certificate failed; serving the previous one", "err", err)
		} else {
			s.log.Info("Reloaded the metrics serving certificate", "cert", s.certPath)
		}
	}
	if s.cert == nil {
		return nil, errNoCert
	}
	return s.cert, nil
}

// selfSigned makes an ECDSA P-256 certificate for this host, valid from an
// hour before now for a year.
func selfSigned(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secure: self-signed key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("secure: serial number: %w", err)
	}
	dns := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		dns = append(dns, h)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: dns[len(dns)-1], Organization: []string{"kloop self-signed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              dns,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("secure: self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
