package informer

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/watcher"
)

// interner makes objects of one informer share the metadata that repeats
// between them: each decoded object arrives with its own copy of every
// string and map, although namespaces, label keys and values, whole label
// sets (all pods of a Deployment carry the same ones), owner references and
// type information are the same for many objects. Sharing them is safe
// because cached objects are read-only, and it saves hundreds of bytes per
// object: a Go map of two labels alone takes over 300.
//
// An interner belongs to the reflector's goroutine (it runs in the
// transform) and needs no lock. Its tables are bounded; when one fills up it
// starts afresh, so memory kept for values no object uses any more is
// bounded too.
type interner struct {
	strs   map[string]string
	labels map[string]map[string]string
	owners map[uint64][]metav1.OwnerReference // by ownersHash
	seed   maphash.Seed
	annots map[string]map[string]string
	pod    podTables // parts of pod specs (intern_pod.go)
	key    []byte    // scratch; looking a map up with string(key) does not allocate
	keys   []string
	ns     string // the namespace last interned
}

const (
	internMaxStrings = 1 << 16
	internMaxSets    = 1 << 12
	internMaxLen     = 128 // longer strings are rarely shared
)

func newInterner() *interner {
	return &interner{
		strs:   make(map[string]string),
		labels: make(map[string]map[string]string),
		owners: make(map[uint64][]metav1.OwnerReference),
		seed:   maphash.MakeSeed(),
		annots: make(map[string]map[string]string),
	}
}

func (in *interner) str(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	if c, ok := in.strs[s]; ok {
		return c
	}
	if len(in.strs) >= internMaxStrings {
		clear(in.strs)
	}
	in.strs[s] = s
	return s
}

// object replaces obj's repeated metadata with shared copies.
func (in *interner) object(obj watcher.Object) {
	// An informer's objects are mostly of one namespace after another:
	// the last one is compared before the table is looked up.
	if ns := obj.GetNamespace(); ns != "" {
		if ns != in.ns {
			in.ns = in.str(ns)
		}
		obj.SetNamespace(in.ns)
	}
	switch tm := obj.GetObjectKind().(type) {
	case *metav1.TypeMeta: // a typed object's: its strings as they are
		tm.APIVersion, tm.Kind = in.str(tm.APIVersion), in.str(tm.Kind)
	default:
		if gvk := tm.GroupVersionKind(); !gvk.Empty() {
			tm.SetGroupVersionKind(schema.GroupVersionKind{Group: in.str(gvk.Group), Version: in.str(gvk.Version), Kind: in.str(gvk.Kind)})
		}
	}
	if l := obj.GetLabels(); len(l) > 0 {
		obj.SetLabels(in.labelSet(l))
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		obj.SetAnnotations(in.annotations(a))
	}
	if refs := obj.GetOwnerReferences(); len(refs) > 0 {
		obj.SetOwnerReferences(in.ownerRefs(refs))
	}
	if f := obj.GetFinalizers(); len(f) > 0 {
		for i := range f {
			f[i] = in.str(f[i])
		}
	}
	// The keys of a ConfigMap's or Secret's data repeat across objects as
	// label keys do; they are swapped in place, as annotation keys are.
	switch o := any(obj).(type) {
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			o.Data[in.str(k)] = v
		}
		for k, v := range o.BinaryData {
			o.BinaryData[in.str(k)] = v
		}
	case *corev1.Secret:
		for k, v := range o.Data {
			o.Data[in.str(k)] = v
		}
	default:
		in.podTemplate(obj)
	}
	packMeta(obj)
}

// packMeta moves the strings of obj's metadata that are its own, unlike
// the shared ones (name, generateName, UID and resourceVersion), into one
// allocation. Decoded, each is an allocation of its own, rounded up to the
// allocator's size class: a 36-byte UID takes 48. Together they take 8–16
// bytes less per object. Strings are immutable, so the object reads the
// same; the old copies become garbage.
func packMeta(obj watcher.Object) {
	name, gen, uid, rv := obj.GetName(), obj.GetGenerateName(), string(obj.GetUID()), obj.GetResourceVersion()
	if packed(name, gen, uid, rv) {
		return // the decoder packed them already (OfResource with protobuf)
	}
	buf := make([]byte, 0, len(name)+len(gen)+len(uid)+len(rv))
	put := func(s string) string {
		if s == "" {
			return ""
		}
		at := len(buf)
		buf = append(buf, s...)
		// buf never grows past its capacity and is not written again, so
		// the string can share its bytes.
		return unsafe.String(&buf[at], len(s))
	}
	obj.SetName(put(name))
	obj.SetGenerateName(put(gen))
	obj.SetUID(types.UID(put(uid)))
	obj.SetResourceVersion(put(rv))
}

