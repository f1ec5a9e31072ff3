package webhookmode

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/kloop-dev/kloop/webhook"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

const (
	// SelfSignedValidity is how long the CA and serving certificate that
	// SelfSigned makes last. They are checked at each start only, so they
	// are long-lived, as in-cluster self-signed webhook certificates
	// usually are.
	SelfSignedValidity = 10 * 365 * 24 * time.Hour
	// SelfSignedRenewBefore: a Secret whose CA or certificate ends sooner
	// than this is replaced at the start.
	SelfSignedRenewBefore = 30 * 24 * time.Hour
	// ensureAttempts bounds the read-decide-write rounds on the Secret; a
	// round is lost only to another replica's write, after which the next
	// round reads a valid Secret.
	ensureAttempts = 5
)

// SelfSignedOptions configures SelfSigned.
type SelfSignedOptions struct {
	// Service and Namespace name the Service in front of the webhook
	// server: the certificate is made for <Service>.<Namespace>.svc and
	// <Service>.<Namespace>.svc.cluster.local, and the caBundle is set on
	// every webhook that calls that Service. Required.
	Service, Namespace string
	// Secret names the kubernetes.io/tls Secret in Namespace that holds
	// the CA (ca.crt) and the serving certificate (tls.crt, tls.key).
	// Required.
	Secret string
	// Dir is where tls.crt and tls.key are written for the Server
	// (ServerOptions.CertDir). "" makes a temporary directory, which Serve
	// and Close remove.
	Dir string
	// Logger receives the logs. Default slog.Default().
	Logger *slog.Logger
}

// SelfSigned serves webhooks in a cluster without cert-manager. At the
// start (Serve) it reads its Secret; when the Secret is missing, is not
// for the Service's names or ends within SelfSignedRenewBefore, it makes a
// CA and a serving certificate and writes the Secret, guarded by its
// resourceVersion, so that replicas starting together end with one Secret
// (a replica that loses the race reads and uses the winner's). It writes
// the certificate to Dir for the Server, and sets the CA as the caBundle
// of every webhook whose clientConfig.service is the Service: those of all
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations, and
// the conversion webhook of every CRD. Nothing needs a label: the Service
// reference is the rule.
type SelfSigned struct {
	opts    SelfSignedOptions
	log     *slog.Logger
	tempDir bool
	ca      []byte
	now     func() time.Time
}

// NewSelfSigned checks opts and prepares Dir, with a placeholder
// certificate so that NewServer can read one before Serve puts the
// Secret's in its place; nothing is ever served with it. It does no API
// call.
func NewSelfSigned(opts SelfSignedOptions) (*SelfSigned, error) {
	switch {
	case opts.Service == "":
		return nil, errors.New("webhook: SelfSignedOptions.Service is empty: name the Service in front of the webhook server (the certificate is made for its DNS names)")
	case opts.Namespace == "":
		return nil, errors.New("webhook: SelfSignedOptions.Namespace is empty: give the namespace of the Service and the Secret")
	case opts.Secret == "":
		return nil, errors.New("webhook: SelfSignedOptions.Secret is empty: name the kubernetes.io/tls Secret that keeps the CA and certificate")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &SelfSigned{opts: opts, log: opts.Logger, now: time.Now}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "kloop-webhook-")
		if err != nil {
			return nil, fmt.Errorf("webhook: self-signed certificates: %w", err)
		}
		s.opts.Dir, s.tempDir = d, true
	} else if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("webhook: self-signed certificates: %w", err)
	}
	if _, err := WriteCerts(s.opts.Dir, "placeholder.invalid", s.now()); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// CertDir is where the serving certificate is: ServerOptions.CertDir.
func (s *SelfSigned) CertDir() string { return s.opts.Dir }

// DNSNames are the names the serving certificate is for.
func (s *SelfSigned) DNSNames() []string {
	svc := s.opts.Service + "." + s.opts.Namespace + ".svc"
	return []string{svc, svc + ".cluster.local"}
}

// cABundle is the PEM of the CA in use, once Ensure has returned.
func (s *SelfSigned) cABundle() []byte { return s.ca }

// Close removes the temporary certificate directory, if NewSelfSigned made
// one.
func (s *SelfSigned) Close() error {
	if !s.tempDir {
		return nil
	}
	return os.RemoveAll(s.opts.Dir)
}

// Serve runs Ensure and then srv (whose CertDir must be s's, with the
// default file names), which reads the certificate as it starts, and runs srv until ctx is done; then it removes the temporary
// directory. The server does not listen before the certificate is in
// place, so it never serves the placeholder.
func (s *SelfSigned) Serve(ctx context.Context, cfg *rest.Config, srv *webhook.Server) error {
	err := s.serve(ctx, cfg, srv)
	return errors.Join(err, s.Close())
}

func (s *SelfSigned) serve(ctx context.Context, cfg *rest.Config, srv *webhook.Server) error {
	if err := s.ensure(ctx, cfg); err != nil {
		return err
	}
	return srv.Start(ctx) // Start reads the certificate files again
}

