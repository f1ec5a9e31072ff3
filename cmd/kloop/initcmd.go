package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/webhook"
)

// templates are the files of a new project, each ending in .tmpl (so that
// neither go nor embed reads them as Go files or a module), with
// VERSION and NAME in paths standing for the API version and the
// project's name.
//
//go:embed templates
var templates embed.FS

// initFlags are kloop init's flags.
type initFlags struct {
	module, group, version, kind, kloopDir string
	// forKind is --for: GROUP/VERSION/KIND of a built-in kind, instead of
	// a new API type.
	forKind string
	// webhooks is --webhooks: a comma-separated list of webhookDefaulting
	// and webhookValidation ("" for none), as parseWebhooks reads it.
	webhooks   string
	noGenerate bool
}

// The forms --webhooks takes; --webhooks alone is both.
const (
	webhookDefaulting = "defaulting"
	webhookValidation = "validation"
	webhooksBoth      = webhookDefaulting + "," + webhookValidation
)

// parseWebhooks returns which webhooks --webhooks asks for. "true" and
// "false" are what the flag took when it was a bool.
func parseWebhooks(s string) (defaulting, validation bool, err error) {
	switch s {
	case "", "false":
		return false, false, nil
	case "true":
		return true, true, nil
	}
	for _, form := range strings.Split(s, ",") {
		switch strings.TrimSpace(form) {
		case webhookDefaulting:
			defaulting = true
		case webhookValidation:
			validation = true
		default:
			return false, false, &cli.FlagError{Flag: "--webhooks", Value: s, Want: fmt.Sprintf("%q is not a webhook: give defaulting, validation or both, such as --webhooks=defaulting or --webhooks=defaulting,validation (--webhooks alone is both)", form)}
		}
	}
	return defaulting, validation, nil
}

func initCommand() *cobra.Command {
	f := &initFlags{}
	cmd := &cobra.Command{
		Use:   "init [DIR] --module PATH (--group GROUP --kind KIND [--version v1alpha1] [--webhooks[=defaulting,validation]] | --for GROUP/VERSION/KIND)",
		Short: "Create a controller project of your own: an API type (or a built-in kind), its controller on kloop, tests, deploy/ and a Makefile",
		Long: "init creates, in DIR (default: the current directory; it must be empty or absent), a Go module with\n" +
			"  api/VERSION/        the KIND type with kubebuilder markers, its deepcopy methods (controller-gen)\n" +
			"  config/crd/         its CustomResourceDefinition (controller-gen), config/samples/ an example\n" +
			"  internal/controller the controller on kloop's builder (For KIND, Owns ConfigMaps), a unit test and\n" +
			"                      an end-to-end test on a real etcd and kube-apiserver (package testenv)\n" +
			"  cmd/NAME/           the command, on kloop's cli package; NAME is the module path's last element\n" +
			"  deploy/             kustomize manifests, with RBAC generated from the controller's markers\n" +
			"  Makefile            make demo (the controller on a local control plane), make test (unit and e2e)\n\n" +
			"--for GROUP/VERSION/KIND instead of --group and --kind makes a controller of a built-in kind, such as\n" +
			"--for apps/v1/Deployment (v1/ConfigMap for the core group): no api/ and no CRD; the controller keeps a\n" +
			"label on every object of the kind, with RBAC for it from markers; config/samples/ has an example\n" +
			"object the tests and make demo create. The kinds it knows an example of:\n  " + strings.Join(builtinKindNames(), ", ") + "\n\n" +
			"--webhooks adds a defaulting and a validating admission webhook for KIND (internal/controller/\n" +
			"webhook.go, with kubebuilder:webhook markers), their tests (unit, and e2e with the real API server\n" +
			"calling them), deploy/webhook (the generated configurations, a Service, a self-signed certificate\n" +
			"the replicas make themselves and its RBAC), and runs make demo with --webhook-local.\n" +
			"--webhooks=defaulting or --webhooks=validation adds only that one, with only its tests, markers and\n" +
			"patches (write the list after '='). A conversion webhook needs a second API version: see the webhook\n" +
			"package's Hub and Convertible.\n\n" +
			"While kloop is not on a module proxy, the new go.mod has\n" +
			"  replace github.com/kloop-dev/kloop => DIR\n" +
			"with DIR the kloop checkout this kloop binary was built from (found from the paths the compiler\n" +
			"records; --kloop-dir overrides it). Then it runs go mod tidy and make generate (controller-gen\n" +
			"v0.23.0 from the module proxy). The control plane the tests and make demo use is built once into\n" +
			"a per-user directory by `kloop controlplane install` (make test runs it).\n\n" +
			"Examples:\n" +
			"  mkdir guestbook && cd guestbook\n" +
			"  kloop init --module example.com/guestbook --group webapp.example.com --kind Guestbook\n" +
			"  make test\n\n" +
			"  kloop init redeployer --module example.com/redeployer --for apps/v1/Deployment",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
				// --webhooks takes an optional value, so pflag reads
				// "--webhooks defaulting" as --webhooks (both) and the
				// directory "defaulting".
				if cmd.Flags().Changed("webhooks") && f.webhooks == webhooksBoth {
					if _, _, err := parseWebhooks(dir); err == nil {
						return cli.Usagef("--webhooks takes its list after '=': give --webhooks=%s (%q was read as the directory)", dir, dir)
					}
				}
			}
			return f.run(dir, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.module, "module", "", "the new Go module's `path`, such as example.com/guestbook (required)")
	fs.StringVar(&f.group, "group", "", "the API `group` of a new API type, a DNS subdomain of yours, such as webapp.example.com")
	fs.StringVar(&f.kind, "kind", "", "the kind of a new API type, in `CamelCase`, such as Guestbook")
	fs.StringVar(&f.version, "version", "", "the API `version` of a new API type: v1, v1alpha1, v2beta3, ... (default v1alpha1)")
	fs.StringVar(&f.forKind, "for", "", "the built-in kind, as `GROUP/VERSION/KIND`, to control instead of a new API type, such as apps/v1/Deployment or v1/ConfigMap")
	fs.StringVar(&f.kloopDir, "kloop-dir", "", "the kloop checkout the new module's replace directive points at (default: the one this kloop binary was built from)")
	fs.StringVar(&f.webhooks, "webhooks", "", "admission webhooks for a new API type, with their tests and deploy/webhook: both (--webhooks), or --webhooks=defaulting or --webhooks=validation (a `list`)")
	fs.Lookup("webhooks").NoOptDefVal = webhooksBoth
	fs.BoolVar(&f.noGenerate, "no-generate", false, "write the files only: skip go mod tidy and make generate (run them yourself)")
	return cmd
}