func (in *interner) labelSet(l map[string]string) map[string]string {
	in.keys = in.keys[:0]
	for k := range l {
		in.keys = append(in.keys, k)
	}
	slices.Sort(in.keys)
	in.key = in.key[:0]
	for _, k := range in.keys {
		in.key = append(in.key, k...)
		in.key = append(in.key, 0)
		in.key = append(in.key, l[k]...)
		in.key = append(in.key, 0)
	}
	if c, ok := in.labels[string(in.key)]; ok {
		return c
	}
	if len(in.labels) >= internMaxSets {
		clear(in.labels)
	}
	shared := make(map[string]string, len(l))
	for k, v := range l {
		shared[in.str(k)] = in.str(v)
	}
	in.labels[string(in.key)] = shared
	return shared
}

// annotations returns the shared annotation set equal to a, when its values
// are short: the replicas of one ReplicaSet carry the same annotations. A
// set with a long value (a last-applied configuration) is often unique, so
// only its keys are shared, and those are swapped in place, in the
// object's own map: assigning to a key that is present stores the key
// given and replaces no entry, so no second map is allocated (and left as
// garbage) per object. A set seen first is kept as the object's own map,
// its keys swapped likewise.
func (in *interner) annotations(a map[string]string) map[string]string {
	for k, v := range a {
		a[in.str(k)] = v
	}
	in.keys = in.keys[:0]
	for k, v := range a {
		if len(v) > internMaxLen {
			return a
		}
		in.keys = append(in.keys, k)
	}
	slices.Sort(in.keys)
	in.key = in.key[:0]
	for _, k := range in.keys {
		// Length-prefixed: an annotation value may hold any byte.
		in.key = binary.AppendUvarint(in.key, uint64(len(k)))
		in.key = append(in.key, k...)
		in.key = binary.AppendUvarint(in.key, uint64(len(a[k])))
		in.key = append(in.key, a[k]...)
	}
	if c, ok := in.annots[string(in.key)]; ok {
		return c
	}
	if len(in.annots) >= internMaxSets {
		clear(in.annots)
	}
	// Its values are not interned: a set's values are often each
	// object's own, and would only churn the string table; equal sets
	// share them anyway.
	in.annots[string(in.key)] = a
	return a
}

// ownerRefs returns the shared owner list equal to refs. The table is keyed
// by a hash of the list, not by the list as text: most lists are one
// object's own (a controller reference names its owner's UID), and a text
// key of some hundred bytes per object would be kept only to find none.
// A list whose hash finds another list is left unshared. A list seen first
// is kept as the object's own slice, its apiVersion and kind shared.
func (in *interner) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	h := in.ownersHash(refs)
	if c, ok := in.owners[h]; ok {
		if sameOwners(c, refs) {
			return c
		}
		return refs
	}
	if len(in.owners) >= internMaxSets {
		clear(in.owners)
	}
	for i := range refs {
		refs[i].APIVersion = in.str(refs[i].APIVersion)
		refs[i].Kind = in.str(refs[i].Kind)
	}
	in.owners[h] = refs
	return refs
}

func (in *interner) ownersHash(refs []metav1.OwnerReference) uint64 {
	in.key = in.key[:0]
	for _, r := range refs {
		for _, s := range [...]string{r.APIVersion, r.Kind, r.Name, string(r.UID), boolKey(r.Controller), boolKey(r.BlockOwnerDeletion)} {
			in.key = append(in.key, s...)
			in.key = append(in.key, 0)
		}
	}
	return maphash.Bytes(in.seed, in.key)
}

// sameOwners reports whether a and b are equal owner lists.
func sameOwners(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			boolKey(x.Controller) == boolKey(y.Controller) && boolKey(x.BlockOwnerDeletion) == boolKey(y.BlockOwnerDeletion)
	})
}

func boolKey(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	}
	return "f"
}

// packed reports whether the non-empty strings of ss lie one after the
// other in memory, in order, as packMeta leaves them.
func packed(ss ...string) bool {
	var next uintptr // an address compared, never used as a pointer
	for _, s := range ss {
		if s == "" {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		if next != 0 && p != next {
			return false
		}
		next = p + uintptr(len(s))
	}
	return next != 0
}
