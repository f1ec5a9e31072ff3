// Package webhook serves the API server's webhooks for a controller
// program: admission (defaulting and validation of a kind) and CRD
// conversion between versions.
//
// A Server serves them over TLS with a certificate from a directory,
// usually a mounted kubernetes.io/tls Secret that cert-manager renews; the
// files are read again when they change, and a broken new pair leaves the
// old one in service. It runs on every replica (no leader election).
//
// Handlers are typed: Mutating calls a func(ctx, T) error with the decoded
// object and computes the JSON patch itself; Validating calls a Validator[T]. A
// returned apierrors.APIStatus error (apierrors.NewInvalid with field
// errors) reaches the client as that status; any other error is a 403
// refusal with its message; a panic is a refusal with code 500, never a
// crash. RequestFrom gives the admission request itself. The paths
// (MutatePath, ValidatePath, ConvertPath) are controller-runtime's, so the
// manifests kubebuilder's markers make match.
//
// Conversion follows controller-runtime's hub-and-spoke contract: one
// version of a kind is the Hub, the others are Convertible to and from it.
//
// The App's local mode (kloop.Options.WebhookLocal) runs a program outside the cluster with
// its webhooks: a CA and a certificate of its own, URL-based webhook
// configurations and CRD conversions pointing at a loopback address while
// it runs, removed at the stop. It returns only once the API server
// calls the webhooks.
//
// The App's self-signed mode (kloop.Options.WebhookSelfSigned) is the
// in-cluster option without cert-manager: a CA and a
// serving certificate for a Service, kept in a kubernetes.io/tls Secret
// that replicas starting together agree on (writes are guarded by the
// resourceVersion), and its CA set as the caBundle of every webhook
// configuration's webhook and CRD conversion whose clientConfig.service
// is that Service. It checks the Secret at each start only: the
// certificates last ten years and are replaced at a start within 30 days
// of their end. Its end-to-end test runs against an API server that cannot
// reach a Service in a cluster, so what it checks is the Secret, the
// served certificate and the caBundles, not a call through the Service.
//
// Most programs use the webhook server through the kloop package's
// NewWebhook builder and Options.WebhookAddr; this package is for the
// handlers alone or a server of one's own.
package webhook

// The rights of the App's self-signed mode (kloop.Options.WebhookSelfSigned):
// its Secret, in its namespace ("system" is kustomize's placeholder for the
// deployable's namespace), and the cluster-scoped webhook configurations
// and CRDs whose caBundle it sets.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update,namespace=system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;patch
