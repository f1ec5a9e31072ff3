package webhookmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kloop-dev/kloop/webhook"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

const (
	// probePath serves the probe webhooks Install adds to know when the API
	// server calls the configurations.
	probePath = "/kloop-local-probe"
	// probeLabel marks the dry-run objects of the probes; the webhooks of
	// Hooks never see them.
	probeLabel   = "webhook.kloop.dev/probe"
	probeMessage = "kloop local webhook probe"
	// probeEvery is how often a probe asks again: the API server loads a
	// configuration through an informer, and nothing says when it has.
	probeEvery = 100 * time.Millisecond
	// installTimeout bounds Install's wait for the API server to call.
	installTimeout = 2 * time.Minute
	// uninstallTimeout bounds the removal at the stop.
	uninstallTimeout = 30 * time.Second
)

// LocalOptions configures local development mode.
type LocalOptions struct {
	// Host is the address the API server calls the webhooks at, and the
	// one the serving certificate is made for. Default 127.0.0.1.
	Host string
	// Dir is where the generated CA (ca.crt) and serving certificate
	// (tls.crt, tls.key) are written. "" makes a temporary directory, which
	// Serve removes when it returns.
	Dir string
	// Logger receives the logs. Default slog.Default().
	Logger *slog.Logger
}

// Hooks is what a Local installs for a Server: its webhook configurations
// and the conversion of CRDs.
type Hooks struct {
	// Name names the configurations: both are "<Name>-local". Required.
	Name string
	// Namespace, if set, limits the webhooks to objects in that namespace
	// (a namespaceSelector); "" is every namespace.
	Namespace string
	// Webhooks are the admission webhooks the Server serves, each at
	// MutatePath or ValidatePath of its Kind.
	Webhooks []Hook
	// Conversions are the names of the CRDs whose conversion the Server
	// serves at webhook.ConvertPath, such as "foos.example.com".
	Conversions []string
}

// Hook is one admission webhook of Hooks.
type Hook struct {
	// Kind is the kind the webhook is for; its path is webhook.MutatePath(Kind) or
	// webhook.ValidatePath(Kind).
	Kind schema.GroupVersionKind
	// Resource is the kind's resource, such as configmaps.
	Resource schema.GroupVersionResource
	// Mutating: a mutating webhook; else a validating one.
	Mutating bool
	// Operations default to CREATE and UPDATE for a mutating webhook, and
	// CREATE, UPDATE and DELETE for a validating one.
	Operations []admissionregistrationv1.OperationType
}

// Local is local development mode: a program that runs outside the
// cluster serves its webhooks on a loopback address with a certificate of
// its own CA, and installs URL-based webhook configurations and CRD
// conversions pointing there while it runs. Serve does it all.
type Local struct {
	opts      LocalOptions
	log       *slog.Logger
	tempDir   bool
	ca        []byte
	installed chan struct{}
	made      made // what Install made, for Uninstall
	// conversions counts the calls of the conversion webhook, counted on
	// arrival by the handler CountConversions wraps: the probe knows from
	// it that the API server calls the webhook.
	conversions atomic.Uint64
}

// CountConversions wraps the conversion webhook's handler so that Serve
// knows when the API server calls it.
func (l *Local) CountConversions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.conversions.Add(1) // on arrival: the caller may see the answer before h returns
		h.ServeHTTP(w, r)
	})
}

// made is what Install changed on the API server.
type made struct {
	name                 string // the configurations'
	mutating, validating bool
	crds                 []string
}

// NewLocal makes a CA and a serving certificate for opts.Host and writes
// them to opts.Dir (or a temporary directory). Give CertDir to the
// Server's options.
func NewLocal(opts LocalOptions) (*Local, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Local{opts: opts, log: opts.Logger, installed: make(chan struct{})}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "kloop-webhook-")
		if err != nil {
			return nil, fmt.Errorf("webhook: local certificates: %w", err)
		}
		l.opts.Dir, l.tempDir = d, true
	} else if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("webhook: local certificates: %w", err)
	}
	ca, err := WriteCerts(l.opts.Dir, opts.Host, time.Now())
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.ca = ca
	return l, nil
}

