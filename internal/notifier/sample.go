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

# Named in every message (the text starts with it) and payload. KW_CLUSTER_NAME.
clustername: ""

# What was notified, kept across restarts: changes made while the notifier
# was down are notified when it is back, and nothing twice.
checkpoint:
  type: configmap            # or file (path:), or none
  # namespace: ""            # default: the watched namespace, else the pod's
  # name: kubewatch-checkpoint
  # maxobjects: 10000        # past it, a restart notifies nothing it missed

# Incidents, for the sinks that set incidents: true: the changes of an
# object (or of the objects one workload controls) are one incident, opened
# by one message, updated in place or carried by id, resolved once healthy.
# incidents:
#   window: 5m               # quiet time before a healthy incident resolves
#   groupbyowner: false      # a Deployment's Pods are one incident of it
#   loglines: 0              # last lines of a failed container's previous log (pods/log)
#   redact: ["card=\\d+"]  # more patterns hidden in log lines

# Silences: nothing is sent in a quiet time, nor about an object or
# namespace annotated (or labelled) <prefix>/silence-until=<RFC 3339 time>.
# silences:
#   prefix: notifier.kloop.dev
#   times:
#     - {from: "22:00", to: "06:00", timezone: Europe/Berlin, namespaces: [batch]}

# Every handler configured here is used (kubewatch used only the first). A
# handler whose fields are all empty is not configured. Each one's
# environment variables fill in what the file leaves empty.
handler:
  slack:
    token: ""              # bot token (KW_SLACK_TOKEN)
    channel: ""            # KW_SLACK_CHANNEL
    title: ""              # default kubewatch (KW_SLACK_TITLE)
  slackwebhook:
    slackwebhookurl: ""    # KW_SLACK_WEBHOOK_URL
    channel: ""            # KW_SLACK_CHANNEL
    username: ""           # KW_SLACK_USERNAME
    emoji: ""              # KW_SLACK_EMOJI
  hipchat:
    token: ""              # KW_HIPCHAT_TOKEN
    room: ""               # KW_HIPCHAT_ROOM
    url: ""                # default https://api.hipchat.com/v2 (KW_HIPCHAT_URL)
  mattermost:
    url: ""                # incoming webhook (KW_MATTERMOST_URL)
    channel: ""            # KW_MATTERMOST_CHANNEL
    username: ""           # KW_MATTERMOST_USERNAME
  flock:
    url: ""                # KW_FLOCK_URL
  webhook:
    url: ""                # KW_WEBHOOK_URL
    cert: ""               # PEM file of CAs to trust (KW_WEBHOOK_CERT)
    tlsskip: false
    # includeobject: false   # add "object" (and "oldObject"), secrets redacted
    # includechanges: false  # add "changes": the changed field paths
  cloudevent:
    url: ""                # KW_CLOUDEVENT_URL; ADVANCED_FILTERS=true filters it
  msteams:
    webhookurl: ""         # KW_MSTEAMS_WEBHOOKURL
    # card: messagecard    # or adaptive, for a Teams Workflows webhook
  smtp:
    to: ""                 # a@example.com, b@example.com
    from: ""
    smarthost: ""          # host:port; port 465 (or ssl: true) is implicit TLS
    subject: ""            # default "Kubewatch notification"
    requireTLS: false      # STARTTLS, failing if the server lacks it
    hello: ""              # EHLO name
    headers: {}
    auth: {username: "", password: "", identity: "", secret: ""}
  lark:
    webhookurl: ""         # KW_LARK_WEBHOOK_URL
  log:
    format: text           # or json; one line per event on stdout

# Every handler (and every entry of sinks:) also takes:
#   template: "{{.Reason}} {{.Kind}} {{.Namespace}}/{{.Name}} {{join .Changes \", \"}}"
#                                  # Go text/template; default kubewatch's text
#   advancedfilter: false          # kubewatch's advanced filters, on transitions
#   incidents: false               # incidents (see incidents:) instead of a message per change
#   filter:
#     events: [create, update, delete]
#     namespaces: [web]            # only these
#     excludenamespaces: [kube-system]
#     labelselector: "app=web,tier!=cache"
#     resources: [pod, configmap]  # the route by kind
#     severity: warning            # at least: info, warning (warning events, unready) or failed
#   maxattempts: 5                 # network errors, 5xx and 429 are retried
#   queuesize: 1000                # beyond it changes wait per object, merged, and are sent as it has room
#
# More sinks, several of one type if need be:
# sinks:
#   - name: audit
#     type: webhook
#     url: https://audit.example.com/hook
#     filter: {events: [delete]}
`
