package notifier

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
)

// DefaultTemplate is the text every sink sends unless its config gives a
// template of its own: kubewatch's text (see Event.Message).
const DefaultTemplate = "{{if .Cluster}}`{{.Cluster}}` - {{end}}A `{{.Kind}}` in namespace `{{.Namespace}}` has been `{{.Reason}}`:\n`{{.Name}}`"

// templateFuncs are the functions a sink's template may call besides
// text/template's own.
var templateFuncs = template.FuncMap{
	"join":  strings.Join,
	"lower": strings.ToLower,
	"upper": strings.ToUpper,
	// json renders a value (an object, the labels, the changes) as JSON.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

// textFunc renders an event's text for one sink.
type textFunc func(*Event) (string, error)

// newTextFunc compiles a sink's template: the data is the *Event (Kind,
// Namespace, Name, Reason, Status, Changes, Labels, Cluster, Object, ...),
// whose Object and OldObject are already redacted for Secrets. An empty
// source is kubewatch's text.
func newTextFunc(name, src string) (textFunc, error) {
	if src == "" {
		return func(ev *Event) (string, error) { return ev.Message(), nil }, nil
	}
	t, err := template.New(name).Funcs(templateFuncs).Option("missingkey=zero").Parse(src)
	if err != nil {
		return nil, err
	}
	return func(ev *Event) (string, error) {
		var b strings.Builder
		if err := t.Execute(&b, ev); err != nil {
			return "", fmt.Errorf("template: %w", err)
		}
		return b.String(), nil
	}, nil
}
