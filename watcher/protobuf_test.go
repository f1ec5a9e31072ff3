package watcher

import (
	"bytes"
	"reflect"
	"testing"
	"time"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

var (
	cmGVK     = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	cmListGVK = corev1.SchemeGroupVersion.WithKind("ConfigMapList")
)

// fullConfigMap sets every metadata field the fast path treats specially,
// and some it does not, in one object.
func fullConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "web", UID: "6a2c5f1e-0000-4000-8000-000000000001", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
			Labels:            map[string]string{"app": "web", "tier": "front"},
			Annotations:       map[string]string{"note": name},
			Finalizers:        []string{"example.com/f"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "u1", Controller: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)},
			}},
		},
		Data:       map[string]string{"a": "1", "b": "2"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2}},
		Immutable:  ptr.To(true),
	}
}

func encodeProto(t testing.TB, obj runtime.Object, gvk schema.GroupVersionKind) []byte {
	t.Helper()
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var b bytes.Buffer
	if err := protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stockDecoder is what FromResource's client decodes objects with without
// the fast path.
func stockDecoder() runtime.Decoder {
	return runtime.WithoutVersionDecoder{Decoder: protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme)}
}

func TestTypedDecoder_DecodesAsTheStockSerializerDoes(t *testing.T) {
	data := encodeProto(t, fullConfigMap("a"), cmGVK)
	want, _, err := stockDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := runtime.WithoutVersionDecoder{Decoder: newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), Scope{})}
	if _, ok := dec.Decoder.(*typedDecoder[*corev1.ConfigMap, corev1.ConfigMap]); !ok {
		t.Fatalf("newTypedDecoder returned %T, want the fast path", dec.Decoder)
	}
	got, gvk, err := dec.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fast path decoded\n%#v\nwant\n%#v", got, want)
	}
	if *gvk != cmGVK {
		t.Errorf("gvk %v, want %v", gvk, cmGVK)
	}

	// Another top-level type of another group.
	dep := &appsv1.Deployment{ObjectMeta: fullConfigMap("d").ObjectMeta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
	depGVK := appsv1.SchemeGroupVersion.WithKind("Deployment")
	data = encodeProto(t, dep, depGVK)
	wantDep, _, err := stockDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotDep, _, err := newTypedDecoder[*appsv1.Deployment](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), depGVK, schema.GroupVersionKind{}, nil, Scope{}).Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotDep.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	if !reflect.DeepEqual(gotDep, wantDep) {
		t.Errorf("fast path decoded\n%#v\nwant\n%#v", gotDep, wantDep)
	}
}

func TestTypedDecoder_DropsManagedFieldsAndSharesLabelsWhenAsked(t *testing.T) {
	dec := newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), Scope{Decoding: Decoding{DropManagedFields: true, ShareLabels: true}})
	var objs []*corev1.ConfigMap
	for _, name := range []string{"a", "b"} {
		obj, _, err := dec.Decode(encodeProto(t, fullConfigMap(name), cmGVK), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj.(*corev1.ConfigMap))
	}
	for i, name := range []string{"a", "b"} {
		want := fullConfigMap(name)
		want.ManagedFields = nil
		if !reflect.DeepEqual(objs[i], want) {
			t.Errorf("decoded\n%#v\nwant\n%#v", objs[i], want)
		}
	}
	if reflect.ValueOf(objs[0].Labels).UnsafePointer() != reflect.ValueOf(objs[1].Labels).UnsafePointer() {
		t.Error("two objects with the same labels got two maps, want one shared map")
	}
	if reflect.ValueOf(objs[0].Data).UnsafePointer() == reflect.ValueOf(objs[1].Data).UnsafePointer() {
		t.Error("two objects share their Data map, want only labels shared")
	}

	// Different labels get their own map; no labels stay nil.
	other := fullConfigMap("c")
	other.Labels = map[string]string{"app": "api"}
	none := fullConfigMap("d")
	none.Labels = nil
	for _, want := range []*corev1.ConfigMap{other, none} {
		got, _, err := dec.Decode(encodeProto(t, want, cmGVK), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l := got.(*corev1.ConfigMap).Labels; !reflect.DeepEqual(l, want.Labels) {
			t.Errorf("labels %v, want %v", l, want.Labels)
		}
	}

	// Without the options, each object has its own labels and its managedFields.
	dec = newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), Scope{})
	a, _, _ := dec.Decode(encodeProto(t, fullConfigMap("a"), cmGVK), nil, nil)
	b, _, _ := dec.Decode(encodeProto(t, fullConfigMap("b"), cmGVK), nil, nil)
	if reflect.ValueOf(a.(*corev1.ConfigMap).Labels).UnsafePointer() == reflect.ValueOf(b.(*corev1.ConfigMap).Labels).UnsafePointer() {
		t.Error("labels shared without Decoding.ShareLabels")
	}
	if len(a.(*corev1.ConfigMap).ManagedFields) != 1 {
		t.Errorf("managedFields %v, want kept", a.(*corev1.ConfigMap).ManagedFields)
	}
}

