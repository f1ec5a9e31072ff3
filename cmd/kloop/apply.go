package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cli"
)

// devFieldManager owns what kloop dev --apply applies.
const devFieldManager = "kloop-dev"

// manifest is one YAML document of a file given to --apply.
type manifest struct {
	source string // file and document number, for errors
	raw    []byte
	obj    *unstructured.Unstructured
}

// readManifests reads the objects of paths: files, or the .yaml and .yml
// files of directories in name order, skipping kustomize's own files.
func readManifests(paths []string) ([]manifest, error) {
	var out []manifest
	for _, p := range paths {
		files := []string{p}
		st, err := os.Stat(p)
		if err != nil {
			return nil, &cli.FlagError{Flag: "--apply", Value: p, Want: "a YAML file or a directory of them (" + err.Error() + ")"}
		}
		if st.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			files = nil
			for _, e := range entries {
				ext := filepath.Ext(e.Name())
				if e.IsDir() || ext != ".yaml" && ext != ".yml" || strings.HasPrefix(e.Name(), "kustomization.") {
					continue
				}
				files = append(files, filepath.Join(p, e.Name()))
			}
			slices.Sort(files)
		}
		for _, f := range files {
			docs, err := readManifestFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, docs...)
		}
	}
	return out, nil
}

func readManifestFile(path string) ([]manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		source := fmt.Sprintf("%s (document %d)", path, n)
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: not a Kubernetes object with apiVersion and kind: %w", source, err)
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("%s: %s has no metadata.name", source, obj.GetKind())
		}
		out = append(out, manifest{source: source, raw: doc, obj: obj})
	}
}

// applyManifests installs the CustomResourceDefinitions among ms and waits
// until they are served, then applies the other objects by server-side
// apply (a namespaced one without a namespace goes to "default").
func applyManifests(ctx context.Context, cfg *rest.Config, ms []manifest, out io.Writer) error {
	for _, m := range ms {
		if m.obj.GetKind() == "CustomResourceDefinition" && m.obj.GroupVersionKind().Group == "apiextensions.k8s.io" {
			if err := kloop.InstallCRD(ctx, cfg, m.raw); err != nil {
				return fmt.Errorf("%s: %w", m.source, err)
			}
			fmt.Fprintf(out, "# installed CustomResourceDefinition %s\n", m.obj.GetName())
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, m := range ms {
		gvk := m.obj.GroupVersionKind()
		if m.obj.GetKind() == "CustomResourceDefinition" && gvk.Group == "apiextensions.k8s.io" {
			continue
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: the API server serves no %s: %w", m.source, gvk, err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if m.obj.GetNamespace() == "" {
				m.obj.SetNamespace(metav1.NamespaceDefault)
			}
			res = dyn.Resource(mapping.Resource).Namespace(m.obj.GetNamespace())
		}
		if _, err := res.Apply(ctx, m.obj.GetName(), m.obj, metav1.ApplyOptions{FieldManager: devFieldManager, Force: true}); err != nil {
			return fmt.Errorf("%s: apply %s %s: %w", m.source, gvk.Kind, m.obj.GetName(), err)
		}
		fmt.Fprintf(out, "# applied %s %s\n", gvk.Kind, qualifiedName(m.obj))
	}
	return nil
}

func qualifiedName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
