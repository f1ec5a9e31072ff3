package fleet

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names a kubeconfig Secret is read by.
const (
	// SecretKey is the data key of a kubeconfig Secret's kubeconfig;
	// SecretKeyCAPI, Cluster API's ("<cluster>-kubeconfig" Secrets), is
	// read when SecretKey is missing.
	SecretKey     = "kubeconfig"
	SecretKeyCAPI = "value"
	// ContextAnnotation, on a kubeconfig Secret, names the kubeconfig's
	// context to use instead of its current-context.
	ContextAnnotation = "kloop.dev/kubeconfig-context"
)

// Spec is one cluster as a provider defines it.
type Spec struct {
	// Name is the cluster's name in the fleet: the home cluster's given
	// name, a file's name without its extension, or a Secret's name.
	Name string
	// Config talks to the cluster; nil when Err is set.
	Config *rest.Config
	// Err says why the definition cannot be used and what to fix.
	Err error
	// Origin says where the definition came from, for reports: "home",
	// "file <path>" or "Secret <namespace>/<name>".
	Origin string
	// Secret is the Secret the definition came from, nil for others: the
	// object events about the cluster are recorded on. Read-only.
	Secret *corev1.Secret
	// Fingerprint changes when the definition changes (a cluster whose
	// fingerprint changes is joined again).
	Fingerprint string
}

// Home is the spec of the App's own cluster.
func Home(name string, cfg *rest.Config) Spec {
	return Spec{Name: name, Config: cfg, Origin: "home", Fingerprint: "home"}
}

// CheckName returns an error unless name can name a cluster: a DNS label
// (lower-case letters, digits and '-'), as it goes into logs, metrics and
// keys.
func CheckName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%q cannot name a cluster: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// Load parses a kubeconfig and returns the rest.Config of its context
// (its current-context when context is ""). strict refuses what a
// kubeconfig of untrusted origin must not do in this process: run a
// command (exec, auth-provider) or read local files (certificate, key or
// token paths).
func Load(data []byte, context string, strict bool) (*rest.Config, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig does not parse: %w", err)
	}
	if context == "" {
		context = kc.CurrentContext
	}
	if context == "" {
		return nil, fmt.Errorf("the kubeconfig has no current-context: set it, or name one of its contexts (%s)", contextNames(kc))
	}
	c, ok := kc.Contexts[context]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig has no context %q: name one of its contexts (%s)", context, contextNames(kc))
	}
	if _, ok := kc.Clusters[c.Cluster]; !ok {
		return nil, fmt.Errorf("context %q names cluster %q, which the kubeconfig does not define", context, c.Cluster)
	}
	if strict {
		if err := checkStrict(kc, c); err != nil {
			return nil, fmt.Errorf("context %q: %w", context, err)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", context, err)
	}
	return cfg, nil
}

func contextNames(kc *clientcmdapi.Config) string {
	names := slices.Sorted(maps.Keys(kc.Contexts))
	if len(names) == 0 {
		return "it has none"
	}
	return "it has " + strings.Join(names, ", ")
}

func checkStrict(kc *clientcmdapi.Config, c *clientcmdapi.Context) error {
	cl := kc.Clusters[c.Cluster]
	if cl.CertificateAuthority != "" {
		return fmt.Errorf("certificate-authority is a file path (%s): give certificate-authority-data instead", cl.CertificateAuthority)
	}
	u, ok := kc.AuthInfos[c.AuthInfo]
	if !ok {
		return nil
	}
	switch {
	case u.Exec != nil:
		return errors.New("the user runs a command (exec), which a kubeconfig from a Secret may not: give a token or client certificate data")
	case u.AuthProvider != nil:
		return errors.New("the user has an auth-provider, which a kubeconfig from a Secret may not: give a token or client certificate data")
	case u.ClientCertificate != "" || u.ClientKey != "" || u.TokenFile != "":
		return errors.New("the user reads files (client-certificate, client-key or tokenFile): give client-certificate-data, client-key-data or token instead")
	}
	return nil
}

func fingerprint(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// FromSecret is the spec of a kubeconfig Secret: the cluster is named
// after the Secret; its kubeconfig is data[SecretKey] (else
// data[SecretKeyCAPI]), loaded strictly, at the context of annotation
// ContextAnnotation or else its current-context.
func FromSecret(s *corev1.Secret) Spec {
	sp := Spec{Name: s.Name, Origin: "Secret " + s.Namespace + "/" + s.Name, Secret: s}
	data, ok := s.Data[SecretKey]
	if !ok {
		data, ok = s.Data[SecretKeyCAPI]
	}
	context := s.Annotations[ContextAnnotation]
	sp.Fingerprint = fingerprint(data, []byte(context))
	if err := CheckName(s.Name); err != nil {
		sp.Err = err
		return sp
	}
	if !ok {
		sp.Err = fmt.Errorf("the Secret has no data key %q (nor %q): put the kubeconfig there", SecretKey, SecretKeyCAPI)
		return sp
	}
	sp.Config, sp.Err = Load(data, context, true)
	return sp
}

// kubeconfigExts are the extensions a kubeconfig file's name may end
// with; they are not part of the cluster's name.
var kubeconfigExts = []string{".kubeconfig", ".yaml", ".yml", ".conf", ".config"}

// ReadDir returns the specs of the kubeconfig files in dir, one cluster
// per file, named after the file without its extension, at the file's
// current-context. Hidden files (such as a mounted Secret's ..data) and
// directories are skipped. A file that cannot be used gives a spec with
// Err; a dir that cannot be read is an error.
func ReadDir(dir string) ([]Spec, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig directory: %w", err)
	}
	var specs []Spec
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path) // follows the symbolic links of a mounted volume
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		name := e.Name()
		for _, ext := range kubeconfigExts {
			name = strings.TrimSuffix(name, ext)
		}
		sp := Spec{Name: name, Origin: "file " + path}
		data, err := os.ReadFile(path)
		sp.Fingerprint = fingerprint(data)
		switch {
		case err != nil:
			sp.Err = err
		default:
			if sp.Err = CheckName(name); sp.Err == nil {
				sp.Config, sp.Err = Load(data, "", false)
			}
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// Explain adds what to fix to an error met talking to a cluster, where it
// can tell: a CA that does not match the server's certificate, refused
// credentials.
func Explain(err error) error {
	var ua x509.UnknownAuthorityError
	var cv *x509.CertificateInvalidError
	var hn x509.HostnameError
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w (the API server refused the kubeconfig's credentials: Unauthorized)", err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w (the cluster does not serve a kind the controllers watch: install its CRD)", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w (the kubeconfig's identity lacks the RBAC rights the controllers need)", err)
	case errors.As(err, &ua) || strings.Contains(err.Error(), "x509: certificate signed by unknown authority"):
		return fmt.Errorf("%w (the kubeconfig's certificate-authority-data does not match the API server's certificate)", err)
	case errors.As(err, &hn):
		return fmt.Errorf("%w (the API server's certificate is not for the kubeconfig's server address)", err)
	case errors.As(err, &cv):
		return fmt.Errorf("%w (the API server's certificate is not valid)", err)
	}
	return err
}