// CertDir is where the serving certificate is: ServerOptions.CertDir.
func (l *Local) CertDir() string { return l.opts.Dir }

// Host is the host the API server calls.
func (l *Local) Host() string { return l.opts.Host }

// CABundle is the PEM of the CA that signed the serving certificate.
func (l *Local) CABundle() []byte { return l.ca }

// Installed is closed once Serve has installed the hooks and the API
// server calls them.
func (l *Local) Installed() <-chan struct{} { return l.installed }

// Close removes the temporary certificate directory, if NewLocal made one.
func (l *Local) Close() error {
	if !l.tempDir {
		return nil
	}
	return os.RemoveAll(l.opts.Dir)
}

// Serve runs srv, whose CertDir is l's, installs hooks once it serves
// (Install), and at the stop (ctx done) removes them (Uninstall) before
// it stops srv; then it removes the temporary directory. It returns once
// srv's goroutines have exited, with Install's error, if any, at once.
func (l *Local) Serve(ctx context.Context, cfg *rest.Config, srv *webhook.Server, hooks Hooks) error {
	srv.Handle(probePath, http.HandlerFunc(serveProbe))
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Start(sctx) }()
	var err error
	select {
	case err = <-served:
		return errors.Join(err, l.Close())
	case <-srv.Serving():
	case <-ctx.Done():
		stop()
		return errors.Join(<-served, l.Close())
	}
	var serveErr error
	ictx, cancel := context.WithTimeout(ctx, installTimeout)
	err = l.install(ictx, cfg, srv, hooks)
	cancel()
	if err == nil {
		close(l.installed)
		select {
		case <-ctx.Done():
		case serveErr = <-served:
			served = nil
		}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uninstallTimeout)
	defer cancel()
	uerr := l.uninstall(uctx, cfg)
	stop()
	if served != nil {
		serveErr = <-served
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil // stopped while installing: not a failure
	}
	return errors.Join(err, uerr, serveErr, l.Close())
}

// install creates or updates the configurations "<Name>-local" that send
// the API server's admission calls of hooks to srv at l's host and srv's
// port (failurePolicy Fail, sideEffects None, admissionReviewVersions v1),
// and points the conversion of each CRD in hooks.Conversions at srv. It
// returns once the API server calls them: it asks, with dry-run requests
// that only probe webhooks of its own see, until they reach srv.
func (l *Local) install(ctx context.Context, cfg *rest.Config, srv *webhook.Server, hooks Hooks) error {
	if hooks.Name == "" {
		return errors.New("webhook: Hooks.Name is empty: it names the webhook configurations")
	}
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		return fmt.Errorf("webhook: the server is not serving yet (address %q): install after Serving", srv.Addr())
	}
	base := "https://" + net.JoinHostPort(l.opts.Host, port)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	l.made = made{name: hooks.Name + "-local", crds: hooks.Conversions}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range hooks.Conversions {
		crd, err := l.setConversion(ctx, ext, name, &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr(base + webhook.ConvertPath), CABundle: l.ca},
				ConversionReviewVersions: []string{"v1"},
			},
		})
		if err != nil {
			return err
		}
		crds = append(crds, crd)
	}
	mut, val := l.configurations(base, hooks, crds)
	if len(mut.Webhooks) > 0 {
		l.made.mutating = true
		if err := createOrUpdate(ctx, cs.AdmissionregistrationV1().MutatingWebhookConfigurations(), mut, func(have, want *admissionregistrationv1.MutatingWebhookConfiguration) {
			have.Webhooks = want.Webhooks
		}); err != nil {
			return err
		}
	}
	if len(val.Webhooks) > 0 {
		l.made.validating = true
		if err := createOrUpdate(ctx, cs.AdmissionregistrationV1().ValidatingWebhookConfigurations(), val, func(have, want *admissionregistrationv1.ValidatingWebhookConfiguration) {
			have.Webhooks = want.Webhooks
		}); err != nil {
			return err
		}
	}
	return l.probe(ctx, cfg, cs, srv, base, hooks, crds, len(mut.Webhooks) > 0, len(val.Webhooks) > 0)
}

