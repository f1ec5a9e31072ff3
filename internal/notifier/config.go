package notifier

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// ConfigFileName is kubewatch's config file name, looked up in $KW_CONFIG,
// else in the home directory (see DefaultConfigPath).
const ConfigFileName = ".kubewatch.yaml"

// Defaults of a sink's delivery settings.
const (
	DefaultMaxAttempts = 5
	DefaultQueueSize   = 1000
	// MaxQueueSize bounds QueueSize: a sink's queue is allocated when
	// the notifier is built.
	MaxQueueSize = 1000000
)

// Config is what the notifier watches and where it sends notifications:
// the parsed form of a .kubewatch.yaml file. Build it with ParseConfig or
// LoadConfig, which validate it; a Config built by hand is validated by New.
type Config struct {
	// Namespace limits namespaced resources to one namespace; "" is all.
	// Cluster-scoped kinds (nodes, namespaces, ...) ignore it, as in
	// kubewatch.
	Namespace string
	// Resources are the canonical names of the built-in resources watched
	// (see the `resource:` keys of the sample).
	Resources []string
	// CustomResources are watched through the dynamic client.
	CustomResources []CustomResource
	// Updates says which updates are not worth a notification.
	Updates UpdatePolicy
	// Sinks receive the notifications, each through its own filter and
	// queue.
	Sinks []SinkConfig
	// ClusterName, if set, is in every notification: the text starts
	// with "`<name>` - " and the webhook and cloudevent payloads carry it
	// (cluster, clusterUid). Environment: KW_CLUSTER_NAME, else
	// KUBEWATCH_NAME.
	ClusterName string
	// Checkpoint keeps what was notified across restarts (see
	// CheckpointConfig). The zero value is a ConfigMap.
	Checkpoint CheckpointConfig
	// Incidents configures the sinks that set incidents: true.
	Incidents IncidentConfig
	// Silences silence notifications to every sink.
	Silences SilenceConfig
	// Warnings are what ParseConfig accepted as kubewatch would but a
	// reader should know, each naming its key: keys kubewatch ignores
	// (reason:, a handler's enabled:, an unknown resource), a handler whose
	// fields are all empty, no handler at all (the log sink stands in, as
	// kubewatch's default handler), nothing to watch. The notifier logs
	// them at start; `notifier config check` prints them.
	Warnings []string
}

// IncidentConfig says how the changes of an object become incidents, for
// the sinks that ask for them (SinkConfig.Incidents).
type IncidentConfig struct {
	// Window is how long an incident whose objects are all healthy (or
	// gone) waits for a further change before it resolves. Default
	// DefaultIncidentWindow.
	Window time.Duration
	// GroupByOwner makes the changes of the objects one workload controls
	// (a Deployment's Pods, through its ReplicaSets) one incident of the
	// workload.
	GroupByOwner bool
	// LogLines, if above 0, adds the last LogLines lines of a failed
	// container's previous log (pods/log, previous=true) to a Pod's
	// explanation, redacted (see Redact). Off by default: logs may hold
	// secrets.
	LogLines int
	// Redact are regular expressions whose matches in log lines are
	// replaced by [redacted] (the first group, if any, is kept), besides
	// the built-in ones for password=, token:, bearer and the like.
	Redact []string
}

// CustomResource names a resource by group, version and plural name.
type CustomResource struct {
	Group, Version, Resource string
	// ClusterScoped resources ignore Config.Namespace.
	ClusterScoped bool
}

// UpdatePolicy suppresses updates. Updates that change nothing (the same
// resourceVersion, or no field but resourceVersion, generation and
// managedFields) are always suppressed.
type UpdatePolicy struct {
	// IgnoreStatusOnly suppresses updates that change only .status.
	IgnoreStatusOnly bool
	// IgnoreMetadataOnly suppresses updates that change only .metadata
	// (labels, annotations, finalizers, owners, deletionTimestamp).
	IgnoreMetadataOnly bool
}

// Sink types: kubewatch's ten handlers, and log.
const (
	SinkWebhook      = "webhook"
	SinkSlackWebhook = "slackwebhook"
	SinkSlack        = "slack"
	SinkMSTeams      = "msteams"
	SinkMattermost   = "mattermost"
	SinkFlock        = "flock"
	SinkLark         = "lark"
	SinkHipchat      = "hipchat"
	SinkCloudEvent   = "cloudevent"
	SinkSMTP         = "smtp"
	SinkLog          = "log"
)

var sinkTypes = []string{SinkSlack, SinkSlackWebhook, SinkHipchat, SinkMattermost, SinkFlock, SinkWebhook, SinkCloudEvent, SinkMSTeams, SinkSMTP, SinkLark, SinkLog}

// msteams card formats.
const (
	// CardMessageCard is the legacy Office 365 connector MessageCard
	// kubewatch sends (the default).
	CardMessageCard = "messagecard"
	// CardAdaptive is a message with an Adaptive Card, as Teams Workflows
	// webhooks take it.
	CardAdaptive = "adaptive"
)