func TestTypedDecoder_LeavesEverythingElseToTheStockSerializer(t *testing.T) {
	dec := newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), Scope{Decoding: Decoding{DropManagedFields: true, ShareLabels: true}})

	// Another kind, as in the Error event of a watch.
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	got, _, err := dec.Decode(encodeProto(t, status, metav1.SchemeGroupVersion.WithKind("Status")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := got.(*metav1.Status); !ok || s.Code != 410 {
		t.Errorf("decoded %#v, want the Status", got)
	}

	// A decode into an object keeps the stock behaviour, managedFields included.
	into := &corev1.ConfigMap{}
	if _, _, err := dec.Decode(encodeProto(t, fullConfigMap("a"), cmGVK), nil, into); err != nil {
		t.Fatal(err)
	}
	if into.Name != "a" || len(into.ManagedFields) != 1 {
		t.Errorf("decoded into %#v, want the whole object", into)
	}

	// Malformed data fails as the stock serializer fails.
	data := encodeProto(t, fullConfigMap("a"), cmGVK)
	for _, bad := range [][]byte{data[:len(data)-3], append(bytes.Clone(data[:len(data)-1]), 0xff), []byte("k8s\x00\xff"), []byte("{}")} {
		_, _, wantErr := stockDecoder().Decode(bad, nil, nil)
		_, _, gotErr := dec.Decode(bad, nil, nil)
		if wantErr == nil || gotErr == nil || gotErr.Error() != wantErr.Error() {
			t.Errorf("decoding %q: error %v, want %v", bad, gotErr, wantErr)
		}
	}
}

func TestTypedDecoder_DecodesListsAsTheStockSerializerDoes(t *testing.T) {
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next"}}
	for _, name := range []string{"a", "b", "c"} {
		list.Items = append(list.Items, *fullConfigMap(name))
	}
	data := encodeProto(t, list, cmListGVK)
	want := &corev1.ConfigMapList{}
	if _, _, err := stockDecoder().Decode(data, nil, want); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Scope{{}, {Decoding: Decoding{DropManagedFields: true, ShareLabels: true}}} {
		dec := runtime.WithoutVersionDecoder{Decoder: newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), opts)}
		// Decoding resets what the list held.
		got := &corev1.ConfigMapList{Items: []corev1.ConfigMap{*fullConfigMap("old")}, ListMeta: metav1.ListMeta{RemainingItemCount: ptr.To[int64](9)}}
		if _, _, err := dec.Decode(data, nil, got); err != nil {
			t.Fatal(err)
		}
		w := want.DeepCopy()
		if opts.Decoding.DropManagedFields {
			for i := range w.Items {
				w.Items[i].ManagedFields = nil
			}
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%+v: decoded\n%#v\nwant\n%#v", opts, got, w)
		}
		if len(got.Items) != cap(got.Items) {
			t.Errorf("%+v: Items has length %d and capacity %d, want them equal", opts, len(got.Items), cap(got.Items))
		}
		if shared := reflect.ValueOf(got.Items[0].Labels).UnsafePointer() == reflect.ValueOf(got.Items[2].Labels).UnsafePointer(); shared != opts.Decoding.ShareLabels {
			t.Errorf("%+v: labels shared=%v", opts, shared)
		}
	}
}

func TestNewTypedDecoder_KeepsTheStockSerializerForOtherLayouts(t *testing.T) {
	s := protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme)
	// No generated protobuf code.
	if got := newTypedDecoder[*unstructured.Unstructured](s, cmGVK, cmListGVK, nil, Scope{}); got != runtime.Serializer(s) {
		t.Errorf("newTypedDecoder for unstructured = %T, want the stock serializer", got)
	}
}

func TestWatchEventDecoder_ReadsTheEventInPlace(t *testing.T) {
	raw := encodeProto(t, fullConfigMap("a"), cmGVK)
	stream := protobuf.NewRawSerializer(kscheme.Scheme, kscheme.Scheme)
	for _, typ := range []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"} {
		ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
		var b bytes.Buffer
		if err := stream.Encode(ev, &b); err != nil {
			t.Fatal(err)
		}
		frame := b.Bytes()
		var want, got metav1.WatchEvent
		if _, _, err := stream.Decode(frame, nil, &want); err != nil {
			t.Fatal(err)
		}
		if _, _, err := (watchEventDecoder{stream}).Decode(frame, nil, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded %+v, want %+v", got, want)
		}
		if len(got.Object.Raw) > 0 && &got.Object.Raw[0] != &frame[len(frame)-len(raw)] {
			t.Error("Object.Raw was copied, want it to point into the frame")
		}
	}

	// An unknown type goes to the stock path, which lets client-go report it.
	var b bytes.Buffer
	if err := stream.Encode(&metav1.WatchEvent{Type: "SURPRISE", Object: runtime.RawExtension{Raw: raw}}, &b); err != nil {
		t.Fatal(err)
	}
	var got metav1.WatchEvent
	if _, _, err := (watchEventDecoder{stream}).Decode(b.Bytes(), nil, &got); err != nil || got.Type != "SURPRISE" {
		t.Errorf("decoded %+v, %v; want the stock decode of the event", got, err)
	}
}

