package cache

import (
	"encoding/binary"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/internal/protowalk"
	"github.com/kloop-dev/kloop/watcher"
)

// This file is the encoded form of a store (Options.Encoded): each object
// kept as its protobuf encoding, decoded again on every read.
//
// An entry is the object's name, prefixed by its length, followed by the
// object's encoding without its name, its namespace (the store's outer map
// key) and managedFields. The table finds an entry by the name at its
// start. Entries are strings, immutable once made, so a reader can decode
// one after it let go of the store's lock, and the strings of a decoded
// object (name, UID, resourceVersion, the keys and values of its
// map[string]string fields such as a ConfigMap's data) are substrings of
// the entry rather than copies.

// protoMessage is what the generated protobuf code of Kubernetes types
// provides.
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

// codec encodes and decodes objects of type T, a pointer to a protobuf
// message with object metadata (every built-in type).
type codec[T watcher.Object] struct {
	elem reflect.Type // what T points to
	// lean: T embeds metav1.ObjectMeta (the struct field metaField) as
	// field 1 of its message, as the built-in types do, so that decode
	// reads the metadata itself.
	lean      bool
	metaField int
	// strMaps are T's top-level map[string]string fields (a ConfigMap's
	// data), by field number: their offset in the struct. decode makes
	// their keys and values substrings of the entry.
	strMaps map[uint64]uintptr
	// check is the mutation detector's report function (nil when it is
	// off): shared label sets are checked against their encoding on use.
	check func(error)

	mu     sync.RWMutex
	labels map[string]map[string]string // shared label sets, by their encoding
}

// maxLabelSets bounds the codec's table of label sets; a full table starts
// afresh.
const maxLabelSets = 1 << 12

func newCodec[T watcher.Object]() (*codec[T], error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("cache: Encoded needs a pointer to a struct type, not %v", t)
	}
	if _, ok := reflect.New(t.Elem()).Interface().(protoMessage); !ok {
		return nil, fmt.Errorf("cache: Encoded needs a protobuf type (as the built-in types are); %v has no generated protobuf methods (Size, MarshalToSizedBuffer, Unmarshal)", t)
	}
	f, ok := t.Elem().FieldByName("ObjectMeta")
	c := &codec[T]{elem: t.Elem()}
	c.lean = ok && f.Anonymous && len(f.Index) == 1 && f.Type == reflect.TypeFor[metav1.ObjectMeta]() &&
		strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") && metaTagsAsExpected
	if c.lean {
		c.metaField = f.Index[0]
		for i := range t.Elem().NumField() {
			sf := t.Elem().Field(i)
			var num uint64
			if sf.Type != reflect.TypeFor[map[string]string]() {
				continue
			}
			if _, err := fmt.Sscanf(sf.Tag.Get("protobuf"), "bytes,%d,rep,", &num); err != nil || num == objectMetadata {
				continue
			}
			if c.strMaps == nil {
				c.strMaps = map[uint64]uintptr{}
			}
			c.strMaps[num] = sf.Offset
		}
	}
	if h := mutationHandler.Load(); h != nil {
		c.check = *h
	}
	return c, nil
}

// metaTagsAsExpected checks the ObjectMeta field numbers this file relies
// on.
var metaTagsAsExpected = func() bool {
	for name, prefix := range map[string]string{"Name": "bytes,1,", "UID": "bytes,5,", "ResourceVersion": "bytes,6,", "Labels": "bytes,11,"} {
		f, ok := reflect.TypeFor[metav1.ObjectMeta]().FieldByName(name)
		if !ok || !strings.HasPrefix(f.Tag.Get("protobuf"), prefix) {
			return false
		}
	}
	return true
}()

// entry is an object of an encoded store: its name, prefixed by its
// length as a uvarint, then its encoding.
type entry string

// GetName is the name at the start of the entry.
func (e entry) GetName() string {
	n, k := uvarint(string(e))
	return string(e[k : k+int(n)])
}

// split returns the entry's name and encoding.
func (e entry) split() (name, enc string) {
	n, k := uvarint(string(e))
	return string(e[k : k+int(n)]), string(e[k+int(n):])
}