// SinkConfig is one destination.
type SinkConfig struct {
	// Name identifies the sink in logs and metrics; unique. Default: its
	// type, then type-2, type-3... for further unnamed sinks of a type.
	Name string
	// Type is one of the Sink* constants.
	Type string
	// URL is where the sink sends: the webhook URL of webhook,
	// slackwebhook (slackwebhookurl), msteams and lark (webhookurl),
	// mattermost, flock and cloudevent; the API base URL of hipchat
	// (default DefaultHipchatURL) and slack (apiurl, default
	// DefaultSlackAPIURL).
	URL string
	// Cert is a PEM file of CAs to trust for URL (or the SMTP server);
	// TLSSkip skips verification.
	Cert    string
	TLSSkip bool
	// Channel: slack, slackwebhook and mattermost. Username: slackwebhook
	// and mattermost. Emoji: slackwebhook.
	Channel, Username, Emoji string
	// Token: slack's bot token, hipchat's room token. Room: hipchat.
	Token, Room string
	// Title of slack and msteams messages. Default DefaultTitle.
	Title string
	// Card is msteams' format: CardMessageCard (default) or CardAdaptive.
	Card string
	// SMTP configures an smtp sink.
	SMTP SMTPConfig
	// IncludeObject adds the object (and, for an update, the old one) to
	// the webhook payload, secrets redacted; IncludeChanges adds the
	// changed field paths. Both off by default: the payload is
	// kubewatch's.
	IncludeObject, IncludeChanges bool
	// Template is a Go text/template for the text (see DefaultTemplate);
	// empty is kubewatch's text.
	Template string
	// AdvancedFilter applies kubewatch's advanced filters, judged on
	// transitions (see advanced.go). Default on for cloudevent sinks when
	// ADVANCED_FILTERS=true, as in kubewatch.
	AdvancedFilter bool
	// Format of a log sink: "text" (default) or "json".
	Format string
	// Incidents sends incidents instead of one message per change (see
	// the package doc, Incidents). Off by default: kubewatch's messages.
	Incidents bool
	// Filter selects the events this sink gets; the zero value passes all.
	Filter FilterConfig
	// MaxAttempts bounds delivery attempts of one notification. Default 5.
	MaxAttempts int
	// QueueSize bounds the notifications waiting for delivery. Changes
	// beyond it are not dropped: they wait per object, merged into one
	// notification of its latest state, until the queue has room (see the
	// package doc, Full queues). Default 1000, at most MaxQueueSize.
	QueueSize int
}

// SMTPConfig is kubewatch's smtp handler.
type SMTPConfig struct {
	// To (comma-separated), From and Smarthost (host:port) are required.
	To, From, Smarthost string
	// Subject defaults to DefaultSubject.
	Subject string
	// Headers are added to every mail.
	Headers map[string]string
	// RequireTLS: STARTTLS, failing if the server does not offer it.
	RequireTLS bool
	// SSL: implicit TLS, as always on port 465.
	SSL bool
	// Hello is the EHLO name.
	Hello string
	Auth  SMTPAuth
}

// SMTPAuth are the credentials: CRAM-MD5 uses Secret, PLAIN Password and
// Identity, LOGIN Password; the first the server offers of those is used.
type SMTPAuth struct {
	Username, Password, Identity, Secret string
}

// FilterConfig selects events. Empty fields select everything.
type FilterConfig struct {
	// Events are the event types passed: create, update, delete.
	Events []EventType
	// Namespaces, if set, are the only namespaces passed.
	// ExcludeNamespaces are never passed. Cluster-scoped objects have the
	// namespace "" and pass a Namespaces list only if it holds "".
	Namespaces, ExcludeNamespaces []string
	// LabelSelector is matched against the object's labels
	// (k8s.io/apimachinery/pkg/labels syntax).
	LabelSelector string
	// Resources are resource names (built-in names or aliases, or a
	// custom resource's plural) passed; each must be one the Config watches.
	Resources []string
	// Severity is the least severity passed: info (all, the default),
	// warning or failed, derived from the object (see Explanation).
	Severity string
}

// DefaultConfigPath is kubewatch's lookup: $KW_CONFIG/.kubewatch.yaml, else
// $HOME/.kubewatch.yaml. getenv is os.Getenv when nil.
func DefaultConfigPath(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	dir := getenv("KW_CONFIG")
	if dir == "" {
		dir = getenv("HOME")
	}
	if dir == "" {
		dir, _ = os.UserHomeDir()
	}
	return filepath.Join(dir, ConfigFileName)
}