// project is what the templates are filled with.
type project struct {
	Dir       string // absolute
	Module    string
	Name      string // the command, the controller, the namespace of deploy/
	Group     string // "" for the core group of a built-in kind
	Version   string
	Kind      string
	Lower     string // lower-case Kind
	Plural    string // the resource
	GoVersion string
	Kloop     checkout

	// Defaulting and Validation are --webhooks' forms.
	Defaulting, Validation bool

	// Builtin is true for --for: the kind is a built-in one, in Package
	// (imported as Alias), with Sample the YAML of an example object after
	// its metadata; there is no api/ and no CRD.
	Builtin bool
	Package string
	Alias   string
	Sample  string
}

// Webhooks reports whether the project has a webhook of either form.
func (p *project) Webhooks() bool { return p.Defaulting || p.Validation }

// WebhooksTestName names the end-to-end test of the webhooks, after what
// they do.
func (p *project) WebhooksTestName() string {
	switch {
	case p.Defaulting && p.Validation:
		return "TheAPIServerDefaultsAndRefusesThroughThem"
	case p.Defaulting:
		return "TheAPIServerDefaultsThroughIt"
	}
	return "TheAPIServerRefusesThroughIt"
}

// APIVersion is the kind's apiVersion, such as apps/v1, or v1 for the core
// group.
func (p *project) APIVersion() string { return p.gvk().GroupVersion().String() }

// MutatePath and ValidatePath are where Setup serves the kind's webhooks,
// for their markers.
func (p *project) MutatePath() string   { return webhook.MutatePath(p.gvk()) }
func (p *project) ValidatePath() string { return webhook.ValidatePath(p.gvk()) }

func (p *project) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: p.Group, Version: p.Version, Kind: p.Kind}
}

// KloopRequire is the version of kloop go.mod requires: the released one,
// or a placeholder that the replace directive stands in for.
func (p *project) KloopRequire() string {
	if p.Kloop.Version != "" {
		return p.Kloop.Version
	}
	return "v0.0.0-00010101000000-000000000000"
}

