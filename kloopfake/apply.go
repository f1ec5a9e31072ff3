package kloopfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
)

// fieldManagers makes and keeps one field manager per kind and
// subresource, for server-side apply.
type fieldManagers struct {
	mu      sync.Mutex
	builtin managedfields.TypeConverter // from client-go's OpenAPI schemas of the built-in types
	deduced managedfields.TypeConverter // from the object itself: custom resources
	byKind  map[fieldManagerKey]*managedfields.FieldManager
}

type fieldManagerKey struct {
	gvk schema.GroupVersionKind
	sub string
}

// noDefaults is the defaulter of the field managers: the in-memory server
// applies no defaults.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

func (s *Server) fieldManager(r *resource, sub string) (*managedfields.FieldManager, error) {
	fm := &s.managers
	fm.mu.Lock()
	defer fm.mu.Unlock()
	k := fieldManagerKey{r.gvk, sub}
	if m := fm.byKind[k]; m != nil {
		return m, nil
	}
	var tc managedfields.TypeConverter
	if r.builtin {
		if fm.builtin == nil {
			fm.builtin = applyconfigurations.NewTypeConverter(s.scheme)
		}
		tc = fm.builtin
	} else {
		if fm.deduced == nil {
			fm.deduced = managedfields.NewDeducedTypeConverter()
		}
		tc = fm.deduced
	}
	m, err := managedfields.NewDefaultFieldManager(tc, s.scheme, noDefaults{}, s.scheme, r.gvk, r.gvk.GroupVersion(), sub, nil)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager of %s: %w", r.gvk, err))
	}
	if fm.byKind == nil {
		fm.byKind = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	fm.byKind[k] = m
	return m, nil
}

// apply serves a server-side apply of data by manager to the object of r
// at ns/name, creating it when there is none.
func (s *Server) apply(r *resource, ns, name, sub string, data []byte, manager string, force, dryRun bool) (runtime.Object, error) {
	if manager == "" {
		return nil, apierrors.NewBadRequest("fieldManager is required for apply requests")
	}
	applied := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &applied.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("apply configuration of %s %s: %v", r.gvk.Kind, name, err))
	}
	if applied.GroupVersionKind() != r.gvk {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the apply configuration is a %s; %s serves %s", applied.GroupVersionKind(), r.gvr, r.gvk))
	}
	m, err := s.fieldManager(r, sub)
	if err != nil {
		return nil, err
	}
	s.store.mu.Lock()
	_, exists := s.store.objs[r.gvr][objKey{ns, name}]
	s.store.mu.Unlock()
	if !exists {
		if sub != "" {
			return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name)
		}
		live, err := s.scheme.New(r.gvk)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		live.GetObjectKind().SetGroupVersionKind(r.gvk)
		a := mustAccessor(live)
		a.SetNamespace(ns)
		a.SetName(name)
		obj, err := m.Apply(live, applied, manager, force)
		if err != nil {
			return nil, err
		}
		out, err := s.store.create(r, ns, obj, false, dryRun)
		if !apierrors.IsAlreadyExists(err) {
			return out, err
		}
		// Created meanwhile: apply to it.
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return s.store.updateLocked(r, ns, name, sub, func(cur runtime.Object) (runtime.Object, error) {
		// A resourceVersion in the configuration is a precondition.
		if rv := applied.GetResourceVersion(); rv != "" && rv != mustAccessor(cur).GetResourceVersion() {
			return nil, apierrors.NewConflict(r.gvr.GroupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		return m.Apply(cur, applied, manager, force)
	}, dryRun)
}