// LoadConfig reads and parses the file at path (see ParseConfig).
func LoadConfig(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := ParseConfig(data, lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses a .kubewatch.yaml document, applies kubewatch's
// environment overrides read through lookupEnv (os.LookupEnv when nil) and
// validates the result. Keys match without regard to case.
//
// A file kubewatch runs with runs here too: where kubewatch ignores a key
// (at the top level, in a handler, among the resources and custom
// resources) it is accepted with a warning naming it (Config.Warnings),
// and a file with no handler sends to the log. A value kubewatch would
// fail to read, a value that cannot work (an empty URL of a handler that
// is set) and any unknown key in the sections kubewatch does not have
// (sinks, filter, updates, checkpoint) is an error naming the key and what
// is allowed; all of them are reported at once.
func ParseConfig(data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("config: not YAML: %w", err)
	}
	var root any
	if err := json.Unmarshal(js, &root); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p := &parser{}
	cfg := p.config(node{path: "", v: root})
	p.env(cfg, lookupEnv)
	if len(p.errs) > 0 {
		return nil, &ConfigError{Problems: p.errs}
	}
	for _, hn := range p.enabledEmpty {
		typ := strings.ToLower(lastPathElem(hn.path))
		if !slices.ContainsFunc(cfg.Sinks, func(s SinkConfig) bool { return s.Type == typ }) {
			p.warn(hn, "enabled, but none of its fields is set, here or in the environment: not configured (kubewatch ignores it too); give its fields values")
		}
	}
	if len(cfg.Resources) == 0 && len(cfg.CustomResources) == 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("resource: nothing to watch, so nothing is notified (as in kubewatch); set one of %s to true, or list customresources", resourceNames()))
	}
	if len(cfg.Sinks) == 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("handler: no handler configured: notifications go to the log, as kubewatch's default handler does; configure one of %s under handler:, or list sinks:", strings.Join(sinkTypes[:len(sinkTypes)-1], ", ")))
		cfg.Sinks = append(cfg.Sinks, SinkConfig{Type: SinkLog})
	}
	cfg.Warnings = p.warnings
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ConfigError lists every problem found in a config.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return "config: " + e.Problems[0]
	}
	return "config: " + strings.Join(e.Problems, "; ")
}

// Validate checks a Config, also one built by hand, and fills in the
// defaults (sink names, attempts, queue sizes).
func (c *Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	// A resource listed twice would get two handlers on the one shared
	// informer: every change notified twice.
	seen := map[string]string{}
	for _, name := range c.Resources {
		r, ok := lookupResource(name)
		if !ok {
			bad("resource.%s: unknown resource; allowed: %s", name, resourceNames())
			continue
		}
		if prev, dup := seen[r.name]; dup {
			bad("resource.%s: names the same resource as resource.%s", name, prev)
			continue
		}
		seen[r.name] = name
	}
	seenCR := map[string]int{}
	for i, cr := range c.CustomResources {
		if cr.Version == "" || cr.Resource == "" {
			bad("customresources[%d]: version and resource are required (group is empty for the core group)", i)
			continue
		}
		gr := cr.Resource
		if cr.Group != "" {
			gr = cr.Group + "/" + cr.Resource
		}
		if prev, dup := seenCR[gr]; dup {
			bad("customresources[%d]: %s is already watched by customresources[%d]", i, gr, prev)
			continue
		}
		seenCR[gr] = i
	}
	// What a sink's filter.resources may name: events carry the canonical
	// name of a built-in resource, the plural of a custom one.
	watched := map[string]bool{}
	var watchedNames []string
	for name := range seen {
		watched[name] = true
		watchedNames = append(watchedNames, name)
	}
	sort.Strings(watchedNames)
	for _, cr := range c.CustomResources {
		if !watched[cr.Resource] {
			watched[cr.Resource] = true
			watchedNames = append(watchedNames, cr.Resource)
		}
	}
	if len(c.Sinks) == 0 {
		bad("handler: no handler configured; configure one of %s under handler:, or list sinks:", strings.Join(sinkTypes, ", "))
	}
	names := map[string]bool{}
	counts := map[string]int{}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		if s.Name == "" {
			counts[s.Type]++
			s.Name = s.Type
			if counts[s.Type] > 1 {
				s.Name = fmt.Sprintf("%s-%d", s.Type, counts[s.Type])
			}
		}
		where := "sink " + s.Name
		if names[s.Name] {
			bad("%s: name used twice; sink names must be unique", where)
		}
		names[s.Name] = true
		if s.MaxAttempts == 0 {
			s.MaxAttempts = DefaultMaxAttempts
		}
		if s.QueueSize == 0 {
			s.QueueSize = DefaultQueueSize
		}
		if s.MaxAttempts < 0 {
			bad("%s: maxattempts %d; allowed: at least 1", where, s.MaxAttempts)
		}
		// The queue is allocated up front.
		if s.QueueSize < 0 || s.QueueSize > MaxQueueSize {
			bad("%s: queuesize %d; allowed: 1 to %d", where, s.QueueSize, MaxQueueSize)
		}
		checkURL := func(key string, required bool) {
			if s.URL == "" {
				if required {
					bad("%s: %s is required for a %s sink", where, key, s.Type)
				}
				return
			}
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				// Not the URL itself: its path may be a credential.
				bad("%s: %s: want an http:// or https:// URL with a host", where, key)
			}
		}
		need := func(v, key string) {
			if v == "" {
				bad("%s: %s is required for a %s sink", where, key, s.Type)
			}
		}
		switch s.Type {
		case SinkWebhook, SinkFlock, SinkCloudEvent:
			checkURL("url", true)
		case SinkSlackWebhook:
			checkURL("slackwebhookurl", true)
		case SinkMSTeams:
			checkURL("webhookurl", true)
			if s.Card == "" {
				s.Card = CardMessageCard
			}
			if s.Card != CardMessageCard && s.Card != CardAdaptive {
				bad("%s: card %q; allowed: %s, %s", where, s.Card, CardMessageCard, CardAdaptive)
			}
		case SinkLark:
			checkURL("webhookurl", true)
		case SinkMattermost:
			checkURL("url", true)
			need(s.Channel, "channel")
			need(s.Username, "username")
		case SinkSlack:
			checkURL("apiurl", false)
			need(s.Token, "token")
			need(s.Channel, "channel")
		case SinkHipchat:
			checkURL("url", false)
			need(s.Token, "token")
			need(s.Room, "room")
		case SinkSMTP:
			need(s.SMTP.To, "to")
			need(s.SMTP.From, "from")
			need(s.SMTP.Smarthost, "smarthost")
			if s.SMTP.Smarthost != "" {
				if _, port, err := net.SplitHostPort(s.SMTP.Smarthost); err != nil || port == "" {
					bad("%s: smarthost %q: want host:port", where, s.SMTP.Smarthost)
				}
			}
		case SinkLog:
			if s.Format == "" {
				s.Format = "text"
			}
			if s.Format != "text" && s.Format != "json" {
				bad("%s: format %q; allowed: text, json", where, s.Format)
			}
		default:
			bad("%s: type %q; allowed: %s", where, s.Type, strings.Join(sinkTypes, ", "))
		}
		if _, err := newTextFunc(s.Name, s.Template); err != nil {
			bad("%s: template: %v", where, err)
		}
		if _, err := labels.Parse(s.Filter.LabelSelector); err != nil {
			bad("%s: filter.labelselector: %v", where, err)
		}
		for _, r := range s.Filter.Resources {
			name := r
			if br, ok := lookupResource(r); ok {
				name = br.name
			}
			if !watched[name] && !watched[r] {
				bad("%s: filter.resources: %q is not watched; watched: %s", where, r, strings.Join(watchedNames, ", "))
			}
		}
		for _, ns := range s.Filter.Namespaces {
			if c.Namespace != "" && ns != c.Namespace && ns != "" {
				bad("%s: filter.namespaces: %q is never seen: only namespace %s is watched (and \"\" for cluster-scoped objects)", where, ns, c.Namespace)
			}
		}
		if s.Filter.Severity != "" && !slices.Contains(severities, s.Filter.Severity) {
			bad("%s: filter.severity %q; allowed: %s", where, s.Filter.Severity, strings.Join(severities, ", "))
		}
		for _, e := range s.Filter.Events {
			if !slices.Contains(eventTypes, e) {
				bad("%s: filter.events: %q; allowed: create, update, delete", where, e)
			}
		}
	}
	errs = append(errs, c.Checkpoint.validate()...)
	if c.Incidents.Window < 0 {
		bad("incidents.window %v; allowed: a positive duration", c.Incidents.Window)
	}
	if c.Incidents.LogLines < 0 || c.Incidents.LogLines > 1000 {
		bad("incidents.loglines %d; allowed: 0 (off) to 1000", c.Incidents.LogLines)
	}
	if _, err := compileRedactions(c.Incidents.Redact); err != nil {
		bad("%v", err)
	}
	if _, err := newSilencer(c.Silences); err != nil {
		bad("%v", err)
	}
	if len(errs) > 0 {
		return &ConfigError{Problems: errs}
	}
	return nil
}

