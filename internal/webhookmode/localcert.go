package webhookmode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/kloop-dev/kloop/webhook"
)

// CAName is the file in which NewLocal writes its CA's certificate, and
// the CA certificate's key in a kubernetes.io/tls Secret.
const CAName = "ca.crt"

// localValidity is how long the local mode's CA and certificate last: a
// development session, with margin.
const localValidity = 30 * 24 * time.Hour

// keyPair is a CA and a serving certificate it signed, PEM-encoded.
type keyPair struct {
	ca, cert, key []byte
}

// makeCerts makes a CA named caName and a certificate for hosts (IP
// addresses or DNS names) signed by it, valid from an hour before now (for
// clocks that lag) for validity. Local and SelfSigned both use it.
func makeCerts(caName string, hosts []string, now time.Time, validity time.Duration) (keyPair, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("webhook: make a CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return keyPair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("webhook: make a serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		ca:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// writeFiles writes the CA certificate (ca.crt), the serving certificate
// (tls.crt) and its key (tls.key) to dir. Each file is written aside and
// renamed into place, so that a server reading the directory never sees
// half a file.
func (p keyPair) writeFiles(dir string) error {
	for _, f := range []struct {
		name string
		data []byte
	}{{CAName, p.ca}, {webhook.DefaultKeyName, p.key}, {webhook.DefaultCertName, p.cert}} {
		tmp, err := os.CreateTemp(dir, "."+f.name+"-")
		if err != nil {
			return fmt.Errorf("webhook: write %s: %w", f.name, err)
		}
		_, err = tmp.Write(f.data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, f.name))
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("webhook: write %s: %w", f.name, err)
		}
	}
	return nil
}

// WriteCerts makes a CA and a certificate for host signed by it, and
// writes them to dir (writeFiles). It returns the CA certificate's PEM.
func WriteCerts(dir, host string, now time.Time) ([]byte, error) {
	p, err := makeCerts("kloop local webhook CA", []string{host}, now, localValidity)
	if err != nil {
		return nil, err
	}
	if err := p.writeFiles(dir); err != nil {
		return nil, err
	}
	return p.ca, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