// BenchmarkDecodeObject compares the stock protobuf decode of a watched
// object with the fast path, as an informer sets it up.
func BenchmarkDecodeObject(b *testing.B) {
	data := encodeProto(b, fullConfigMap("a"), cmGVK)
	for _, c := range []struct {
		name string
		dec  runtime.Decoder
	}{
		{"stock", stockDecoder()},
		{"fast", runtime.WithoutVersionDecoder{Decoder: newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, nil, Scope{Decoding: Decoding{DropManagedFields: true, ShareLabels: true}})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.dec.Decode(data, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The fast path must decode any input exactly as the stock serializer does:
// the same object where the stock serializer succeeds (also with
// managedFields dropped and labels shared, but for those two fields), an
// error where it fails — except that with managedFields dropped, malformed
// bytes inside managedFields go unnoticed, as they are never decoded. The
// corpus starts from well-formed objects; the fuzzer cuts and mutates them.
func FuzzTypedDecoder_MatchesTheStockSerializer(f *testing.F) {
	f.Add(encodeProto(f, fullConfigMap("a"), cmGVK))
	f.Add(encodeProto(f, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, cmGVK))
	full := fullConfigMap("b")
	full.Labels = nil
	full.Namespace = ""
	f.Add(encodeProto(f, full, cmGVK))
	f.Add(encodeProto(f, &corev1.Pod{ObjectMeta: fullConfigMap("p").ObjectMeta}, corev1.SchemeGroupVersion.WithKind("Pod")))
	f.Add([]byte("k8s\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, _, wantErr := stockDecoder().Decode(data, nil, nil)
		for _, opts := range []Scope{{}, {Decoding: Decoding{DropManagedFields: true, ShareLabels: true}}} {
			dec := newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), opts)
			got, _, err := runtime.WithoutVersionDecoder{Decoder: dec}.Decode(data, nil, nil)
			if wantErr != nil && err == nil && opts.Decoding.DropManagedFields {
				continue // possibly a fault inside the managedFields it skipped
			}
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("options %+v: error %v, the stock serializer's %v", opts, err, wantErr)
			}
			if err != nil {
				continue
			}
			if cm, ok := want.(*corev1.ConfigMap); ok && opts.Decoding.DropManagedFields {
				w := cm.DeepCopy()
				w.ManagedFields = nil
				g := got.(*corev1.ConfigMap).DeepCopy()
				if len(w.Labels) == 0 && len(g.Labels) == 0 {
					w.Labels, g.Labels = nil, nil // an empty label set may come back nil when shared
				}
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("options %+v: fast path decoded\n%#v\nwant\n%#v", opts, g, w)
				}
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("options %+v: fast path decoded\n%#v\nwant\n%#v", opts, got, want)
			}
		}
	})
}

func TestTypedDecoder_PacksTheObjectsOwnStringsIntoOneAllocationWhenSharing(t *testing.T) {
	in := fullConfigMap("a")
	in.GenerateName = "gen-"
	for _, share := range []bool{true, false} {
		dec := newTypedDecoder[*corev1.ConfigMap](protobuf.NewSerializer(kscheme.Scheme, kscheme.Scheme), cmGVK, cmListGVK, reflect.TypeFor[*corev1.ConfigMapList](), Scope{Decoding: Decoding{ShareLabels: share}})
		obj, _, err := dec.Decode(encodeProto(t, in, cmGVK), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*corev1.ConfigMap)
		if got.Name != in.Name || got.GenerateName != in.GenerateName || got.UID != in.UID || got.ResourceVersion != in.ResourceVersion {
			t.Fatalf("share=%v: name %q generateName %q uid %q rv %q, want %q %q %q %q", share,
				got.Name, got.GenerateName, got.UID, got.ResourceVersion, in.Name, in.GenerateName, in.UID, in.ResourceVersion)
		}
		contiguous := true
		next := uintptr(0)
		for _, s := range []string{got.Name, got.GenerateName, string(got.UID), got.ResourceVersion} {
			p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
			if next != 0 && p != next {
				contiguous = false
			}
			next = p + uintptr(len(s))
		}
		if contiguous != share {
			t.Errorf("share=%v: name, generateName, UID and resourceVersion in one allocation: %v", share, contiguous)
		}
	}
}