// node is a value in the document with its dotted path, for messages.
type node struct {
	path string
	v    any
}

func (n node) child(key string) node {
	if n.path == "" {
		return node{path: key}
	}
	return node{path: n.path + "." + key}
}

type parser struct {
	errs, warnings []string
	// sinkPaths are the paths of the parsed sinks, in cfg.Sinks' order;
	// explicitAdvanced those that set advancedfilter themselves.
	sinkPaths, explicitAdvanced []string
	// enabledEmpty are the handlers with enabled: true and no field set.
	enabledEmpty []node
}

func (p *parser) bad(n node, format string, args ...any) {
	p.errs = append(p.errs, n.path+": "+fmt.Sprintf(format, args...))
}

func (p *parser) warn(n node, format string, args ...any) {
	p.warnings = append(p.warnings, n.path+": "+fmt.Sprintf(format, args...))
}

// object returns n's entries keyed by the lower-cased key, reporting keys
// not in allowed (nil allows any) and keys given twice in different case.
func (p *parser) object(n node, allowed []string) map[string]node {
	return p.entries(n, allowed, false)
}

// kubewatchObject is object for a mapping of kubewatch's format: a key not
// in allowed is one kubewatch ignores, so it is a warning, not an error.
func (p *parser) kubewatchObject(n node, allowed []string) map[string]node {
	return p.entries(n, allowed, true)
}

