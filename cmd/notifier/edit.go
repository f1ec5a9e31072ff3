package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/internal/notifier"
)

// configFile is the path the commands that edit or print the config use:
// --config, else kubewatch's $KW_CONFIG/.kubewatch.yaml, else $HOME's.
func configFile(configPath string, getenv func(string) string) string {
	if configPath != "" {
		return configPath
	}
	return notifier.DefaultConfigPath(getenv)
}

// readDoc reads the config as a mapping; a missing file is an empty one
// (kubewatch creates it).
func readDoc(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	doc := map[string]any{}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", path, err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, nil
}

// writeDoc writes doc back (comments are not kept, as in kubewatch).
func writeDoc(path string, doc map[string]any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// child returns m's mapping under key (matched without regard to case, as
// the parser does), made if missing.
func child(m map[string]any, key string) map[string]any {
	for k, v := range m {
		if strings.EqualFold(k, key) {
			if c, ok := v.(map[string]any); ok {
				return c
			}
			delete(m, k)
		}
	}
	c := map[string]any{}
	m[key] = c
	return c
}

// set puts v under key, replacing a key that differs only in case.
func set(m map[string]any, key string, v any) {
	for k := range m {
		if strings.EqualFold(k, key) {
			delete(m, k)
		}
	}
	m[key] = v
}

// handlerFlag is one flag of `config add <handler>` and the key it sets.
type handlerFlag struct {
	name, short, key, usage string
	boolean                 bool
}

// handlerFlags are kubewatch's flags of each `config add` command (with
// its bugs fixed: msteams is msteams, slackwebhook's flags are its own,
// hipchat's --url is used), plus flags for what kubewatch left to editing
// the file (smtp, msteams' card, slack's apiurl, smtp's cert).
var handlerFlags = map[string][]handlerFlag{
	notifier.SinkSlack: {
		{"channel", "c", "channel", "Slack channel", false}, {"token", "t", "token", "Slack bot token", false},
		{"title", "", "title", "message title (default kubewatch)", false},
		{"apiurl", "", "apiurl", "Slack Web API base URL, for an API-compatible server (default https://slack.com/api/)", false},
	},
	notifier.SinkSlackWebhook: {
		{"channel", "c", "channel", "Slack channel", false}, {"username", "n", "username", "Slack username", false},
		{"emoji", "e", "emoji", "Slack icon emoji", false}, {"slackwebhookurl", "w", "slackwebhookurl", "Slack incoming-webhook URL", false},
	},
	notifier.SinkHipchat: {
		{"room", "r", "room", "HipChat room", false}, {"token", "t", "token", "HipChat room token", false},
		{"url", "u", "url", "HipChat API base URL (default https://api.hipchat.com/v2)", false},
	},
	notifier.SinkMattermost: {
		{"channel", "c", "channel", "Mattermost channel", false}, {"url", "u", "url", "Mattermost incoming-webhook URL", false},
		{"username", "n", "username", "Mattermost username", false},
	},
	notifier.SinkFlock:      {{"url", "u", "url", "Flock incoming-webhook URL", false}},
	notifier.SinkCloudEvent: {{"url", "u", "url", "CloudEvents receiver URL", false}},
	notifier.SinkWebhook: {
		{"url", "u", "url", "webhook URL", false}, {"cert", "", "cert", "PEM file of CAs to trust", false},
		{"tlsskip", "", "tlsskip", "skip TLS verification", true},
	},
	notifier.SinkMSTeams: {
		{"webhookurl", "w", "webhookurl", "Teams webhook URL", false},
		{"card", "", "card", "messagecard (Office 365 connector, default) or adaptive (Teams Workflows)", false},
	},
	notifier.SinkLark: {{"webhookurl", "u", "webhookurl", "Lark custom-bot webhook URL", false}},
	notifier.SinkSMTP: {
		{"to", "", "to", "recipients, comma-separated", false}, {"from", "", "from", "sender", false},
		{"smarthost", "", "smarthost", "SMTP server host:port (465: implicit TLS)", false},
		{"subject", "", "subject", "subject (default Kubewatch notification)", false},
		{"requiretls", "", "requireTLS", "STARTTLS, failing if the server lacks it", true},
		{"hello", "", "hello", "EHLO name", false},
		{"username", "", "auth.username", "AUTH user", false}, {"password", "", "auth.password", "PLAIN and LOGIN password", false},
		{"identity", "", "auth.identity", "PLAIN identity", false}, {"secret", "", "auth.secret", "CRAM-MD5 secret", false},
		{"cert", "", "cert", "PEM file of CAs to trust for the server's TLS certificate", false},
	},
}

func configAddCommand(configPath *string, getenv func(string) string) *cobra.Command {
	add := &cobra.Command{
		Use:   "add",
		Short: "Add or change a handler in the config file",
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("give a handler: %s", strings.Join(handlerNames(), ", "))
		},
	}
	for _, typ := range handlerNames() {
		c := &cobra.Command{Use: typ, Short: "Configure the " + typ + " handler"}
		values := map[string]*string{}
		bools := map[string]*bool{}
		for _, f := range handlerFlags[typ] {
			if f.boolean {
				bools[f.key] = c.Flags().BoolP(f.name, f.short, false, f.usage)
			} else {
				values[f.key] = c.Flags().StringP(f.name, f.short, "", f.usage)
			}
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			path := configFile(*configPath, getenv)
			doc, err := readDoc(path)
			if err != nil {
				return err
			}
			h := child(child(doc, "handler"), typ)
			changed := 0
			cmd.Flags().Visit(func(fl *pflag.Flag) {
				for _, f := range handlerFlags[typ] {
					if f.name != fl.Name {
						continue
					}
					m, key := h, f.key
					if parent, k, nested := strings.Cut(f.key, "."); nested {
						m, key = child(h, parent), k
					}
					if f.boolean {
						set(m, key, *bools[f.key])
					} else {
						set(m, key, *values[f.key])
					}
					changed++
				}
			})
			if changed == 0 {
				return cli.Usagef("give at least one of the %s flags (see --help)", typ)
			}
			if err := writeDoc(path, doc); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s handler configured in %s\n", typ, path)
			return err
		}
		add.AddCommand(c)
	}
	return add
}

