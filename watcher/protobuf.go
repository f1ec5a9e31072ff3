package watcher

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/kloop-dev/kloop/internal/protowalk"
)

// This file is a faster decoding path for the protobuf watch stream of one
// Go type, used by FromResource. Every event of a watch goes through three
// decodes in client-go: the frame into a metav1.WatchEvent (copying the
// object's bytes), those bytes into a runtime.Unknown envelope (copying them
// again), and the envelope's payload into the object. All of it is garbage
// once the object is built, and it is allocated in the same size classes as
// the objects a cache keeps, whose memory it leaves fragmented. The path
// here reads both envelopes in place, without copies, and unmarshals the
// object straight from the frame, optionally leaving out
// metadata.managedFields, which are then never allocated at all.
//
// It is deliberately narrow: anything it does not recognise (another kind,
// such as the Status of an error event, an encoded or nested payload, a
// decode into an existing object, malformed data) goes to the regular
// protobuf serializer, which behaves and fails as it always did.

// protoMagic prefixes every protobuf-encoded Kubernetes object.
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"

// unmarshaler is what the generated protobuf code of Kubernetes types
// provides. Unmarshal merges into the receiver: fields it reads are set,
// repeated fields and maps appended to, and the others left as they are.
// That is what lets a message be decoded in pieces, skipping some fields.
type unmarshaler interface {
	Unmarshal([]byte) error
}

// unmarshalExcept unmarshals msg into u, leaving out the length-delimited
// fields skip says to skip, and handing those to visit (when not nil)
// instead (see protowalk.UnmarshalExcept).
func unmarshalExcept(u unmarshaler, msg []byte, skip func(num uint64) bool, visit func(num uint64, payload []byte) error) error {
	return protowalk.UnmarshalExcept(u, msg, func(num uint64, off, n int) (bool, error) {
		if !skip(num) {
			return false, nil
		}
		if visit != nil {
			return true, visit(num, msg[off:off+n])
		}
		return true, nil
	})
}

// Field numbers of the messages read here (see the protobuf tags of the Go
// types; typedDecoder checks the ones it depends on).
const (
	unknownTypeMeta        = 1 // runtime.Unknown
	unknownRaw             = 2
	unknownContentEncoding = 3
	unknownContentType     = 4
	typeMetaAPIVersion     = 1 // runtime.TypeMeta
	typeMetaKind           = 2
	objectMetadata         = 1  // metadata of every top-level built-in object
	metaName               = 1  // metav1.ObjectMeta.Name
	metaGenerateName       = 2  // metav1.ObjectMeta.GenerateName
	metaNamespace          = 3  // metav1.ObjectMeta.Namespace
	metaUID                = 5  // metav1.ObjectMeta.UID
	metaResourceVersion    = 6  // metav1.ObjectMeta.ResourceVersion
	metaLabels             = 11 // metav1.ObjectMeta.Labels
	metaManagedFields      = 17 // metav1.ObjectMeta.ManagedFields
	watchEventType         = 1  // metav1.WatchEvent
	watchEventObject       = 2
	rawExtensionRaw        = 1 // runtime.RawExtension
	listItems              = 2 // the Items of every built-in list type
)