func (p *parser) entries(n node, allowed []string, lenient bool) map[string]node {
	out := map[string]node{}
	if n.v == nil {
		return out
	}
	m, ok := n.v.(map[string]any)
	if !ok {
		p.bad(n, "want a mapping, got %s", describe(n.v))
		return out
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		c := n.child(k)
		c.v = m[k]
		if allowed != nil && !slices.Contains(allowed, lk) {
			if lenient {
				p.warn(c, "ignored, as kubewatch ignores it: not a key of this mapping (%s)", strings.Join(allowed, ", "))
			} else {
				p.bad(c, "unknown key; allowed: %s", strings.Join(allowed, ", "))
			}
			continue
		}
		if _, dup := out[lk]; dup {
			p.bad(c, "given twice (keys ignore case)")
			continue
		}
		out[lk] = c
	}
	return out
}

func (p *parser) str(n node) string {
	switch v := n.v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	p.bad(n, "want a string, got %s", describe(n.v))
	return ""
}

func (p *parser) boolean(n node) bool {
	switch v := n.v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		// kubewatch's CLI writes TRUE/FALSE for tlsskip.
		switch strings.ToLower(v) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	p.bad(n, "want true or false, got %s", describe(n.v))
	return false
}

func (p *parser) integer(n node) int {
	if f, ok := n.v.(float64); ok && f == math.Trunc(f) && f >= 1 && f <= 1e9 {
		return int(f)
	}
	if n.v == nil {
		return 0
	}
	p.bad(n, "want a whole number of at least 1, got %s", describe(n.v))
	return 0
}

func (p *parser) strs(n node) []string {
	if n.v == nil {
		return nil
	}
	l, ok := n.v.([]any)
	if !ok {
		p.bad(n, "want a list of strings, got %s", describe(n.v))
		return nil
	}
	var out []string
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			p.bad(node{path: fmt.Sprintf("%s[%d]", n.path, i)}, "want a string, got %s", describe(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprintf("%v", v)
	}
}

var topKeys = []string{"namespace", "handler", "resource", "customresources", "updates", "sinks", "clustername", "checkpoint", "incidents", "silences"}

func (p *parser) config(root node) *Config {
	cfg := &Config{}
	top := p.kubewatchObject(root, topKeys)
	cfg.Namespace = p.str(top["namespace"])
	cfg.ClusterName = p.str(top["clustername"])
	if n, ok := top["checkpoint"]; ok {
		c := p.object(n, []string{"type", "namespace", "name", "path", "maxobjects"})
		cfg.Checkpoint = CheckpointConfig{
			Type:       strings.ToLower(p.str(c["type"])),
			Namespace:  p.str(c["namespace"]),
			Name:       p.str(c["name"]),
			Path:       p.str(c["path"]),
			MaxObjects: p.integer(c["maxobjects"]),
		}
	}
	if n, ok := top["incidents"]; ok {
		c := p.object(n, []string{"window", "groupbyowner", "loglines", "redact"})
		if w := p.str(c["window"]); w != "" {
			d, err := time.ParseDuration(w)
			if err != nil || d <= 0 {
				p.bad(c["window"], "%q: want a positive duration such as 5m", w)
			}
			cfg.Incidents.Window = d
		}
		cfg.Incidents.GroupByOwner = p.boolean(c["groupbyowner"])
		cfg.Incidents.LogLines = p.integer(c["loglines"])
		cfg.Incidents.Redact = p.strs(c["redact"])
	}
	if n, ok := top["silences"]; ok {
		c := p.object(n, []string{"prefix", "times"})
		cfg.Silences = SilenceConfig{Enabled: true, Prefix: p.str(c["prefix"])}
		if tn, ok := c["times"]; ok && tn.v != nil {
			l, isList := tn.v.([]any)
			if !isList {
				p.bad(tn, "want a list of {from, to, timezone, namespaces}, got %s", describe(tn.v))
			}
			for i, v := range l {
				qn := node{path: fmt.Sprintf("%s[%d]", tn.path, i), v: v}
				q := p.object(qn, []string{"from", "to", "timezone", "namespaces"})
				cfg.Silences.Times = append(cfg.Silences.Times, QuietTime{
					From: p.str(q["from"]), To: p.str(q["to"]), Timezone: p.str(q["timezone"]), Namespaces: p.strs(q["namespaces"]),
				})
			}
		}
	}
	p.resources(cfg, top["resource"])
	p.customResources(cfg, top["customresources"])
	if n, ok := top["updates"]; ok {
		u := p.object(n, []string{"ignorestatusonly", "ignoremetadataonly"})
		cfg.Updates.IgnoreStatusOnly = p.boolean(u["ignorestatusonly"])
		cfg.Updates.IgnoreMetadataOnly = p.boolean(u["ignoremetadataonly"])
	}
	p.handlers(cfg, top["handler"])
	if n, ok := top["sinks"]; ok && n.v != nil {
		l, isList := n.v.([]any)
		if !isList {
			p.bad(n, "want a list of sinks, got %s", describe(n.v))
		}
		for i, v := range l {
			sn := node{path: fmt.Sprintf("sinks[%d]", i), v: v}
			m, isMap := v.(map[string]any)
			if !isMap {
				p.bad(sn, "want a mapping with a type (%s), got %s", strings.Join(sinkTypes, ", "), describe(v))
				continue
			}
			var rawType any
			for k, tv := range m {
				if strings.ToLower(k) == "type" {
					rawType = tv
				}
			}
			typ, _ := rawType.(string)
			if !slices.Contains(sinkTypes, typ) {
				p.bad(sn.child("type"), "want one of %s, got %s", strings.Join(sinkTypes, ", "), describe(rawType))
				continue
			}
			if s, ok := p.sink(sn, typ, true); ok {
				cfg.Sinks = append(cfg.Sinks, s)
				p.sinkPaths = append(p.sinkPaths, sn.path)
			}
		}
	}
	return cfg
}

func (p *parser) resources(cfg *Config, n node) {
	seen := map[string]string{} // canonical name → key used
	keys := p.object(n, nil)
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c := keys[k]
		r, ok := lookupResource(k)
		if !ok {
			p.warn(c, "ignored, as kubewatch ignores it: not a resource; allowed: %s", resourceNames())
			continue
		}
		if prev, dup := seen[r.name]; dup {
			p.bad(c, "names the same resource as %s.%s", n.path, prev)
			continue
		}
		seen[r.name] = k
		if p.boolean(c) {
			cfg.Resources = append(cfg.Resources, r.name)
		}
	}
}

