package kloop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/kloop-dev/kloop/internal/convhub"
	"github.com/kloop-dev/kloop/internal/webhookmode"
	"github.com/kloop-dev/kloop/watcher"
	"github.com/kloop-dev/kloop/webhook"
)

// webhooks is the App's webhook server and what is declared on it.
type webhooks struct {
	srv   *webhook.Server
	local *webhookmode.Local      // Options.WebhookLocal
	self  *webhookmode.SelfSigned // Options.WebhookSelfSigned
	hooks webhookmode.Hooks       // for local mode's configurations
	paths map[string]bool
}

// newWebhooks makes the webhook server Options ask for, nil when off.
func (a *App) newWebhooks() (*webhooks, error) {
	o := a.opts
	if !o.WebhookLocal && !addrOn(o.WebhookAddr) {
		if o.WebhookSelfSigned != nil {
			return nil, errors.New("kloop.New: WebhookSelfSigned needs WebhookAddr (--webhook-bind-address), such as \":9443\", the port the Service sends to")
		}
		return nil, nil
	}
	if o.WebhookLocal && o.WebhookSelfSigned != nil {
		return nil, errors.New("kloop.New: WebhookLocal and WebhookSelfSigned: give one (local mode is for a program outside the cluster, self-signed for one behind a Service in it)")
	}
	w := &webhooks{paths: map[string]bool{}}
	sopts := webhook.ServerOptions{Addr: o.WebhookAddr, CertDir: o.WebhookCertDir, Logger: a.log}
	if o.WebhookLocal {
		port := "0"
		if addrOn(o.WebhookAddr) {
			var err error
			if _, port, err = net.SplitHostPort(o.WebhookAddr); err != nil {
				return nil, fmt.Errorf("kloop.New: WebhookAddr %q: %w", o.WebhookAddr, err)
			}
		}
		l, err := webhookmode.NewLocal(webhookmode.LocalOptions{Dir: o.WebhookCertDir, Logger: a.log})
		if err != nil {
			return nil, fmt.Errorf("kloop.New: WebhookLocal: %w", err)
		}
		w.local = l
		sopts.Addr, sopts.CertDir = net.JoinHostPort(l.Host(), port), l.CertDir()
		w.hooks = webhookmode.Hooks{Name: o.Name, Namespace: o.Namespace}
	} else if ss := o.WebhookSelfSigned; ss != nil {
		so := webhookmode.SelfSignedOptions{Service: ss.Service, Namespace: ss.Namespace, Secret: ss.Secret, Dir: o.WebhookCertDir, Logger: a.log}
		if so.Service == "" {
			so.Service = o.Name + "-webhook-service"
		}
		if so.Secret == "" {
			so.Secret = o.Name + "-webhook-server-cert"
		}
		if so.Namespace == "" {
			so.Namespace = podNamespace()
		}
		if so.Namespace == "" {
			return nil, errors.New("kloop.New: WebhookSelfSigned needs the namespace of the webhook Service and Secret: set WebhookSelfSigned.Namespace (--webhook-service-namespace); it defaults to the pod's namespace in a cluster")
		}
		s, err := webhookmode.NewSelfSigned(so)
		if err != nil {
			return nil, fmt.Errorf("kloop.New: WebhookSelfSigned: %w", err)
		}
		w.self = s
		sopts.CertDir = s.CertDir()
	} else if o.WebhookCertDir == "" {
		return nil, fmt.Errorf("kloop.New: WebhookAddr %q needs WebhookCertDir (--webhook-cert-dir), the directory holding the serving tls.crt and tls.key, or WebhookLocal (--webhook-local) to make them", o.WebhookAddr)
	}
	srv, err := webhook.NewServer(sopts)
	if err != nil {
		if w.local != nil {
			_ = w.local.Close()
		}
		if w.self != nil {
			_ = w.self.Close()
		}
		return nil, fmt.Errorf("kloop.New: webhook server: %w", err)
	}
	w.srv = srv
	return w, nil
}

// runnable is what Run runs for the webhooks: the server, or in local
// mode the server with its configurations installed.
func (w *webhooks) runnable(a *App) webhookRunnable {
	if w.self != nil {
		return webhookRunnable{start: func(ctx context.Context) error { return w.self.Serve(ctx, a.cfg, w.srv) }}
	}
	if w.local == nil {
		return webhookRunnable{start: w.srv.Start}
	}
	hooks := w.hooks
	return webhookRunnable{start: func(ctx context.Context) error { return w.local.Serve(ctx, a.cfg, w.srv, hooks) }}
}

type webhookRunnable struct{ start func(context.Context) error }

func (r webhookRunnable) Start(ctx context.Context) error { return r.start(ctx) }

// NeedLeaderElection is false: every replica answers the API server.
func (webhookRunnable) NeedLeaderElection() bool { return false }

// WebhookServer is the App's webhook server (Options.WebhookAddr or
// WebhookLocal), for handlers of your own; nil when off. Its Addr is the
// bound address once it serves.
func (a *App) WebhookServer() *webhook.Server {
	if a.webhooks == nil {
		return nil
	}
	return a.webhooks.srv
}

// WebhooksReady is closed once Run serves the webhooks (with
// WebhookSelfSigned, once the Secret is settled and the caBundles set);
// with WebhookLocal, once the API server calls them too. Nil (never ready)
// when they are off.
func (a *App) WebhooksReady() <-chan struct{} {
	switch {
	case a.webhooks == nil:
		return nil
	case a.webhooks.local != nil:
		return a.webhooks.local.Installed()
	default:
		return a.webhooks.srv.Serving()
	}
}