var (
	kindRE    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	goLineRE  = regexp.MustCompile(`(?m)^go (\S+)$`)
)

// reservedKinds are the names the API package declares itself.
var reservedKinds = []string{"GroupName", "SchemeGroupVersion", "Resource", "AddToScheme"}

// newProject checks the input and returns the project; it writes nothing.
// Each error names the flag or argument and says what to give instead.
func (f *initFlags) newProject(dir string, src checkout) (*project, error) {
	if f.module == "" || f.forKind == "" && (f.group == "" || f.kind == "") {
		return nil, cli.Usagef("--module, and --group and --kind (a new API type) or --for (a built-in kind) are required, such as --module example.com/guestbook --group webapp.example.com --kind Guestbook, or --module example.com/redeployer --for apps/v1/Deployment")
	}
	if problem := checkModulePath(f.module); problem != "" {
		return nil, &cli.FlagError{Flag: "--module", Value: f.module, Want: fmt.Sprintf("a Go module path (this one %s), such as example.com/guestbook or github.com/you/guestbook", problem)}
	}
	name := projectName(f.module)
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, &cli.FlagError{Flag: "--module", Value: f.module, Want: fmt.Sprintf("its last element %q names the command and the controller, and must make a DNS label (lower-case letters, digits and '-', starting with a letter); give a path ending in a name such as guestbook", name)}
	}
	p := &project{Module: f.module, Name: name, Kloop: src}
	var err error
	if p.Defaulting, p.Validation, err = parseWebhooks(f.webhooks); err != nil {
		return nil, err
	}
	if f.forKind != "" {
		err = f.builtinKind(p)
	} else {
		err = f.newKind(p)
	}
	if err != nil {
		return nil, err
	}
	p.Lower = strings.ToLower(p.Kind)
	if p.Plural == "" {
		p.Plural = plural(p.Lower)
	}
	if p.Dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(p.Dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	case len(entries) > 0:
		return nil, cli.Usagef("directory %s is not empty (it holds %s): give an empty or new directory", dir, entries[0].Name())
	}
	p.GoVersion = "1.26.0"
	if data, err := os.ReadFile(filepath.Join(src.Dir, "go.mod")); err == nil {
		if m := goLineRE.FindSubmatch(data); m != nil {
			p.GoVersion = string(m[1])
		}
	}
	return p, nil
}

// newKind checks --group, --kind and --version, the new API type.
func (f *initFlags) newKind(p *project) error {
	if errs := validation.IsDNS1123Subdomain(f.group); len(errs) > 0 || !strings.Contains(f.group, ".") {
		return &cli.FlagError{Flag: "--group", Value: f.group, Want: "a DNS subdomain with at least one dot (lower-case letters, digits, '-' and '.'), such as webapp.example.com"}
	}
	for _, reserved := range []string{"k8s.io", "kubernetes.io"} {
		if f.group == reserved || strings.HasSuffix(f.group, "."+reserved) {
			return &cli.FlagError{Flag: "--group", Value: f.group, Want: "a group under a domain of yours: groups under " + reserved + " are reserved for Kubernetes' own APIs (for a controller of a built-in kind give --for, such as --for apps/v1/Deployment)"}
		}
	}
	if !kindRE.MatchString(f.kind) || len(f.kind) > 60 {
		return &cli.FlagError{Flag: "--kind", Value: f.kind, Want: "a kind in CamelCase: a capital letter, then letters and digits (at most 60), such as Guestbook"}
	}
	if slices.Contains(reservedKinds, f.kind) {
		return &cli.FlagError{Flag: "--kind", Value: f.kind, Want: fmt.Sprintf("another name: the API package declares %s itself", f.kind)}
	}
	version := f.version
	if version == "" {
		version = "v1alpha1"
	}
	if !versionRE.MatchString(version) {
		return &cli.FlagError{Flag: "--version", Value: version, Want: "a Kubernetes API version: v1, v2, v1alpha1, v1beta2, ..."}
	}
	p.Group, p.Version, p.Kind = f.group, version, f.kind
	return nil
}