func (p *parser) customResources(cfg *Config, n node) {
	if n.v == nil {
		return
	}
	l, ok := n.v.([]any)
	if !ok {
		p.bad(n, "want a list of {group, version, resource}, got %s", describe(n.v))
		return
	}
	for i, v := range l {
		cn := node{path: fmt.Sprintf("customresources[%d]", i), v: v}
		m := p.kubewatchObject(cn, []string{"group", "version", "resource", "clusterscoped"})
		cr := CustomResource{
			Group:         p.str(m["group"]),
			Version:       p.str(m["version"]),
			Resource:      p.str(m["resource"]),
			ClusterScoped: p.boolean(m["clusterscoped"]),
		}
		if cr.Version == "" || cr.Resource == "" {
			p.bad(cn, "version and resource are required (group is empty for the core group)")
			continue
		}
		cfg.CustomResources = append(cfg.CustomResources, cr)
	}
}

// handlers parses kubewatch's `handler:` mapping. Unlike kubewatch, every
// configured handler is used, not only the first. A handler whose fields
// are all empty is not configured, as in kubewatch (its values are still
// checked: kubewatch fails to read a value of the wrong type). `enabled`,
// which kubewatch's Helm chart writes into each handler it turns on and
// kubewatch ignores, is read here: false turns the handler off.
func (p *parser) handlers(cfg *Config, n node) {
	m := p.kubewatchObject(n, sinkTypes)
	for _, typ := range sinkTypes {
		hn, ok := m[typ]
		if !ok {
			continue
		}
		enabled, fields := p.enabled(hn)
		s, ok := p.sink(fields, typ, false)
		switch {
		case !ok:
		case enabled != nil && !*enabled:
			if !isEmpty(fields.v) {
				p.warn(hn.child("enabled"), "false: the handler is off (kubewatch ignores enabled and would use it)")
			}
		case typ != SinkLog && isEmpty(fields.v):
			// log has no required field, so `log:` is on. The
			// environment may still configure it (see env).
			if enabled != nil {
				p.enabledEmpty = append(p.enabledEmpty, hn)
			}
		default:
			cfg.Sinks = append(cfg.Sinks, s)
			p.sinkPaths = append(p.sinkPaths, hn.path)
		}
	}
}

// enabled splits a handler's `enabled` key off its fields: nil when the
// key is absent.
func (p *parser) enabled(n node) (*bool, node) {
	m, ok := n.v.(map[string]any)
	if !ok {
		return nil, n
	}
	var on *bool
	rest := make(map[string]any, len(m))
	for k, v := range m {
		if strings.ToLower(k) != "enabled" {
			rest[k] = v
			continue
		}
		b := p.boolean(node{path: n.child(k).path, v: v})
		on = &b
	}
	return on, node{path: n.path, v: rest}
}

// isEmpty reports whether v holds no non-empty scalar.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case map[string]any:
		for _, e := range v {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}

var commonSinkKeys = []string{"filter", "maxattempts", "queuesize", "template", "advancedfilter", "incidents"}

// sinkKeys are each type's keys: kubewatch's, then this notifier's.
var sinkKeys = map[string][]string{
	SinkWebhook:      {"url", "cert", "tlsskip", "includeobject", "includechanges"},
	SinkSlackWebhook: {"channel", "username", "emoji", "slackwebhookurl", "url"},
	SinkSlack:        {"token", "channel", "title", "apiurl", "cert", "tlsskip"},
	SinkHipchat:      {"token", "room", "url", "cert", "tlsskip"},
	SinkMattermost:   {"channel", "url", "username", "cert", "tlsskip"},
	SinkFlock:        {"url", "cert", "tlsskip"},
	SinkCloudEvent:   {"url", "cert", "tlsskip"},
	SinkMSTeams:      {"webhookurl", "url", "title", "card", "cert", "tlsskip"},
	SinkSMTP:         {"to", "from", "smarthost", "subject", "headers", "requiretls", "hello", "auth", "ssl", "cert", "tlsskip"},
	SinkLark:         {"webhookurl", "url"},
	SinkLog:          {"format"},
}