// encode returns obj's entry. obj is not changed: the encoding is made
// from a shallow copy.
func (c *codec[T]) encode(obj T) entry {
	cp := reflect.New(c.elem)
	cp.Elem().Set(reflect.ValueOf(obj).Elem())
	o := cp.Interface().(T)
	o.SetNamespace("")
	o.SetName("")
	o.SetManagedFields(nil)
	msg := cp.Interface().(protoMessage)
	name := obj.GetName()
	prefix := binary.AppendUvarint(nil, uint64(len(name)))
	size := msg.Size()
	b := make([]byte, len(prefix)+len(name)+size)
	copy(b, prefix)
	copy(b[len(prefix):], name)
	if _, err := msg.MarshalToSizedBuffer(b[len(prefix)+len(name):]); err != nil {
		// The generated Marshal fails only on a broken message type.
		panic(fmt.Sprintf("cache: encoding %T %s: %v", obj, obj.GetName(), err))
	}
	// b is never written again, so the string can share its bytes
	// instead of copying them and leaving b as garbage.
	return entry(unsafe.String(unsafe.SliceData(b), len(b)))
}

// decode returns a new object from e, in namespace ns.
//
// For the built-in types it reads the metadata's UID, resourceVersion and
// labels itself, and the map[string]string fields: the strings become
// substrings of the entry instead of copies, and objects with the same
// labels share one map (as they do in a decoded cache), which saves most
// of the allocations and copying of a decode. Everything else goes
// through the type's Unmarshal, which only reads its input and copies
// what it keeps.
func (c *codec[T]) decode(ns string, e entry) T {
	name, enc := e.split()
	p := reflect.New(c.elem)
	msg := p.Interface().(protoMessage)
	var err error
	if c.lean {
		err = c.decodeLean(msg, p.UnsafePointer(), p.Elem().Field(c.metaField).Addr().Interface().(*metav1.ObjectMeta), enc)
	} else {
		err = msg.Unmarshal(bytesOf(enc))
	}
	if err != nil {
		// The store made the entry with Marshal of the same type.
		panic(fmt.Sprintf("cache: decoding a cached %v: %v", c.elem, err))
	}
	obj := p.Interface().(T)
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// bytesOf is s as a byte slice without a copy, for Unmarshal, which only
// reads it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// decodeLean decodes entry into msg, at base, whose embedded metadata is
// meta.
func (c *codec[T]) decodeLean(msg protoMessage, base unsafe.Pointer, meta *metav1.ObjectMeta, entry string) error {
	var metaErr error
	err := unmarshalExcept(msg, entry, 0, len(entry), func(num uint64, off, n int) bool {
		if num == objectMetadata {
			metaErr = c.decodeMeta(meta, entry, off, off+n)
			return true
		}
		at, ok := c.strMaps[num]
		if !ok {
			return false
		}
		// A map entry: key (field 1) and value (field 2), both optional.
		var k, v string
		if ko, kn, ok := field(entry, off, off+n, 1); ok {
			k = entry[ko : ko+kn]
		}
		if vo, vn, ok := field(entry, off, off+n, 2); ok {
			v = entry[vo : vo+vn]
		}
		m := (*map[string]string)(unsafe.Add(base, at))
		if *m == nil {
			*m = make(map[string]string, 1)
		}
		(*m)[k] = v
		return true
	})
	if err == nil {
		err = metaErr
	}
	return err
}

// decodeMeta decodes the ObjectMeta message entry[start:end] into meta.
func (c *codec[T]) decodeMeta(meta *metav1.ObjectMeta, entry string, start, end int) error {
	labelsFrom, labelsTo := -1, -1 // the run of labels fields, as Marshal writes them
	contiguous := true
	err := unmarshalExcept(meta, entry, start, end, func(num uint64, off, n int) bool {
		switch num {
		case metaName:
			meta.Name = entry[off : off+n]
		case metaUID:
			meta.UID = types.UID(entry[off : off+n])
		case metaResourceVersion:
			meta.ResourceVersion = entry[off : off+n]
		case metaLabels:
			field := fieldStart(entry, off, num)
			switch {
			case labelsFrom < 0:
				labelsFrom = field
			case field != labelsTo:
				contiguous = false
			}
			labelsTo = off + n
		default:
			return false
		}
		return true
	})
	if err != nil || labelsFrom < 0 {
		return err
	}
	if !contiguous {
		// Not what Marshal writes; decode the labels the plain way.
		return meta.Unmarshal(bytesOf(entry[start:end]))
	}
	labels, err := c.labelSet(entry[labelsFrom:labelsTo])
	meta.Labels = labels
	return err
}

// fieldStart is the offset of the tag of the length-delimited field num
// whose payload starts at off.
func fieldStart(b string, off int, num uint64) int {
	size := off - 1
	for size > 0 && b[size-1]&0x80 != 0 { // back over the length varint
		size--
	}
	return size - uvarintLen(num<<3|2)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// labelSet returns the shared label set encoded by fields, a run of
// ObjectMeta labels fields, decoding it on first sight.
func (c *codec[T]) labelSet(fields string) (map[string]string, error) {
	c.mu.RLock()
	shared, ok := c.labels[fields]
	c.mu.RUnlock()
	if ok && c.check == nil {
		return shared, nil
	}
	var m metav1.ObjectMeta
	if err := m.Unmarshal(bytesOf(fields)); err != nil {
		return nil, err
	}
	if ok {
		// The mutation detector is on: a reader that changed a shared set
		// would change it for every later read.
		if !maps.Equal(shared, m.Labels) {
			c.check(fmt.Errorf("cache: a label set that cached %v objects share was modified in place: stored %v, found %v; objects from a store are read-only, use cache.Copy before writing", c.elem, m.Labels, shared))
		}
		return shared, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.labels == nil || len(c.labels) >= maxLabelSets {
		c.labels = make(map[string]map[string]string)
	}
	// The key is a copy: a substring would keep a whole entry alive.
	c.labels[strings.Clone(fields)] = m.Labels
	return m.Labels, nil
}

// unmarshalExcept unmarshals the message b[start:end] into u, except the
// length-delimited fields that take takes (see protowalk.UnmarshalExcept),
// with offsets in b.
func unmarshalExcept(u protoMessage, b string, start, end int, take func(num uint64, off, n int) bool) error {
	return protowalk.UnmarshalExcept(u, bytesOf(b[start:end]), func(num uint64, off, n int) (bool, error) {
		return take(num, start+off, n), nil
	})
}

var errMalformed = protowalk.ErrMalformed

// meta returns the UID and resourceVersion recorded in entry, as
// substrings of it, without decoding the object.
func meta(e entry) (uid, rv string) {
	_, entry := e.split()
	if off, n, ok := metaString(entry, metaUID); ok {
		uid = entry[off : off+n]
	}
	if off, n, ok := metaString(entry, metaResourceVersion); ok {
		rv = entry[off : off+n]
	}
	return uid, rv
}

// Field numbers: metadata is field 1 of every top-level built-in object;
// the others are metav1.ObjectMeta's.
const (
	objectMetadata      = 1
	metaName            = 1
	metaUID             = 5
	metaResourceVersion = 6
	metaLabels          = 11
)

// metaString finds the string field num of an object's metadata in the
// encoding b: its offset in b and its length.
func metaString(b string, num uint64) (off, n int, ok bool) {
	mo, mn, ok := field(b, 0, len(b), objectMetadata)
	if !ok {
		return 0, 0, false
	}
	return field(b, mo, mo+mn, num)
}

// field finds the last length-delimited field num in b[start:end], the
// way Unmarshal would read it: the last occurrence wins.
func field(b string, start, end int, num uint64) (off, n int, ok bool) {
	for i := start; i < end; {
		tag, k := uvarint(b[i:end])
		if k <= 0 {
			return 0, 0, false
		}
		i += k
		switch tag & 7 {
		case 0: // varint
			_, k := uvarint(b[i:end])
			if k <= 0 {
				return 0, 0, false
			}
			i += k
		case 1: // fixed64
			i += 8
		case 5: // fixed32
			i += 4
		case 2: // length-delimited
			size, k := uvarint(b[i:end])
			if k <= 0 || size > uint64(end-i-k) {
				return 0, 0, false
			}
			i += k
			if tag>>3 == num {
				off, n, ok = i, int(size), true
			}
			i += int(size)
		default:
			return 0, 0, false
		}
	}
	return off, n, ok
}

func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// listEncoded is ListInNamespace for an encoded store: the entries are
// collected under the lock and decoded after it, so that decoding holds up
// neither the writer nor other readers.
func (s *Store[T]) listEncoded(namespace string, selector labels.Selector) []T {
	type nsEntry struct {
		ns string
		e  entry
	}
	var entries []nsEntry
	s.mu.RLock()
	if keys, ok := s.candidates(selector); ok {
		entries = make([]nsEntry, 0, len(keys))
		for k := range keys {
			if namespace == "" || k.Namespace == namespace {
				e, _ := s.enc[k.Namespace].get(k.Name)
				entries = append(entries, nsEntry{k.Namespace, e})
			}
		}
	} else if namespace != "" {
		if byName := s.enc[namespace]; byName != nil {
			entries = make([]nsEntry, 0, byName.len())
			for e := range byName.all() {
				entries = append(entries, nsEntry{namespace, e})
			}
		}
	} else {
		entries = make([]nsEntry, 0, s.count)
		for ns, byName := range s.enc {
			for e := range byName.all() {
				entries = append(entries, nsEntry{ns, e})
			}
		}
	}
	s.mu.RUnlock()
	out := make([]T, 0, len(entries))
	for _, e := range entries {
		obj := s.codec.decode(e.ns, e.e)
		if selector == nil || selector.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, obj)
		}
	}
	return out
}

// candidates is labelCandidates for a selector that may be nil.
func (s *Store[T]) candidates(selector labels.Selector) (map[Key]struct{}, bool) {
	if selector == nil {
		return nil, false
	}
	return s.labelCandidates(selector)
}

// byIndexEncoded is ByIndex for an encoded store (and an index other than
// the namespace).
func (s *Store[T]) byIndexEncoded(name, value string) ([]T, error) {
	s.mu.RLock()
	ix := s.indexes[name]
	if ix == nil {
		s.mu.RUnlock()
		return nil, fmt.Errorf("%w %q", ErrUnknownIndex, name)
	}
	keys := ix.values[value]
	entries := make([]entry, 0, len(keys))
	nss := make([]string, 0, len(keys))
	for k := range keys {
		e, _ := s.enc[k.Namespace].get(k.Name)
		entries = append(entries, e)
		nss = append(nss, k.Namespace)
	}
	s.mu.RUnlock()
	out := make([]T, len(entries))
	for i, e := range entries {
		out[i] = s.codec.decode(nss[i], e)
	}
	return out, nil
}

// getEncoded is Get for an encoded store.
func (s *Store[T]) getEncoded(namespace, name string) (T, bool) {
	s.mu.RLock()
	e, ok := s.enc[namespace].get(name)
	s.mu.RUnlock()
	if !ok {
		var zero T
		return zero, false
	}
	return s.codec.decode(namespace, e), true
}

// applyEncoded is Apply for an encoded store.
func (w *Writer[T]) applyEncoded(obj T, rv string) (old T, existed bool) {
	s := w.s
	k := KeyOf(obj)
	e := s.codec.encode(obj)
	// Only the writer changes s.enc, so it reads it without the lock; the
	// object replaced is decoded for the caller (and the indexes).
	prev, existed := s.enc[k.Namespace].get(k.Name)
	if existed {
		old = s.codec.decode(k.Namespace, prev)
	}
	s.mu.Lock()
	byName := s.enc[k.Namespace]
	if byName == nil {
		byName = newTable[entry](0)
		s.enc[k.Namespace] = byName
	}
	byName.put(e)
	if existed {
		for _, ix := range s.indexes {
			ix.update(k, old, obj)
		}
	} else {
		s.count++
		for _, ix := range s.indexes {
			ix.add(k, obj)
		}
	}
	s.advanceLocked(rv, false)
	s.mu.Unlock()
	return old, existed
}

// deleteEncoded is Delete for an encoded store.
func (w *Writer[T]) deleteEncoded(final T, rv string) (old T, existed bool) {
	s := w.s
	k := KeyOf(final)
	prev, existed := s.enc[k.Namespace].get(k.Name)
	if existed {
		old = s.codec.decode(k.Namespace, prev)
	}
	s.mu.Lock()
	if existed {
		byName := s.enc[k.Namespace]
		byName.remove(k.Name)
		if byName.len() == 0 {
			delete(s.enc, k.Namespace)
		}
		s.count--
		for _, ix := range s.indexes {
			ix.remove(k, old)
		}
	}
	s.advanceLocked(rv, false)
	s.mu.Unlock()
	return old, existed
}

// replaceEncoded is replaceWith for an encoded store. The snapshot's
// decoded objects are what the changes carry and what the indexes are
// built from; its encodings are what the store keeps.
func (w *Writer[T]) replaceEncoded(snap *Snapshot[T], rv string) []Event[T] {
	changes, _ := w.replaceEncodedLazily(snap, rv, false)
	return changes
}

// replaceEncodedLazily is replaceWith for an encoded store. With lazy, the
// objects the store did not hold are not decoded: their keys are returned
// instead of Added events, and a receiver reads each from the store when it
// needs it, so that a snapshot's objects are never all decoded at once.
func (w *Writer[T]) replaceEncodedLazily(snap *Snapshot[T], rv string, lazy bool) (changes []Event[T], added []Key) {
	s := w.s
	newEnc, count := snap.enc, snap.count
	if snap.codec == nil { // a zero Snapshot: encode now
		newEnc = make(map[string]*table[entry], len(snap.objs))
		for ns, byName := range snap.objs {
			t := newTable[entry](capFor(byName.len()))
			for obj := range byName.all() {
				t.put(s.codec.encode(obj))
			}
			newEnc[ns] = t
		}
	}
	*snap = Snapshot[T]{}
	if newEnc == nil {
		newEnc = make(map[string]*table[entry])
	}
	for _, byName := range newEnc {
		byName.fit()
	}

	var deletes []Event[T]
	for ns, byName := range s.enc { // only the writer changes s.enc
		for e := range byName.all() {
			name := e.GetName()
			ne, ok := newEnc[ns].get(name)
			uid, erv := meta(e)
			nuid, nrv := meta(ne)
			switch {
			case !ok, uid != nuid:
				deletes = append(deletes, Event[T]{Kind: Deleted, Old: s.codec.decode(ns, e), FinalStateUnknown: true})
			case erv == nrv:
				newEnc[ns].put(e) // unchanged: keep the entry, drop the snapshot's copy
			}
		}
	}
	if lazy {
		changes = deletes
	} else {
		changes = make([]Event[T], 0, len(deletes)+count)
		changes = append(changes, deletes...)
	}
	for ns, byName := range newEnc {
		for ne := range byName.all() {
			e, had := s.enc[ns].get(ne.GetName())
			uid, erv := meta(e)
			nuid, nrv := meta(ne)
			switch {
			case !had, uid != nuid:
				if lazy {
					added = append(added, Key{Namespace: ns, Name: ne.GetName()})
				} else {
					changes = append(changes, Event[T]{Kind: Added, New: s.codec.decode(ns, ne), Merged: true})
				}
			case erv != nrv:
				changes = append(changes, Event[T]{Kind: Updated, Old: s.codec.decode(ns, e), New: s.codec.decode(ns, ne), Merged: true})
			}
		}
	}
	newIndexes := make(map[string]*index[T], len(s.indexes))
	for name, ix := range s.indexes {
		nix := newIndex(ix.fn, len(ix.values))
		for ns, byName := range newEnc {
			for e := range byName.all() {
				nix.add(Key{Namespace: ns, Name: e.GetName()}, s.codec.decode(ns, e))
			}
		}
		newIndexes[name] = nix
	}

	s.mu.Lock()
	s.enc, s.count, s.indexes = newEnc, count, newIndexes
	s.advanceLocked(rv, true)
	s.mu.Unlock()
	return changes, added
}

// keysEncoded is the key of every object of an encoded store, read under
// the lock; nothing is decoded.
func (s *Store[T]) keysEncoded() []Key {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]Key, 0, s.count)
	for ns, byName := range s.enc {
		for e := range byName.all() {
			keys = append(keys, Key{Namespace: ns, Name: e.GetName()})
		}
	}
	return keys
}

// ReplaceLazily makes the store hold exactly the objects of snap, a
// consistent snapshot at rv, as Replace does, and takes snap over: the
// caller must not use it afterwards. For a plain store changes are what
// Replace returns and added is nil. For an encoded store
// (Options.Encoded) it decodes no object the store did not hold: changes
// are the Deleted and Updated events, added the keys of the objects that
// are new, for a receiver to read from the store one at a time, so that a
// snapshot's objects are never all decoded at once.
func (w *Writer[T]) ReplaceLazily(snap *Snapshot[T], rv string) (changes []Event[T], added []Key) {
	if w.s.codec == nil {
		return w.replaceWith(snap, rv), nil
	}
	return w.replaceEncodedLazily(snap, rv, true)
}

// EncodedKeys returns the key of every object of an encoded store
// (Options.Encoded), decoding none; ok is false for a plain store, whose
// objects List returns at no cost.
func (s *Store[T]) EncodedKeys() (keys []Key, ok bool) {
	if s.codec == nil {
		return nil, false
	}
	return s.keysEncoded(), true
}
