package main

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
)

// builtinKinds are the kinds kloop init --for makes a controller of: the
// namespaced built-in kinds it has an example object of, which the
// generated tests create on a real API server (with no controllers and no
// kubelet behind it) and make demo applies. NAME in a sample stands for the
// example's name.
var builtinKinds = []struct {
	gvk    schema.GroupVersionKind
	sample string // the object's YAML after its metadata
}{
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, podsSpec("replicas: 1\n  ")},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, podsSpec("replicas: 1\n  serviceName: NAME\n  ")},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, podsSpec("")},
	{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, `spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: registry.k8s.io/pause:3.10
`},
	{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, `spec:
  schedule: "*/10 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: main
              image: registry.k8s.io/pause:3.10
`},
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, `data:
  message: hello
`},
	{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, `type: Opaque
stringData:
  token: change-me
`},
	{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, `spec:
  selector:
    app.kubernetes.io/name: NAME
  ports:
    - name: http
      port: 80
      targetPort: 8080
`},
	{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, ""},
	{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, `spec:
  rules:
    - http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: NAME
                port:
                  number: 80
`},
}

// podsSpec is the spec of a workload kind's example: more (its own fields,
// each followed by a newline and two spaces), a selector and a pod
// template running the pause image.
func podsSpec(more string) string {
	return "spec:\n  " + more + `selector:
    matchLabels:
      app.kubernetes.io/name: NAME
  template:
    metadata:
      labels:
        app.kubernetes.io/name: NAME
    spec:
      containers:
        - name: main
          image: registry.k8s.io/pause:3.10
`
}

// forName is how --for spells a kind: GROUP/VERSION/KIND, or VERSION/KIND
// for the core group.
func forName(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + "/" + gvk.Kind
}

// builtinKindNames are the kinds --for takes, as --for spells them.
func builtinKindNames() []string {
	names := make([]string, len(builtinKinds))
	for i, k := range builtinKinds {
		names[i] = forName(k.gvk)
	}
	return names
}

// builtinKind checks --for and fills in p's kind from it.
func (f *initFlags) builtinKind(p *project) error {
	if f.group != "" || f.kind != "" || f.version != "" {
		return cli.Usagef("--for and --group, --kind or --version: --for makes a controller of a built-in kind, --group and --kind a new API type; give one or the other")
	}
	if p.Webhooks() {
		return cli.Usagef("--webhooks and --for: kloop init makes webhooks for a new API type of yours (--group and --kind), not for a built-in kind; leave out --webhooks")
	}
	known := "give one of " + strings.Join(builtinKindNames(), ", ")
	parts := strings.Split(f.forKind, "/")
	var gvk schema.GroupVersionKind
	switch len(parts) {
	case 2:
		gvk = schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}
	case 3:
		gvk = schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
		if gvk.Group == "core" {
			gvk.Group = ""
		}
	}
	if !versionRE.MatchString(gvk.Version) || gvk.Kind == "" {
		return &cli.FlagError{Flag: "--for", Value: f.forKind, Want: "GROUP/VERSION/KIND, such as apps/v1/Deployment, or v1/ConfigMap for the core group; " + known}
	}
	for _, k := range builtinKinds {
		if k.gvk == gvk {
			return fillBuiltin(p, gvk, k.sample)
		}
	}
	for _, k := range builtinKinds {
		if strings.EqualFold(forName(k.gvk), forName(gvk)) {
			return &cli.FlagError{Flag: "--for", Value: f.forKind, Want: fmt.Sprintf("a kind spelled as the API spells it: did you mean %s?", forName(k.gvk))}
		}
	}
	if kloop.NewScheme().Recognizes(gvk) {
		return &cli.FlagError{Flag: "--for", Value: f.forKind, Want: "a kind kloop init has an example object of, for the tests and make demo: " + known + " (then change the kind and the example), or --group and --kind for a new API type"}
	}
	return &cli.FlagError{Flag: "--for", Value: f.forKind, Want: "a built-in Kubernetes kind: " + known + "; for a kind of your own give --group and --kind instead"}
}

// fillBuiltin sets p's kind, its Go package and its example object.
func fillBuiltin(p *project, gvk schema.GroupVersionKind, sample string) error {
	obj, err := kloop.NewScheme().New(gvk)
	if err != nil {
		return err
	}
	p.Builtin, p.Group, p.Version, p.Kind = true, gvk.Group, gvk.Version, gvk.Kind
	p.Package = reflect.TypeOf(obj).Elem().PkgPath()
	group, _, _ := strings.Cut(gvk.Group, ".")
	if group == "" {
		group = "core"
	}
	p.Alias = group + gvk.Version
	p.Sample = strings.ReplaceAll(sample, "NAME", strings.ToLower(gvk.Kind)+"-sample")
	return nil
}