// WebhookBuilder declares the webhooks of one kind, in one statement:
//
//	err := kloop.NewWebhook(app, cronJobs).
//		Defaulter(defaultCronJob).Validator(cronJobValidator{}).Conversion().Complete()
//
// The Defaulter is served at webhook.MutatePath and the Validator at
// webhook.ValidatePath of the handle's kind, the paths kubebuilder's
// markers give; Conversion serves webhook.ConvertPath. With
// Options.WebhookLocal the App also installs their configurations while
// it runs.
type WebhookBuilder[T watcher.Object] struct {
	app  *App
	h    *Handle[T]
	def  func(ctx context.Context, obj T) error
	val  webhook.Validator[T]
	conv bool
}

// NewWebhook starts the declaration of the webhooks of h's kind on the
// App's webhook server (Options.WebhookAddr or WebhookLocal).
func NewWebhook[T watcher.Object](app *App, h *Handle[T]) *WebhookBuilder[T] {
	return &WebhookBuilder[T]{app: app, h: h}
}

// Defaulter sets defaults on objects being created or updated (see
// webhook.Mutating).
func (b *WebhookBuilder[T]) Defaulter(fn func(ctx context.Context, obj T) error) *WebhookBuilder[T] {
	b.def = fn
	return b
}

// Validator checks creates, updates and deletes (see webhook.Validating).
func (b *WebhookBuilder[T]) Validator(v webhook.Validator[T]) *WebhookBuilder[T] {
	b.val = v
	return b
}

// Conversion serves the conversion of the kind's CRD (named resource.group,
// as the handle's resource says) between its versions, by the
// hub-and-spoke contract of webhook.Hub and webhook.Convertible: exactly
// one version of the kind in the App's scheme must be a Hub.
func (b *WebhookBuilder[T]) Conversion() *WebhookBuilder[T] {
	b.conv = true
	return b
}

// Complete registers the webhooks. A mistake (no webhook server, nothing
// declared, a kind declared twice, no Hub for Conversion) is returned and
// recorded in the App, whose Run returns it too.
func (b *WebhookBuilder[T]) Complete() error {
	err := b.complete()
	if err != nil {
		err = fmt.Errorf("kloop.NewWebhook[%T]: %w", *new(T), err)
		b.app.fail(err)
	}
	return err
}

func (b *WebhookBuilder[T]) complete() error {
	a, h := b.app, b.h
	if h == nil {
		return errors.New("the handle is nil: pass the kloop.Objects handle of the kind")
	}
	if h.err != nil {
		return h.err
	}
	w := a.webhooks
	if w == nil {
		return errors.New("the App serves no webhooks: set Options.WebhookAddr and WebhookCertDir (--webhook-bind-address, --webhook-cert-dir) or WebhookLocal (--webhook-local)")
	}
	if b.def == nil && b.val == nil && !b.conv {
		return errors.New("nothing to serve: give a Defaulter, a Validator or Conversion")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return errors.New("declared after Run: declare webhooks before Run")
	}
	gvk, gvr := h.gvk, h.gvr
	scheme, log := a.opts.Scheme, a.log
	crd := ""
	if b.conv {
		if gvk.Group == "" {
			return fmt.Errorf("Conversion: %s is a built-in kind, not a custom resource", gvk.Kind)
		}
		if _, err := convhub.Of(scheme, gvk.GroupKind()); err != nil {
			return fmt.Errorf("Conversion: %w", err)
		}
		crd = gvr.Resource + "." + gvr.Group
	}
	var paths []string
	if b.def != nil {
		paths = append(paths, webhook.MutatePath(gvk))
	}
	if b.val != nil {
		paths = append(paths, webhook.ValidatePath(gvk))
	}
	for _, p := range paths {
		if w.paths[p] {
			return fmt.Errorf("%s has a webhook at %s already: declare each kind's webhooks once", gvk.Kind, p)
		}
	}
	if b.def != nil {
		p := webhook.MutatePath(gvk)
		w.srv.Handle(p, webhook.Mutating(scheme, b.def, log.With("webhook", p)))
		w.hooks.Webhooks = append(w.hooks.Webhooks, webhookmode.Hook{Kind: gvk, Resource: gvr, Mutating: true})
	}
	if b.val != nil {
		p := webhook.ValidatePath(gvk)
		w.srv.Handle(p, webhook.Validating(scheme, b.val, log.With("webhook", p)))
		w.hooks.Webhooks = append(w.hooks.Webhooks, webhookmode.Hook{Kind: gvk, Resource: gvr})
	}
	for _, p := range paths {
		w.paths[p] = true
	}
	if crd != "" {
		if !w.paths[webhook.ConvertPath] {
			w.paths[webhook.ConvertPath] = true
			var h http.Handler = webhook.Conversion(scheme, log.With("webhook", webhook.ConvertPath))
			if w.local != nil {
				h = w.local.CountConversions(h) // local mode's probe waits for a call
			}
			w.srv.Handle(webhook.ConvertPath, h)
		}
		for _, c := range w.hooks.Conversions {
			if c == crd {
				return fmt.Errorf("Conversion of CRD %s is declared twice", crd)
			}
		}
		w.hooks.Conversions = append(w.hooks.Conversions, crd)
	}
	return nil
}
