package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/watcher"
)

// This file is the encoded form of a store (Options.Encoded): each object
// kept as its protobuf encoding, decoded again on every read.
//
// An entry is the object's encoding without its namespace (the store's
// outer map key) and without managedFields. The inner map's key, the
// object's name, is a substring of the encoding rather than a string of
// its own. Encodings are strings, immutable once made, so a reader can
// decode one after it let go of the store's lock.

// protoMessage is what the generated protobuf code of Kubernetes types
// provides.
type protoMessage interface {
	Marshal() ([]byte, error)
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
		return nil, fmt.Errorf("cache: Encoded needs a protobuf type (as the built-in types are); %v has no Marshal and Unmarshal", t)
	}
	f, ok := t.Elem().FieldByName("ObjectMeta")
	c := &codec[T]{elem: t.Elem()}
	c.lean = ok && f.Anonymous && len(f.Index) == 1 && f.Type == reflect.TypeFor[metav1.ObjectMeta]() &&
		strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") && metaTagsAsExpected
	if c.lean {
		c.metaField = f.Index[0]
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

// encode returns obj's entry and its name as a substring of it. obj is not
// changed: the encoding is made from a shallow copy.
func (c *codec[T]) encode(obj T) (entry, name string) {
	cp := reflect.New(c.elem)
	cp.Elem().Set(reflect.ValueOf(obj).Elem())
	o := cp.Interface().(T)
	o.SetNamespace("")
	o.SetManagedFields(nil)
	b, err := cp.Interface().(protoMessage).Marshal()
	if err != nil {
		// The generated Marshal fails only on a broken message type.
		panic(fmt.Sprintf("cache: encoding %T %s: %v", obj, obj.GetName(), err))
	}
	// b is never written again, so the string can share its bytes
	// instead of copying them and leaving b as garbage.
	entry = unsafe.String(unsafe.SliceData(b), len(b))
	if off, n, ok := metaString(entry, metaName); ok && entry[off:off+n] == obj.GetName() {
		return entry, entry[off : off+n]
	}
	return entry, obj.GetName()
}

// decode returns a new object from entry, in namespace ns.
//
// For the built-in types it reads the metadata's name, UID,
// resourceVersion and labels itself: the strings become substrings of the
// entry instead of copies, and objects with the same labels share one map
// (as they do in a decoded cache), which saves most of the allocations of
// a decode. Everything else goes through the type's Unmarshal, which only
// reads its input and copies what it keeps.
func (c *codec[T]) decode(ns, entry string) T {
	p := reflect.New(c.elem)
	msg := p.Interface().(protoMessage)
	var err error
	if c.lean {
		err = c.decodeLean(msg, p.Elem().Field(c.metaField).Addr().Interface().(*metav1.ObjectMeta), entry)
	} else {
		err = msg.Unmarshal(bytesOf(entry))
	}
	if err != nil {
		// The store made entry with Marshal of the same type.
		panic(fmt.Sprintf("cache: decoding a cached %v: %v", c.elem, err))
	}
	obj := p.Interface().(T)
	obj.SetNamespace(ns)
	return obj
}

// bytesOf is s as a byte slice without a copy, for Unmarshal, which only
// reads it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// decodeLean decodes entry into msg, whose embedded metadata is meta.
func (c *codec[T]) decodeLean(msg protoMessage, meta *metav1.ObjectMeta, entry string) error {
	var metaErr error
	err := unmarshalExcept(msg, entry, 0, len(entry), func(num uint64, off, n int) bool {
		if num != objectMetadata {
			return false
		}
		metaErr = c.decodeMeta(meta, entry, off, off+n)
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
// length-delimited fields that take takes: take gets each one's number and
// the offset and length of its payload in b, and reports whether it dealt
// with it. The runs of fields in between go to u.Unmarshal in order, which
// merges them into u, so that u ends as a full Unmarshal would leave it
// but for the fields taken.
func unmarshalExcept(u protoMessage, b string, start, end int, take func(num uint64, off, n int) bool) error {
	run := start
	for i := start; i < end; {
		tag, k := uvarint(b[i:end])
		if k <= 0 {
			return errMalformed
		}
		next := i + k
		switch tag & 7 {
		case 0:
			_, k := uvarint(b[next:end])
			if k <= 0 {
				return errMalformed
			}
			next += k
		case 1:
			next += 8
		case 5:
			next += 4
		case 2:
			size, k := uvarint(b[next:end])
			if k <= 0 || size > uint64(end-next-k) {
				return errMalformed
			}
			off := next + k
			next = off + int(size)
			if take(tag>>3, off, int(size)) {
				if run < i {
					if err := u.Unmarshal(bytesOf(b[run:i])); err != nil {
						return err
					}
				}
				run = next
			}
		default:
			return errMalformed
		}
		if next > end {
			return errMalformed
		}
		i = next
	}
	if run < end {
		return u.Unmarshal(bytesOf(b[run:end]))
	}
	return nil
}

var errMalformed = errors.New("malformed protobuf")

// meta returns the UID and resourceVersion recorded in entry, as
// substrings of it, without decoding the object.
func meta(entry string) (uid, rv string) {
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
	type entry struct{ ns, e string }
	var entries []entry
	s.mu.RLock()
	if keys, ok := s.candidates(selector); ok {
		entries = make([]entry, 0, len(keys))
		for k := range keys {
			if namespace == "" || k.Namespace == namespace {
				entries = append(entries, entry{k.Namespace, s.enc[k.Namespace][k.Name]})
			}
		}
	} else if namespace != "" {
		entries = make([]entry, 0, len(s.enc[namespace]))
		for _, e := range s.enc[namespace] {
			entries = append(entries, entry{namespace, e})
		}
	} else {
		entries = make([]entry, 0, s.count)
		for ns, byName := range s.enc {
			for _, e := range byName {
				entries = append(entries, entry{ns, e})
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
	entries := make([]string, 0, len(keys))
	nss := make([]string, 0, len(keys))
	for k := range keys {
		entries = append(entries, s.enc[k.Namespace][k.Name])
		nss = append(nss, k.Namespace)
	}
	s.mu.RUnlock()
	out := make([]T, len(entries))
	for i, e := range entries {
		out[i] = s.codec.decode(nss[i], e)
	}
	return out, nil
}

// applyEncoded is Apply for an encoded store.
func (w *Writer[T]) applyEncoded(obj T) (old T, existed bool) {
	s := w.s
	k := KeyOf(obj)
	entry, name := s.codec.encode(obj)
	// Only the writer changes s.enc, so it reads it without the lock; the
	// object replaced is decoded for the caller (and the indexes).
	prev, existed := s.enc[k.Namespace][k.Name]
	if existed {
		old = s.codec.decode(k.Namespace, prev)
	}
	s.mu.Lock()
	byName := s.enc[k.Namespace]
	if byName == nil {
		byName = make(map[string]string)
		s.enc[k.Namespace] = byName
	}
	// Assigning to a present key stores the key given too, so the entry
	// replaced, whose substring the old key was, is not kept alive by it.
	byName[name] = entry
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
	s.advanceLocked(obj.GetResourceVersion(), false)
	s.mu.Unlock()
	return old, existed
}

// deleteEncoded is Delete for an encoded store.
func (w *Writer[T]) deleteEncoded(final T) (old T, existed bool) {
	s := w.s
	k := KeyOf(final)
	prev, existed := s.enc[k.Namespace][k.Name]
	if existed {
		old = s.codec.decode(k.Namespace, prev)
	}
	s.mu.Lock()
	if existed {
		byName := s.enc[k.Namespace]
		delete(byName, k.Name)
		if len(byName) == 0 {
			delete(s.enc, k.Namespace)
		}
		s.count--
		for _, ix := range s.indexes {
			ix.remove(k, old)
		}
	}
	s.advanceLocked(final.GetResourceVersion(), false)
	s.mu.Unlock()
	return old, existed
}

// replaceEncoded is ReplaceWith for an encoded store. The snapshot's
// decoded objects are what the changes carry and what the indexes are
// built from; its encodings are what the store keeps.
func (w *Writer[T]) replaceEncoded(snap *Snapshot[T], rv string) []Change[T] {
	s := w.s
	newObjs, newEnc, count := snap.objs, snap.enc, snap.count
	if snap.codec == nil { // a zero Snapshot: encode now
		newEnc = make(map[string]map[string]string, len(newObjs))
		for ns, byName := range newObjs {
			m := make(map[string]string, len(byName))
			for _, obj := range byName {
				e, name := s.codec.encode(obj)
				m[name] = e
			}
			newEnc[ns] = m
		}
	}
	*snap = Snapshot[T]{}
	if newEnc == nil {
		newEnc = make(map[string]map[string]string)
	}

	var deletes []Change[T]
	for ns, byName := range s.enc { // only the writer changes s.enc
		for name, e := range byName {
			obj, ok := newObjs[ns][name]
			uid, erv := meta(e)
			switch {
			case !ok, uid != string(obj.GetUID()):
				deletes = append(deletes, Change[T]{Kind: Deleted, Old: s.codec.decode(ns, e)})
			case erv == obj.GetResourceVersion():
				newEnc[ns][name] = e // unchanged: keep the entry, drop the snapshot's copy
			}
		}
	}
	changes := make([]Change[T], 0, len(deletes)+count)
	changes = append(changes, deletes...)
	for ns, byName := range newObjs {
		for name, obj := range byName {
			e, had := s.enc[ns][name]
			uid, erv := meta(e)
			switch {
			case !had, uid != string(obj.GetUID()):
				changes = append(changes, Change[T]{Kind: Added, New: obj})
			case erv != obj.GetResourceVersion():
				changes = append(changes, Change[T]{Kind: Updated, Old: s.codec.decode(ns, e), New: obj})
			}
		}
	}
	newIndexes := make(map[string]*index[T], len(s.indexes))
	for name, ix := range s.indexes {
		nix := newIndex(ix.fn, len(ix.values))
		for ns, byName := range newObjs {
			for name, obj := range byName {
				nix.add(Key{Namespace: ns, Name: name}, obj)
			}
		}
		newIndexes[name] = nix
	}

	s.mu.Lock()
	s.enc, s.count, s.indexes = newEnc, count, newIndexes
	s.advanceLocked(rv, true)
	s.mu.Unlock()
	return changes
}