// ensure makes the Secret valid (see SelfSigned), writes its certificate
// and key to Dir and sets the CA as the caBundle of the webhooks that call
// the Service. Every replica runs it at each start.
func (s *SelfSigned) ensure(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p, err := s.ensureSecret(ctx, cs)
	if err != nil {
		return err
	}
	if err := p.writeFiles(s.opts.Dir); err != nil {
		return err
	}
	s.ca = p.ca
	return s.inject(ctx, cs, ext)
}

// ensureSecret reads the Secret and, when it will not do, writes a new
// one; a conflict means another replica wrote first, and the next round
// reads its Secret.
func (s *SelfSigned) ensureSecret(ctx context.Context, cs kubernetes.Interface) (keyPair, error) {
	o := s.opts
	secrets := cs.CoreV1().Secrets(o.Namespace)
	where := "Secret " + o.Namespace + "/" + o.Secret
	for range ensureAttempts {
		sec, err := secrets.Get(ctx, o.Secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			sec, err = nil, nil
		}
		if err != nil {
			return keyPair{}, fmt.Errorf("webhook: read %s: %w", where, err)
		}
		if sec != nil && sec.Type != corev1.SecretTypeTLS {
			return keyPair{}, fmt.Errorf("webhook: %s has type %s, want %s: delete it, or name another Secret for the self-signed certificate", where, sec.Type, corev1.SecretTypeTLS)
		}
		why := checkSecret(sec, s.DNSNames(), s.now())
		if why == nil {
			s.log.Info("Using the webhook certificate of the Secret", "namespace", o.Namespace, "name", o.Secret)
			return keyPair{ca: sec.Data[CAName], cert: sec.Data[corev1.TLSCertKey], key: sec.Data[corev1.TLSPrivateKeyKey]}, nil
		}
		p, err := makeCerts(o.Service+"."+o.Namespace+" webhook CA", s.DNSNames(), s.now(), SelfSignedValidity)
		if err != nil {
			return keyPair{}, err
		}
		data := map[string][]byte{CAName: p.ca, corev1.TLSCertKey: p.cert, corev1.TLSPrivateKeyKey: p.key}
		if sec == nil {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: o.Secret, Namespace: o.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "kloop"}},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}, metav1.CreateOptions{})
		} else {
			sec.Data = data // sec carries the resourceVersion read: a write in between is a conflict
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			s.log.Info("Wrote a new self-signed webhook certificate to the Secret", "namespace", o.Namespace, "name", o.Secret, "reason", why.Error())
			return p, nil
		case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
			continue // another replica wrote it: read theirs
		default:
			return keyPair{}, fmt.Errorf("webhook: write %s: %w", where, err)
		}
	}
	return keyPair{}, fmt.Errorf("webhook: %s changed under each of %d writes; is another program writing it?", where, ensureAttempts)
}

// checkSecret says why sec will not do as the self-signed webhook Secret
// for dnsNames at now: missing, a key missing, a certificate and key that
// do not pair, a certificate that its ca.crt did not sign for each name,
// or a CA or certificate that ends within SelfSignedRenewBefore. Nil: it
// will do.
func checkSecret(sec *corev1.Secret, dnsNames []string, now time.Time) error {
	if sec == nil {
		return errors.New("the Secret does not exist")
	}
	for _, k := range []string{CAName, corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if len(sec.Data[k]) == 0 {
			return fmt.Errorf("the Secret has no %s", k)
		}
	}
	pair, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("the Secret's tls.crt and tls.key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("the Secret's tls.crt: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(sec.Data[CAName]) {
		return errors.New("the Secret's ca.crt holds no PEM certificate")
	}
	renewAt := now.Add(SelfSignedRenewBefore)
	for _, name := range dnsNames {
		chains, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			return fmt.Errorf("the Secret's certificate is not valid for %s: %w", name, err)
		}
		for _, c := range chains[0] {
			if c.NotAfter.Before(renewAt) {
				return fmt.Errorf("the Secret's certificate %q ends at %s, within %s", c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339), SelfSignedRenewBefore)
			}
		}
	}
	return nil
}