// uninstall deletes the configurations Install made and sets the CRDs'
// conversion back to None.
func (l *Local) uninstall(ctx context.Context, cfg *rest.Config) error {
	if l.made.name == "" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range l.made.crds {
		if _, err := l.setConversion(ctx, ext, name, &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	name := l.made.name
	deleted := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("webhook: delete webhook configuration %s: %w", name, err))
		}
	}
	if l.made.mutating {
		deleted(cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}))
	}
	if l.made.validating {
		deleted(cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}))
	}
	if len(errs) == 0 {
		l.log.Info("Removed the local webhook configurations and conversions", "name", name)
	}
	l.made = made{}
	return errors.Join(errs...)
}

func (l *Local) setConversion(ctx context.Context, ext apiextensions.Interface, name string, conv *apiextensionsv1.CustomResourceConversion) (*apiextensionsv1.CustomResourceDefinition, error) {
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	var out *apiextensionsv1.CustomResourceDefinition
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Conversion = conv
		out, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: set the conversion of CRD %s to %s: %w", name, conv.Strategy, err)
	}
	return out, nil
}

// configurations builds the two webhook configurations: the hooks, and a
// probe webhook in each, plus one per converted CRD in the mutating one.
func (l *Local) configurations(base string, hooks Hooks, crds []*apiextensionsv1.CustomResourceDefinition) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	name := hooks.Name + "-local"
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "kloop"}}
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	var nsSel *metav1.LabelSelector
	if hooks.Namespace != "" {
		nsSel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{hooks.Namespace}}}}
	}
	notProbe := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: probeLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	probeOf := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{probeLabel: v}}
	}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr(base + path), CABundle: l.ca}
	}
	rule := func(ops []admissionregistrationv1.OperationType, gvr schema.GroupVersionResource) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{gvr.Group}, APIVersions: []string{gvr.Version}, Resources: []string{gvr.Resource},
		}}}
	}
	addMut := func(name, path string, rules []admissionregistrationv1.RuleWithOperations, ns, obj *metav1.LabelSelector) {
		mut.Webhooks = append(mut.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: name, ClientConfig: client(path), Rules: rules, FailurePolicy: &fail, SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: ns, ObjectSelector: obj,
		})
	}
	addVal := func(name, path string, rules []admissionregistrationv1.RuleWithOperations, ns, obj *metav1.LabelSelector) {
		val.Webhooks = append(val.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: client(path), Rules: rules, FailurePolicy: &fail, SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: ns, ObjectSelector: obj,
		})
	}
	cmCreate := rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, corev1.SchemeGroupVersion.WithResource("configmaps"))
	for _, h := range hooks.Webhooks {
		ops := h.Operations
		if len(ops) == 0 {
			ops = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
			if !h.Mutating {
				ops = append(ops, admissionregistrationv1.Delete)
			}
		}
		group := h.Kind.Group
		if group == "" {
			group = "core"
		}
		hname := strings.ToLower(h.Kind.Kind) + "." + h.Kind.Version + "." + group + ".kloop.dev"
		if h.Mutating {
			addMut(hname, webhook.MutatePath(h.Kind), rule(ops, h.Resource), nsSel, notProbe)
		} else {
			addVal(hname, webhook.ValidatePath(h.Kind), rule(ops, h.Resource), nsSel, notProbe)
		}
	}
	if len(val.Webhooks) > 0 {
		addVal("probe.local.kloop.dev", probePath, cmCreate, nil, probeOf("validating"))
	}
	if len(mut.Webhooks) > 0 || len(crds) > 0 {
		addMut("probe.local.kloop.dev", probePath, cmCreate, nil, probeOf("mutating"))
	}
	for i, crd := range crds {
		if v := storageVersion(crd); v != "" {
			addMut(fmt.Sprintf("probe-conversion-%d.local.kloop.dev", i), probePath,
				rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, schema.GroupVersionResource{Group: crd.Spec.Group, Version: v, Resource: crd.Spec.Names.Plural}),
				nil, probeOf("conversion"))
		}
	}
	return mut, val
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// probe waits until the API server calls each configuration's probe
// webhook and, for each CRD, the conversion webhook.
func (l *Local) probe(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, srv *webhook.Server, base string, hooks Hooks, crds []*apiextensionsv1.CustomResourceDefinition, mutating, validating bool) error {
	ns := hooks.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var probes []func() (bool, error)
	cmProbe := func(kind string) func() (bool, error) {
		return func() (bool, error) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "kloop-probe-", Namespace: ns, Labels: map[string]string{probeLabel: kind}}}
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, dry)
			return err != nil && strings.Contains(err.Error(), probeMessage), nil
		}
	}
	if mutating {
		probes = append(probes, cmProbe("mutating"))
	}
	if validating {
		probes = append(probes, cmProbe("validating"))
	}
	if len(crds) > 0 {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		for _, crd := range crds {
			other := ""
			for _, v := range crd.Spec.Versions {
				if v.Served && !v.Storage {
					other = v.Name
				}
			}
			if other == "" {
				continue // one served version: nothing is ever converted
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: other, Resource: crd.Spec.Names.Plural}
			probes = append(probes, func() (bool, error) {
				before := l.conversions.Load()
				u := &unstructured.Unstructured{}
				u.SetAPIVersion(gvr.GroupVersion().String())
				u.SetKind(crd.Spec.Names.Kind)
				u.SetGenerateName("kloop-probe-")
				u.SetLabels(map[string]string{probeLabel: "conversion"})
				var err error
				if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
					_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, u, dry)
				} else {
					_, err = dyn.Resource(gvr).Create(ctx, u, dry)
				}
				after := l.conversions.Load()
				if apierrors.IsNotFound(err) {
					return false, nil // the CRD's new version is not served yet
				}
				return after > before, nil
			})
		}
	}
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for _, p := range probes {
		for {
			ok, err := p()
			if err != nil {
				return err
			}
			if ok {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("webhook: waiting for the API server to call the webhooks of %s-local at %s (it must be able to reach that address): %w", hooks.Name, base, context.Cause(ctx))
			case <-tick.C:
			}
		}
	}
	l.log.Info("Installed the local webhook configurations; the API server calls them", "name", hooks.Name+"-local", "url", base)
	return nil
}

// serveProbe refuses every request with probeMessage: the probes are
// dry-run requests, and a refusal says that the API server called.
func serveProbe(w http.ResponseWriter, r *http.Request) {
	var ar admissionv1.AdmissionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&ar); err != nil || ar.Request == nil {
		http.Error(w, "want an admission.k8s.io/v1 AdmissionReview with a request", http.StatusBadRequest)
		return
	}
	ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: probeMessage,
	}}
	ar.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = jsonEncode(w, ar)
}

type configurationClient[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

func createOrUpdate[T interface{ GetName() string }](ctx context.Context, c configurationClient[T], want T, set func(have, want T)) error {
	_, err := c.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			have, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			set(have, want)
			_, err = c.Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("webhook: install webhook configuration %s: %w", want.GetName(), err)
	}
	return nil
}

func ptr[V any](v V) *V { return &v }

func jsonEncode(w http.ResponseWriter, v any) error { return json.NewEncoder(w).Encode(v) }