var (
	modulePathElemRE = regexp.MustCompile(`^[A-Za-z0-9_~-]+(\.[A-Za-z0-9_~-]+)*$`)
	moduleHostRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`)
)

// checkModulePath says what is wrong with a module path, or "" when
// nothing is: slash-separated elements of letters, digits, '-', '_', '~'
// and inner dots, the first a lower-case domain name (as the go command
// wants for a module one can fetch and publish).
func checkModulePath(p string) string {
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if e == "" {
			return "has an empty element (a leading, trailing or doubled '/')"
		}
		if !modulePathElemRE.MatchString(e) {
			return fmt.Sprintf("has the element %q: use letters, digits, '-', '_', '~' and dots between them", e)
		}
	}
	if !moduleHostRE.MatchString(elems[0]) {
		return fmt.Sprintf("starts with %q, not a lower-case domain name with a dot", elems[0])
	}
	if len(elems) == 1 {
		return "has no element after the domain"
	}
	return ""
}

// projectName is the module path's last element, without a major version
// suffix (example.com/guestbook/v2 is guestbook), in lower case.
func projectName(modulePath string) string {
	elems := strings.Split(modulePath, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && regexp.MustCompile(`^v[0-9]+$`).MatchString(name) {
		name = elems[len(elems)-2]
	}
	return strings.ToLower(name)
}

// plural is the English plural of a lower-case kind, as a resource name.
func plural(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && len(s) > 1 && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

// builtinSuffix ends the name of a template that a project of a built-in
// kind (--for) has instead of the one without it.
const builtinSuffix = ".builtin.tmpl"

// render returns the project's files by path (slash-separated, relative
// to the project's directory), Go files gofmt'ed. A template that renders
// to nothing but white space is a file this project does not have (the
// webhook files without --webhooks, api/ with --for). With --for, X.builtin.tmpl
// is rendered in place of X.tmpl; without, it is not rendered.
func (p *project) render() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(templates, "templates", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if p.Builtin && (strings.HasPrefix(name, "templates/api/") || strings.HasPrefix(name, "templates/config/crd/")) {
			return nil // a built-in kind has no API package and no CRD
		}
		if strings.HasSuffix(name, builtinSuffix) {
			if !p.Builtin {
				return nil
			}
		} else if _, err := fs.Stat(templates, strings.TrimSuffix(name, ".tmpl")+builtinSuffix); p.Builtin && err == nil {
			return nil
		}
		text, err := templates.ReadFile(name)
		if err != nil {
			return err
		}
		t, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, p); err != nil {
			return err
		}
		out := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), builtinSuffix), ".tmpl")
		out = strings.NewReplacer("VERSION", p.Version, "NAME", p.Name).Replace(out)
		switch out {
		case "gitignore":
			out = ".gitignore"
		case "config/samples/sample.yaml":
			out = "config/samples/" + p.Version + "_" + p.Lower + ".yaml"
		}
		data := buf.Bytes()
		if len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		if path.Ext(out) == ".go" {
			if data, err = format.Source(data); err != nil {
				return fmt.Errorf("%s: the template makes Go that does not parse: %w", name, err)
			}
		}
		files[out] = data
		return nil
	})
	return files, err
}

// run checks the input, writes the project and generates the rest.
func (f *initFlags) run(dir string, stdout, stderr io.Writer) error {
	src, err := findCheckout(f.kloopDir)
	if err != nil {
		return err
	}
	p, err := f.newProject(dir, src)
	if err != nil {
		return err
	}
	files, err := p.render()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		target := filepath.Join(p.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, files[name], 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Created %s (module %s, %s %s) in %s\n", p.Name, p.Module, p.Kind, p.APIVersion(), p.Dir)
	if src.Version == "" {
		fmt.Fprintf(stdout, "go.mod: replace github.com/kloop-dev/kloop => %s (the kloop checkout this kloop was built from)\n", src.Dir)
	}
	if !f.noGenerate {
		for _, step := range [][]string{{"go", "mod", "tidy"}, {"make", "generate"}, {"go", "mod", "tidy"}} {
			fmt.Fprintf(stdout, "$ %s\n", strings.Join(step, " "))
			c := exec.Command(step[0], step[1:]...)
			c.Dir, c.Stdout, c.Stderr = p.Dir, stderr, stderr
			if err := c.Run(); err != nil {
				return fmt.Errorf("%s in %s: %w; the files are written: fix the cause, then run go mod tidy && make generate there", strings.Join(step, " "), p.Dir, err)
			}
		}
	}
	fmt.Fprintf(stdout, "Next, in %s:\n  make test   # unit and end-to-end tests\n  make demo   # the controller on a local control plane, with config/samples applied\n", p.Dir)
	return nil
}