func (p *parser) sink(n node, typ string, listed bool) (SinkConfig, bool) {
	allowed := append(slices.Clone(sinkKeys[typ]), commonSinkKeys...)
	if listed {
		allowed = append(allowed, "name", "type")
	}
	before := len(p.errs)
	object := p.object
	if !listed {
		object = p.kubewatchObject
	}
	m := object(n, allowed)
	s := SinkConfig{Type: typ, Name: p.str(m["name"])}
	// urlKey reads the type's URL key, or url, not both.
	urlKey := func(key string) {
		s.URL = p.str(m[key])
		if key == "url" {
			return
		}
		if u := p.str(m["url"]); u != "" {
			if s.URL != "" {
				p.bad(m["url"], "give %s or url, not both", key)
			}
			s.URL = u
		}
	}
	s.Cert = p.str(m["cert"])
	s.TLSSkip = p.boolean(m["tlsskip"])
	s.Channel = p.str(m["channel"])
	s.Username = p.str(m["username"])
	s.Token = p.str(m["token"])
	s.Title = p.str(m["title"])
	switch typ {
	case SinkWebhook:
		s.URL = p.str(m["url"])
		s.IncludeObject = p.boolean(m["includeobject"])
		s.IncludeChanges = p.boolean(m["includechanges"])
	case SinkSlackWebhook:
		urlKey("slackwebhookurl")
		s.Emoji = p.str(m["emoji"])
	case SinkSlack:
		s.URL = p.str(m["apiurl"])
	case SinkHipchat:
		s.URL = p.str(m["url"])
		s.Room = p.str(m["room"])
	case SinkMattermost, SinkFlock, SinkCloudEvent:
		s.URL = p.str(m["url"])
	case SinkMSTeams:
		urlKey("webhookurl")
		s.Card = strings.ToLower(p.str(m["card"]))
	case SinkLark:
		urlKey("webhookurl")
	case SinkSMTP:
		s.SMTP = SMTPConfig{
			To: p.str(m["to"]), From: p.str(m["from"]), Smarthost: p.str(m["smarthost"]),
			Subject: p.str(m["subject"]), RequireTLS: p.boolean(m["requiretls"]), SSL: p.boolean(m["ssl"]),
			Hello: p.str(m["hello"]),
		}
		if hn, ok := m["headers"]; ok {
			h := p.object(hn, nil)
			for _, k := range sortedKeys(h) {
				if s.SMTP.Headers == nil {
					s.SMTP.Headers = map[string]string{}
				}
				// The header's name as written: keys of p.object
				// are lower-cased.
				s.SMTP.Headers[lastPathElem(h[k].path)] = p.str(h[k])
			}
		}
		a := p.object(m["auth"], []string{"username", "password", "identity", "secret"})
		s.SMTP.Auth = SMTPAuth{Username: p.str(a["username"]), Password: p.str(a["password"]), Identity: p.str(a["identity"]), Secret: p.str(a["secret"])}
	case SinkLog:
		s.Format = p.str(m["format"])
	}
	s.Template = p.str(m["template"])
	s.AdvancedFilter = p.boolean(m["advancedfilter"])
	s.Incidents = p.boolean(m["incidents"])
	if _, ok := m["advancedfilter"]; ok {
		p.explicitAdvanced = append(p.explicitAdvanced, n.path)
	}
	s.MaxAttempts = p.integer(m["maxattempts"])
	s.QueueSize = p.integer(m["queuesize"])
	if fn, ok := m["filter"]; ok {
		f := p.object(fn, []string{"events", "namespaces", "excludenamespaces", "labelselector", "resources", "severity"})
		s.Filter.Severity = strings.ToLower(p.str(f["severity"]))
		for _, e := range p.strs(f["events"]) {
			et := EventType(strings.ToLower(e))
			if !slices.Contains(eventTypes, et) {
				p.bad(f["events"], "%q; allowed: create, update, delete", e)
				continue
			}
			s.Filter.Events = append(s.Filter.Events, et)
		}
		s.Filter.Namespaces = p.strs(f["namespaces"])
		s.Filter.ExcludeNamespaces = p.strs(f["excludenamespaces"])
		s.Filter.LabelSelector = p.str(f["labelselector"])
		if _, err := labels.Parse(s.Filter.LabelSelector); err != nil {
			p.bad(f["labelselector"], "%v", err)
		}
		for _, r := range p.strs(f["resources"]) {
			s.Filter.Resources = append(s.Filter.Resources, strings.ToLower(r))
		}
	}
	return s, len(p.errs) == before
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lastPathElem is the key at the end of a dotted path.
func lastPathElem(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[i+1:]
	}
	return path
}

// envField is a sink field kubewatch fills in from the environment when
// the config leaves it empty. A selecting variable configures the handler
// when the file does not (kubewatch ignored such a handler).
type envField struct {
	field   func(*SinkConfig) *string
	names   []string
	selects bool
}