func handlerNames() []string {
	var out []string
	for typ := range handlerFlags {
		out = append(out, typ)
	}
	sort.Strings(out)
	return out
}

// resourceFlags are kubewatch's `resource add|remove` flags, plus sts,
// hpa and event, each with the resource key it sets.
var resourceFlags = []struct{ flag, resource string }{
	{"svc", "services"}, {"deploy", "deployment"}, {"po", "pod"}, {"rc", "replicationcontroller"}, {"rs", "replicaset"},
	{"ns", "namespace"}, {"pv", "persistentvolume"}, {"job", "job"}, {"ds", "daemonset"}, {"sts", "statefulset"},
	{"secret", "secret"}, {"cm", "configmap"}, {"ing", "ingress"}, {"node", "node"}, {"clusterrole", "clusterrole"},
	{"clusterrolebinding", "clusterrolebinding"}, {"sa", "serviceaccount"}, {"coreevent", "coreevent"},
	{"hpa", "hpa"}, {"event", "event"},
}

func resourceCommand(configPath *string, getenv func(string) string) *cobra.Command {
	res := &cobra.Command{
		Use:   "resource",
		Short: "Turn the resources to watch on or off in the config file",
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("give a subcommand: notifier resource add|remove --po --cm ...")
		},
	}
	for _, verb := range []string{"add", "remove"} {
		c := &cobra.Command{Use: verb, Short: strings.ToUpper(verb[:1]) + verb[1:] + " resources to watch"}
		on := map[string]*bool{}
		for _, f := range resourceFlags {
			on[f.flag] = c.Flags().Bool(f.flag, false, f.resource)
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			path := configFile(*configPath, getenv)
			doc, err := readDoc(path)
			if err != nil {
				return err
			}
			r := child(doc, "resource")
			var names []string
			for _, f := range resourceFlags {
				if !*on[f.flag] {
					continue
				}
				// One key per resource: drop its aliases (po, pods...).
				for k := range r {
					if notifier.ResourceName(k) == f.resource {
						delete(r, k)
					}
				}
				r[f.resource] = verb == "add"
				names = append(names, f.resource)
			}
			if len(names) == 0 {
				return cli.Usagef("give at least one resource flag (see --help)")
			}
			if err := writeDoc(path, doc); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "resource %s: %s in %s\n", verb, strings.Join(names, ", "), path)
			return err
		}
		res.AddCommand(c)
	}
	return res
}

func configViewCommand(configPath *string, getenv func(string) string) *cobra.Command {
	return &cobra.Command{
		Use:   "view",
		Short: "Print the config file",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := os.ReadFile(configFile(*configPath, getenv))
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

func configTestCommand(configPath *string, lookupEnv func(string) (string, bool), getenv func(string) string) *cobra.Command {
	return &cobra.Command{
		Use:   "test",
		Short: "Send kubewatch's test event to every configured handler; exit 1 naming each that failed",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(*configPath, lookupEnv, getenv)
			if err != nil {
				return err
			}
			results, err := notifier.SendTestEvent(cmd.Context(), *cfg, notifier.Options{Out: cmd.OutOrStdout()})
			if err != nil {
				return err
			}
			var failed []string
			for _, r := range results {
				if r.Err != nil {
					failed = append(failed, r.Name)
					fmt.Fprintf(cmd.ErrOrStderr(), "sink %s (%s): FAILED: %v\n", r.Name, r.Type, r.Err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "sink %s (%s): ok\n", r.Name, r.Type)
			}
			if len(failed) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "notifier config test: %d of %d sinks failed: %s\n", len(failed), len(results), strings.Join(failed, ", "))
				return cli.ExitCode(1)
			}
			return nil
		},
	}
}
