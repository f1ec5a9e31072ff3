package webhookmode

import (
	"time"

	"github.com/kloop-dev/kloop/webhook"
)

// CheckSecret is the decision on the self-signed Secret.
var CheckSecret = checkSecret

// MakeSecret makes a kubernetes.io/tls Secret with a CA and a certificate
// for dnsNames valid for validity from now, as SelfSigned does.
func MakeSecret(dnsNames []string, now time.Time, validity time.Duration) (map[string][]byte, error) {
	p, err := makeCerts("test CA", dnsNames, now, validity)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CAName: p.ca, webhook.DefaultCertName: p.cert, webhook.DefaultKeyName: p.key}, nil
}
