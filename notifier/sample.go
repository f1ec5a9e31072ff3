package notifier

// SampleConfig is an annotated .kubewatch.yaml: kubewatch's keys, plus the
// sinks, filters and update suppression this notifier adds. ParseConfig
// accepts it as is.
const SampleConfig = `# .kubewatch.yaml, read from $KW_CONFIG or $HOME (or --config).
# Keys ignore case. Unknown keys and bad values are errors.

# One namespace for namespaced resources; "" watches all of them.
# Cluster-scoped kinds (node, namespace, persistentvolume, clusterrole,
# clusterrolebinding) ignore it.
namespace: ""

# Built-in resources. Short names work too: deploy, rc, rs, ds, sts, svc,
# po, sa, pv, ns, cm, ing. KW_POD=true (and the other KW_* toggles) turn
# one on from the environment.
resource:
  deployment: false
  replicationcontroller: false
  replicaset: false
  daemonset: false
  statefulset: false
  services: false
  pod: true
  job: false
  node: false
  clusterrole: false
  clusterrolebinding: false
  serviceaccount: false
  persistentvolume: false
  namespace: false
  secret: false      # data and stringData values are redacted
  configmap: true
  ingress: false
  hpa: false
  event: false       # events.k8s.io/v1
  coreevent: false   # core/v1 Event

# Any resource, through the dynamic client.
customresources: []
#  - group: monitoring.coreos.com
#    version: v1
#    resource: prometheusrules
#    clusterscoped: false

# Updates that change nothing are never notified (same resourceVersion, or
# only resourceVersion/generation/managedFields differ). These drop more.
updates:
  ignorestatusonly: true     # only .status changed
  ignoremetadataonly: false  # only .metadata changed (labels, annotations, finalizers...)

# Every handler configured here is used (kubewatch used only the first).
# A handler whose fields are all empty is not configured. slack, hipchat,
# mattermost, flock, cloudevent, msteams, smtp and lark are not supported.
handler:
  webhook:
    url: ""                # KW_WEBHOOK_URL
    cert: ""               # PEM file of CAs to trust (KW_WEBHOOK_CERT)
    tlsskip: false
    # includeobject: true  # the default: "object" in the payload (secrets redacted)
  slackwebhook:
    slackwebhookurl: ""    # KW_SLACK_WEBHOOK_URL
    channel: ""            # KW_SLACK_CHANNEL
    username: ""           # KW_SLACK_USERNAME
    emoji: ""              # KW_SLACK_EMOJI
  log:
    format: text           # or json; one line per event on stdout

# Every handler (and every entry of sinks:) also takes:
#   filter:
#     events: [create, update, delete]
#     namespaces: [web]            # only these
#     excludenamespaces: [kube-system]
#     labelselector: "app=web,tier!=cache"
#     resources: [pod, configmap]
#   maxattempts: 5                 # network errors, 5xx and 429 are retried
#   queuesize: 1000                # beyond it notifications are dropped and counted
#
# More sinks, several of one type if need be:
# sinks:
#   - name: audit
#     type: webhook
#     url: https://audit.example.com/hook
#     filter: {events: [delete]}
`