// envelope reads a protobuf-encoded object's runtime.Unknown envelope in
// place. It reports ok only for a plain envelope (no content encoding or
// type) around a payload of the given apiVersion and kind.
func envelope(data []byte, apiVersion, kind string) (raw []byte, ok bool) {
	if !bytes.HasPrefix(data, protoMagic) {
		return nil, false
	}
	data = data[len(protoMagic):]
	var sawType bool
	for i := 0; i < len(data); {
		num, typ, payload, n, err := protowalk.Field(data[i:])
		if err != nil {
			return nil, false
		}
		i += n
		switch {
		case typ != protowalk.WireBytes:
			return nil, false
		case num == unknownTypeMeta:
			if sawType || !typeMetaIs(payload, apiVersion, kind) {
				return nil, false
			}
			sawType = true
		case num == unknownRaw:
			raw = payload
		case num == unknownContentEncoding, num == unknownContentType:
			if len(payload) > 0 {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return raw, sawType
}

// typeMetaIs reports whether the runtime.TypeMeta message b says apiVersion
// and kind.
func typeMetaIs(b []byte, apiVersion, kind string) bool {
	var v, k []byte
	for i := 0; i < len(b); {
		num, typ, payload, n, err := protowalk.Field(b[i:])
		if err != nil || typ != protowalk.WireBytes {
			return false
		}
		switch num {
		case typeMetaAPIVersion:
			v = payload
		case typeMetaKind:
			k = payload
		}
		i += n
	}
	return string(v) == apiVersion && string(k) == kind
}

// typedDecoder is the protobuf serializer for FromResource's REST client
// with a fast path for objects of type T: an object decoded without a
// target (as the objects of watch events are) whose envelope names T's
// kind is unmarshaled from the bytes in place into a new E, with
// managedFields left out if dropManagedFields. It returns the object
// without type information, as the client's decoder would have.
// Everything else goes to the embedded serializer.
type typedDecoder[T interface {
	*E
	Object
}, E any] struct {
	runtime.Serializer
	apiVersion, kind  string
	gvk               schema.GroupVersionKind
	dropManagedFields bool
	shareLabels       bool

	// The list type, when LIST responses take the fast path too.
	listType                 reflect.Type
	listItems                int // index of the Items field, number 2 in the message
	listGVK                  schema.GroupVersionKind
	listAPIVersion, listKind string

	// Decodes can run concurrently (a new LIST while an old watch's
	// stream is still being read), so the sharing tables have a lock.
	mu        sync.Mutex
	strs      stringTable
	labelSets map[string]map[string]string
	labelKey  []byte // scratch
}

// newTypedDecoder wraps s, the protobuf serializer, for objects of type T
// and kind gvk, and for their list: listGVK, of Go type listType (a
// pointer to a struct with an Items []E field), which may be nil. It
// returns s unchanged if T does not have the layout the fast path relies
// on: a protobuf message with metav1.ObjectMeta embedded as field 1, like
// every top-level built-in object.
func newTypedDecoder[T interface {
	*E
	Object
}, E any](s runtime.Serializer, gvk schema.GroupVersionKind, listGVK schema.GroupVersionKind, listType reflect.Type, opts Scope) runtime.Serializer {
	if _, ok := any(T(nil)).(unmarshaler); !ok {
		return s
	}
	f, ok := reflect.TypeFor[E]().FieldByName("ObjectMeta")
	if !ok || !f.Anonymous || len(f.Index) != 1 || f.Type != reflect.TypeFor[metav1.ObjectMeta]() ||
		!strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") || !metaFieldsAsExpected {
		return s
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	d := &typedDecoder[T, E]{
		Serializer: s, apiVersion: apiVersion, kind: kind, gvk: gvk,
		dropManagedFields: opts.Decoding.DropManagedFields, shareLabels: opts.Decoding.ShareLabels,
	}
	if listType != nil {
		items, err := itemsField[E](listType)
		_, isMessage := reflect.Zero(listType).Interface().(interface {
			unmarshaler
			Reset()
		})
		f := listType.Elem().FieldByIndex(items)
		if err == nil && isMessage && len(items) == 1 && strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,2,rep,") {
			d.listType, d.listItems, d.listGVK = listType, items[0], listGVK
			d.listAPIVersion, d.listKind = listGVK.ToAPIVersionAndKind()
		}
	}
	return d
}

// metaFieldsAsExpected checks the ObjectMeta field numbers this file
// relies on.
var metaFieldsAsExpected = func() bool {
	for name, prefix := range map[string]string{"Namespace": "bytes,3,", "Labels": "bytes,11,", "ManagedFields": "bytes,17,"} {
		f, ok := reflect.TypeFor[metav1.ObjectMeta]().FieldByName(name)
		if !ok || !strings.HasPrefix(f.Tag.Get("protobuf"), prefix) {
			return false
		}
	}
	return true
}()

// Decode implements runtime.Decoder.
func (d *typedDecoder[T, E]) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil {
		if raw, ok := envelope(data, d.apiVersion, d.kind); ok {
			obj := T(new(E))
			if err := d.unmarshal(obj, raw); err == nil {
				return obj, &d.gvk, nil
			}
			// Let the regular path decode it again and report the error its way.
		}
	} else if d.listType != nil && reflect.TypeOf(into) == d.listType {
		if raw, ok := envelope(data, d.listAPIVersion, d.listKind); ok {
			if err := d.unmarshalList(into, raw); err == nil {
				return into, &d.listGVK, nil
			}
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// unmarshalList decodes a LIST response into list, as the stock serializer
// does (resetting it first), but each item the way unmarshal decodes an
// object, into an Items slice of the exact length.
func (d *typedDecoder[T, E]) unmarshalList(list runtime.Object, raw []byte) error {
	l := reflect.ValueOf(list)
	if l.IsNil() {
		return protowalk.ErrMalformed
	}
	msg := list.(interface {
		unmarshaler
		Reset()
	})
	msg.Reset()
	n := 0
	for i := 0; i < len(raw); {
		num, typ, _, k, err := protowalk.Field(raw[i:])
		if err != nil {
			return err
		}
		if num == listItems && typ == protowalk.WireBytes {
			n++
		}
		i += k
	}
	items := make([]E, n)
	l.Elem().Field(d.listItems).Set(reflect.ValueOf(items))
	i := 0
	isItem := func(num uint64) bool { return num == listItems }
	return unmarshalExcept(msg, raw, isItem, func(_ uint64, payload []byte) error {
		i++
		return d.unmarshal(&items[i-1], payload)
	})
}

func (d *typedDecoder[T, E]) unmarshal(obj T, raw []byte) error {
	// E embeds metav1.ObjectMeta (checked by newTypedDecoder), whose
	// GetObjectMeta is promoted to T and returns the embedded struct.
	meta, ok := any(obj).(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return protowalk.ErrMalformed
	}
	isMeta := func(num uint64) bool { return num == objectMetadata }
	return unmarshalExcept(any(obj).(unmarshaler), raw, isMeta, func(_ uint64, payload []byte) error {
		return d.unmarshalMeta(meta, payload)
	})
}

// unmarshalMeta unmarshals an ObjectMeta message into meta, leaving out the
// fields the decoder drops or shares, and setting the shared ones.
func (d *typedDecoder[T, E]) unmarshalMeta(meta *metav1.ObjectMeta, msg []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.labelKey = d.labelKey[:0]
	var ns []byte
	var sawNS bool
	// With sharing, the object's own strings (name, generateName, UID,
	// resourceVersion) are read into one allocation, as an informer keeps
	// them, instead of four that it would copy and drop.
	var own [4][]byte
	var sawOwn [4]bool
	ownIndex := func(num uint64) int {
		switch num {
		case metaName:
			return 0
		case metaGenerateName:
			return 1
		case metaUID:
			return 2
		case metaResourceVersion:
			return 3
		}
		return -1
	}
	skip := func(num uint64) bool {
		switch num {
		case metaManagedFields:
			return d.dropManagedFields
		case metaNamespace:
			return true
		case metaLabels:
			return d.shareLabels
		case metaName, metaGenerateName, metaUID, metaResourceVersion:
			return d.shareLabels
		}
		return false
	}
	err := unmarshalExcept(meta, msg, skip, func(num uint64, payload []byte) error {
		switch num {
		case metaName, metaGenerateName, metaUID, metaResourceVersion:
			i := ownIndex(num)
			own[i], sawOwn[i] = payload, true
		case metaNamespace:
			ns, sawNS = payload, true
		case metaLabels:
			// The key of a label set is its entries as encoded; the
			// API server encodes map entries in key order, so equal sets
			// have equal keys.
			d.labelKey = protowire(d.labelKey, num, payload)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if sawNS {
		meta.Namespace = d.strs.get(ns)
	}
	if sawOwn != [4]bool{} {
		buf := make([]byte, 0, len(own[0])+len(own[1])+len(own[2])+len(own[3]))
		var str [4]string
		for i, b := range own {
			if len(b) > 0 {
				at := len(buf)
				buf = append(buf, b...)
				// buf never grows past its capacity and is not written
				// again, so the string can share its bytes.
				str[i] = unsafe.String(&buf[at], len(b))
			}
		}
		if sawOwn[0] {
			meta.Name = str[0]
		}
		if sawOwn[1] {
			meta.GenerateName = str[1]
		}
		if sawOwn[2] {
			meta.UID = types.UID(str[2])
		}
		if sawOwn[3] {
			meta.ResourceVersion = str[3]
		}
	}
	if len(d.labelKey) > 0 {
		labels, err := d.labels(d.labelKey)
		if err != nil {
			return err
		}
		meta.Labels = labels
	}
	return nil
}

// labels returns the shared label set encoded by fields (a run of labels
// fields of an ObjectMeta message), decoding it on first sight.
func (d *typedDecoder[T, E]) labels(fields []byte) (map[string]string, error) {
	if l, ok := d.labelSets[string(fields)]; ok {
		return l, nil
	}
	var m metav1.ObjectMeta
	if err := m.Unmarshal(fields); err != nil {
		return nil, err
	}
	shared := make(map[string]string, len(m.Labels))
	for k, v := range m.Labels {
		shared[d.strs.get([]byte(k))] = d.strs.get([]byte(v))
	}
	if d.labelSets == nil || len(d.labelSets) >= maxSharedLabelSets {
		d.labelSets = make(map[string]map[string]string)
	}
	d.labelSets[string(fields)] = shared
	return shared, nil
}

// protowire appends a length-delimited field to b.
func protowire(b []byte, num uint64, payload []byte) []byte {
	b = binary.AppendUvarint(b, num<<3|protowalk.WireBytes)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// Bounds of the decoder's sharing tables; a full table starts afresh, so
// values no object uses any more are not kept for ever.
const (
	maxSharedLabelSets = 1 << 12
	maxSharedStrings   = 1 << 12
)

// stringTable hands out one string per distinct value, for strings that
// repeat across objects (a namespace). Strings are immutable, so sharing
// them is invisible to the objects' owners.
type stringTable struct {
	m map[string]string
}

func (t *stringTable) get(b []byte) string {
	if s, ok := t.m[string(b)]; ok {
		return s
	}
	if len(b) == 0 {
		return ""
	}
	if t.m == nil || len(t.m) >= maxSharedStrings {
		t.m = make(map[string]string)
	}
	s := string(b)
	t.m[s] = s
	return s
}

// watchEventDecoder is the protobuf stream serializer for FromResource's
// REST client with a fast path for the frames of a watch: decoding into a
// *metav1.WatchEvent, it points the event's Object.Raw into the frame
// instead of copying it. That is safe because client-go's watch decoder
// decodes Object.Raw into an object (which copies what it keeps) before it
// reads the next frame into the same buffer, and drops the WatchEvent then.
// Everything else goes to the embedded serializer.
type watchEventDecoder struct {
	runtime.Serializer
}

// eventTypes are the watch event types as constants, so that decoding one
// allocates nothing.
var eventTypes = []string{string(apiwatch.Added), string(apiwatch.Modified), string(apiwatch.Deleted), string(apiwatch.Bookmark), string(apiwatch.Error)}

var watchEventGVK = metav1.SchemeGroupVersion.WithKind("WatchEvent")

// Decode implements runtime.Decoder.
func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok && ev != nil {
		if t, raw, ok := readWatchEvent(data); ok {
			*ev = metav1.WatchEvent{Type: t, Object: runtime.RawExtension{Raw: raw}}
			return ev, &watchEventGVK, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// readWatchEvent reads a metav1.WatchEvent message in place.
func readWatchEvent(b []byte) (typ string, raw []byte, ok bool) {
	var sawType, sawObject bool
	for i := 0; i < len(b); {
		num, wt, payload, n, err := protowalk.Field(b[i:])
		if err != nil || wt != protowalk.WireBytes {
			return "", nil, false
		}
		i += n
		switch num {
		case watchEventType:
			typ, sawType = "", false
			for _, t := range eventTypes {
				if string(payload) == t {
					typ, sawType = t, true
				}
			}
			if !sawType {
				return "", nil, false // unknown: let client-go report it
			}
		case watchEventObject:
			r, ok := readRawExtension(payload)
			if !ok {
				return "", nil, false
			}
			raw, sawObject = r, true
		default:
			return "", nil, false
		}
	}
	return typ, raw, sawType && sawObject
}

// readRawExtension reads a runtime.RawExtension message in place.
func readRawExtension(b []byte) (raw []byte, ok bool) {
	for i := 0; i < len(b); {
		num, wt, payload, n, err := protowalk.Field(b[i:])
		if err != nil || wt != protowalk.WireBytes || num != rawExtensionRaw {
			return nil, false
		}
		raw = payload
		i += n
	}
	return raw, true
}