// inject sets the CA as the caBundle of every webhook that calls the
// Service, in the webhook configurations and the CRDs' conversion.
func (s *SelfSigned) inject(ctx context.Context, cs kubernetes.Interface, ext apiextensions.Interface) error {
	reg := cs.AdmissionregistrationV1()
	var errs []error
	n := 0
	injectAll := func(kind string, names []string, err error, patchOf func(ctx context.Context, name string) (patch []byte, err error), apply func(ctx context.Context, name string, patch []byte) error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("webhook: list %s: %w", kind, err))
			return
		}
		for _, name := range names {
			n++
			// The patch tests what it changes: a concurrent edit makes it
			// fail, and the next round reads the object again.
			err := retry.OnError(retry.DefaultRetry, func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsConflict(err) }, func() error {
				p, err := patchOf(ctx, name)
				if err != nil || p == nil {
					return err
				}
				return apply(ctx, name, p)
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("webhook: set the caBundle of %s %s: %w", kind, name, err))
			} else {
				s.log.Debug("Set the webhook CA bundle", "kind", kind, "name", name)
			}
		}
	}

	muts, err := reg.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	var names []string
	if err == nil {
		for _, c := range muts.Items {
			if s.webhooksOf(mutatingClients(&c)) != nil {
				names = append(names, c.Name)
			}
		}
	}
	injectAll("MutatingWebhookConfiguration", names, err, func(ctx context.Context, name string) ([]byte, error) {
		c, err := reg.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return s.webhooksPatch(mutatingClients(c))
	}, func(ctx context.Context, name string, p []byte) error {
		_, err := reg.MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, p, metav1.PatchOptions{})
		return err
	})

	vals, err := reg.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	names = nil
	if err == nil {
		for _, c := range vals.Items {
			if s.webhooksOf(validatingClients(&c)) != nil {
				names = append(names, c.Name)
			}
		}
	}
	injectAll("ValidatingWebhookConfiguration", names, err, func(ctx context.Context, name string) ([]byte, error) {
		c, err := reg.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return s.webhooksPatch(validatingClients(c))
	}, func(ctx context.Context, name string, p []byte) error {
		_, err := reg.ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, p, metav1.PatchOptions{})
		return err
	})

	crdClient := ext.ApiextensionsV1().CustomResourceDefinitions()
	crds, err := crdClient.List(ctx, metav1.ListOptions{})
	names = nil
	if err == nil {
		for _, c := range crds.Items {
			if s.conversionClient(&c) != nil {
				names = append(names, c.Name)
			}
		}
	}
	injectAll("CustomResourceDefinition", names, err, func(ctx context.Context, name string) ([]byte, error) {
		c, err := crdClient.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		cc := s.conversionClient(c)
		if cc == nil || bytes.Equal(cc.CABundle, s.ca) {
			return nil, nil
		}
		const at = "/spec/conversion/webhook/clientConfig"
		return json.Marshal([]jsonPatchOp{
			{Op: "test", Path: at + "/service/name", Value: cc.Service.Name},
			{Op: "test", Path: at + "/service/namespace", Value: cc.Service.Namespace},
			{Op: "add", Path: at + "/caBundle", Value: s.ca},
		})
	}, func(ctx context.Context, name string, p []byte) error {
		_, err := crdClient.Patch(ctx, name, types.JSONPatchType, p, metav1.PatchOptions{})
		return err
	})

	if n == 0 && len(errs) == 0 {
		s.log.Warn("No webhook configuration or CRD conversion calls the Service; no caBundle was set", "namespace", s.opts.Namespace, "name", s.opts.Service)
	}
	return errors.Join(errs...)
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// namedClient is one webhook of a configuration: its name and client.
type namedClient struct {
	name   string
	client *admissionregistrationv1.WebhookClientConfig
}

func mutatingClients(c *admissionregistrationv1.MutatingWebhookConfiguration) []namedClient {
	out := make([]namedClient, len(c.Webhooks))
	for i := range c.Webhooks {
		out[i] = namedClient{c.Webhooks[i].Name, &c.Webhooks[i].ClientConfig}
	}
	return out
}

func validatingClients(c *admissionregistrationv1.ValidatingWebhookConfiguration) []namedClient {
	out := make([]namedClient, len(c.Webhooks))
	for i := range c.Webhooks {
		out[i] = namedClient{c.Webhooks[i].Name, &c.Webhooks[i].ClientConfig}
	}
	return out
}

// webhooksOf returns the indexes of the webhooks that call the Service.
func (s *SelfSigned) webhooksOf(hooks []namedClient) []int {
	var idx []int
	for i, h := range hooks {
		if svc := h.client.Service; svc != nil && svc.Name == s.opts.Service && svc.Namespace == s.opts.Namespace {
			idx = append(idx, i)
		}
	}
	return idx
}

// webhooksPatch is a JSON patch that sets the caBundle of the webhooks
// calling the Service, testing each one's name first (the list may have
// changed since it was read); nil when every one has it already.
func (s *SelfSigned) webhooksPatch(hooks []namedClient) ([]byte, error) {
	var ops []jsonPatchOp
	for _, i := range s.webhooksOf(hooks) {
		if bytes.Equal(hooks[i].client.CABundle, s.ca) {
			continue
		}
		at := "/webhooks/" + strconv.Itoa(i)
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: at + "/name", Value: hooks[i].name},
			jsonPatchOp{Op: "add", Path: at + "/clientConfig/caBundle", Value: s.ca})
	}
	if ops == nil {
		return nil, nil
	}
	return json.Marshal(ops)
}

// conversionClient is crd's conversion webhook client when it calls the
// Service, else nil.
func (s *SelfSigned) conversionClient(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.WebhookClientConfig {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return nil
	}
	cc := c.Webhook.ClientConfig
	if cc.Service == nil || cc.Service.Name != s.opts.Service || cc.Service.Namespace != s.opts.Namespace {
		return nil
	}
	return cc
}