var envFields = map[string][]envField{
	SinkSlack: {
		{func(s *SinkConfig) *string { return &s.Token }, []string{"KW_SLACK_TOKEN", "SLACK_TOKEN"}, true},
		{func(s *SinkConfig) *string { return &s.Channel }, []string{"KW_SLACK_CHANNEL", "SLACK_CHANNEL"}, false},
		{func(s *SinkConfig) *string { return &s.Title }, []string{"KW_SLACK_TITLE"}, false},
	},
	SinkSlackWebhook: {
		{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_SLACK_WEBHOOK_URL"}, true},
		{func(s *SinkConfig) *string { return &s.Channel }, []string{"KW_SLACK_CHANNEL", "SLACK_CHANNEL"}, false},
		{func(s *SinkConfig) *string { return &s.Username }, []string{"KW_SLACK_USERNAME"}, false},
		{func(s *SinkConfig) *string { return &s.Emoji }, []string{"KW_SLACK_EMOJI"}, false},
	},
	SinkHipchat: {
		{func(s *SinkConfig) *string { return &s.Token }, []string{"KW_HIPCHAT_TOKEN"}, true},
		{func(s *SinkConfig) *string { return &s.Room }, []string{"KW_HIPCHAT_ROOM"}, false},
		{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_HIPCHAT_URL"}, false},
	},
	SinkMattermost: {
		{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_MATTERMOST_URL"}, true},
		{func(s *SinkConfig) *string { return &s.Channel }, []string{"KW_MATTERMOST_CHANNEL"}, false},
		{func(s *SinkConfig) *string { return &s.Username }, []string{"KW_MATTERMOST_USERNAME"}, false},
	},
	SinkFlock:      {{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_FLOCK_URL"}, true}},
	SinkCloudEvent: {{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_CLOUDEVENT_URL"}, true}},
	SinkLark:       {{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_LARK_WEBHOOK_URL"}, true}},
	SinkMSTeams: {
		{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_MSTEAMS_WEBHOOKURL"}, true},
		{func(s *SinkConfig) *string { return &s.Title }, []string{"KW_MSTEAMS_TITLE"}, false},
	},
	SinkWebhook: {
		{func(s *SinkConfig) *string { return &s.URL }, []string{"KW_WEBHOOK_URL"}, true},
		{func(s *SinkConfig) *string { return &s.Cert }, []string{"KW_WEBHOOK_CERT"}, false},
	},
}

// env applies kubewatch's environment variables: KW_<RESOURCE>=true turns
// a resource on; each handler's variables (see envFields: KW_SLACK_TOKEN,
// KW_WEBHOOK_URL, KW_CLOUDEVENT_URL, ...) fill in the fields the file
// leaves empty, and one that names the destination configures the
// handler if the file does not; ADVANCED_FILTERS=true turns the advanced
// filter on for cloudevent sinks that do not set it; KW_CLUSTER_NAME (or
// KUBEWATCH_NAME) names the cluster.
func (p *parser) env(cfg *Config, lookup func(string) (string, bool)) {
	for _, r := range resources {
		if r.env == "" {
			continue
		}
		v, ok := lookup(r.env)
		if !ok || v == "" {
			continue
		}
		switch strings.ToLower(v) {
		case "true":
			if !slices.Contains(cfg.Resources, r.name) {
				cfg.Resources = append(cfg.Resources, r.name)
			}
		case "false":
			// kubewatch's toggles only turn resources on.
		default:
			p.errs = append(p.errs, fmt.Sprintf("environment %s=%q: want true or false", r.env, v))
		}
	}
	get := func(names ...string) string {
		for _, n := range names {
			if v, ok := lookup(n); ok && v != "" {
				return v
			}
		}
		return ""
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = get("KW_CLUSTER_NAME", "KUBEWATCH_NAME")
	}
	for _, typ := range sinkTypes {
		fields := envFields[typ]
		if len(fields) == 0 {
			continue
		}
		idx := slices.IndexFunc(cfg.Sinks, func(s SinkConfig) bool { return s.Type == typ })
		if idx < 0 {
			selected := false
			for _, f := range fields {
				selected = selected || (f.selects && get(f.names...) != "")
			}
			if !selected {
				continue
			}
			cfg.Sinks = append(cfg.Sinks, SinkConfig{Type: typ})
			p.sinkPaths = append(p.sinkPaths, "environment")
			idx = len(cfg.Sinks) - 1
		}
		s := &cfg.Sinks[idx]
		for _, f := range fields {
			if ptr := f.field(s); *ptr == "" {
				*ptr = get(f.names...)
			}
		}
	}
	if v := get("ADVANCED_FILTERS"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Sprintf("environment ADVANCED_FILTERS=%q: want true or false", v))
		}
		for i := range cfg.Sinks {
			if cfg.Sinks[i].Type == SinkCloudEvent && !slices.Contains(p.explicitAdvanced, p.sinkPaths[i]) {
				cfg.Sinks[i].AdvancedFilter = on
			}
		}
	}
	sort.Strings(cfg.Resources)
}
