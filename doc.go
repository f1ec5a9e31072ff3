// Package kloop assembles a controller program from kloop's packages in a
// dozen lines: one App per process, a typed Handle per kind, and each
// controller declared in one statement.
//
// # A controller, step by step
//
// Take sample-controller's job: for every Foo keep a Deployment. First the
// App, made from a *rest.Config and Options. The scheme, logger and metrics
// registry are given here once and every component uses them; nothing
// listens on a port unless MetricsAddr or HealthAddr asks for it. Package
// cli turns the standard command-line flags (--kubeconfig,
// --leader-elect, --metrics-bind-address, --log-level, ...) into both.
//
//	app, err := kloop.New(cfg, kloop.Options{Name: "foo-controller", Scheme: kloop.NewScheme(v1alpha1.AddToScheme)})
//
// Then a handle per kind the controller reads or writes. Reads (Get, List)
// come from the App's shared informer cache, after waiting until the cache
// holds the App's own earlier writes, so a reconcile never acts on a state
// older than what it wrote itself; writes (Create, Update, UpdateStatus,
// WriteStatus, Apply, Patch, Delete) go to the API server through the App's
// client, with the App's name as field manager. The resource is found
// through discovery, or named with ObjectsOptions.Resource:
//
//	foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
//	deployments := kloop.Objects[*appsv1.Deployment](app)
//
// Then the controller, in one statement: For the kind it reconciles, Owns
// the kinds whose changes wake their owner, Watches anything else (MapTo
// maps a kind's objects to keys), and its workers, rate limiter, retries and
// timeout. The reconcile function receives the key only:
//
//	_, err = kloop.NewController(app, "foo-controller", r.Reconcile).
//		For(foos).Owns(deployments).Workers(2).Complete()
//
// where
//
//	func (r *Reconciler) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error)
//
// returns controller.Result{RequeueAfter: d} to look again later, an error
// to retry with back-off, or controller.TerminalError(err) for a failure
// that retrying cannot fix (the API server's Invalid, an admission denial
// and a field-ownership conflict are such failures unless wrapped by
// controller.Retry). Each failure is a Warning event on the object. A
// controller keyed by a type of the program's
// own is NewKeyedController, with Watches only (For and Owns enqueue a
// cache.Key). Finally:
//
//	return app.Run(ctx) // ctx from cli, or manager.SignalContext
//
// Run starts the informers (on every replica, so a standby has warm
// caches), the event recorder, and the controllers (with leader election,
// only on the leader), and returns once all have stopped. kloop.Run does
// New, the declarations (a setup function) and Run in one call.
//
// # What a reconcile needs, written once
//
// A reconciler that writes only what changed needs the same few things
// whatever its kind, and the builder has them:
//
//   - Handle.WriteStatus writes a status only when it differs from the
//     cached one, and reports whether it wrote. It remembers its last
//     write per object, so a CRD whose schema prunes status fields is not
//     rewritten in a loop, and a reconcile woken only by its own status
//     write is skipped (see controller.Options.ReconcileOwnWrites).
//   - SetCondition sets a metav1.Condition stamped with the object's
//     generation, moving lastTransitionTime only when the status changes.
//   - Handle.Repair applies what the controller owns only when a
//     server-side apply would change the live object (fields others own
//     are not compared), so an object in place costs no request, guarded by the resourceVersion it
//     checked; Handle.GetOrCreate creates what the cache does not hold.
//   - Handle.DeleteControlledBy deletes what an owner controls under names
//     it no longer wants (after a rename), in the background so that what
//     those own goes too; Handle.ListControlledBy lists what it controls.
//   - Handle.WithTransform trims each object before the cache keeps it, so the
//     cache holds only what the reconcile reads.
//
// # Operators
//
// A controller that manages more than one owner-reference tree (an
// operator) needs a few more things, each one call:
//
//   - App.SetControllerReference and App.SetOwnerReference set owner
//     references with the kind from the App's scheme (objects read from a
//     cache have no TypeMeta), refusing a second controller and references
//     across namespaces; App.ObjectReference makes a corev1.ObjectReference.
//   - Handle.Finalize runs a reconcile under a finalizer: it adds the
//     finalizer before the first apply, and on deletion runs the cleanup
//     and removes the finalizer only once the cleanup succeeded.
//   - Handle.AddIndex and Handle.ByIndex index a kind by values of your own,
//     kept per namespace for a namespaced kind; ByIndex waits for the App's
//     own writes as List does, Lister().ByIndex reads without waiting.
//   - controller.LoggerFrom(ctx) is the reconcile's logger: its lines carry
//     the controller, the key (namespace and name) and a reconcileID that
//     tells one reconcile's lines from another's.
//
// # Complete programs
//
// cmd/foo-controller with samples/foo (sample-controller's Foo →
// Deployment) and samples/confighash (a ConfigMap hash stamped on the
// Deployments that mount it, with an index and MapTo) are whole programs of
// this shape, each run against a real API server by its tests.
//
// # Webhooks
//
// An operator's admission and conversion webhooks are declared per kind
// like its controllers, and served by the App on a TLS address of its own
// (Options.WebhookAddr, WebhookCertDir; package webhook):
//
//	err := kloop.NewWebhook(app, cronJobs).
//		Defaulter(defaultCronJob).Validator(cronJobValidator{}).Conversion().Complete()
//
// The paths are controller-runtime's, so kubebuilder's webhook markers
// and manifests fit. Options.WebhookLocal (--webhook-local) runs them
// outside the cluster: a certificate of its own CA on 127.0.0.1, and
// webhook configurations and CRD conversions pointing there while Run
// runs. In a cluster the certificate comes from cert-manager (a mounted
// Secret), or without it from Options.WebhookSelfSigned
// (--webhook-self-signed-secret): a Secret the App writes, whose CA it
// sets as the caBundle of the webhooks that call its Service.
//
// # Errors
//
// Declarations do not return an error each: a mistake (a type missing from
// the scheme, a kind the API server does not serve, Owns before For) is
// kept in the App and Run returns every one of them, each naming what to
// fix, without starting anything. Complete and Handle.Err return them too,
// for a program that wants to stop at the first.
//
// # The packages underneath
//
// The App hides nothing: Manager, Factory, Client, Recorder and each
// Handle's Informer and Resource are the packages' own types, and every
// package works without this one.
package kloop
