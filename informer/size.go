package informer

import (
	"reflect"
	"sync/atomic"
	"unsafe"
)

// sizer estimates the bytes an informer's cache holds: the objects' own
// heap (each allocation rounded up to the allocator's size class) plus the
// store's slot for each, times the number of objects, from a sample of the
// objects the informer stores (one in sizeEvery). Memory shared between
// objects (interned strings, label sets and owner lists) is counted once,
// when the sampler first sees it, so the estimate follows the sharing an
// informer does. For an encoded cache an object's bytes are those of its
// encoding.
//
// It is an estimate for dashboards and budgets, not an accounting: objects
// that differ much in size from the sample, the memory shared with objects
// outside the cache, and the address of a collected object taken again
// by a new one before seen starts afresh make it drift. The benchmark checks it against
// the measured heap (bench/cmd/informer).
type sizer struct {
	encoded bool
	n       uint64 // objects seen; only the sampling goroutine touches it
	// seen holds the addresses of the strings, maps, slices and pointed-to
	// values of sampled objects, to count what they share once, by the
	// low 32 bits of each address (seenKey): about half the memory of a
	// map of uintptrs, for the chance that two of its few thousand
	// addresses lie a multiple of 4 GiB apart (then the second is not
	// counted). Bounded: full, it starts afresh.
	seen map[uint32]struct{}
	// sum and count of sampled sizes, for the mean; halved together when
	// count reaches sizeWindow, so the mean follows a changing population.
	sum, count float64
	mean       atomic.Uint64 // bytes per object, rounded
}

const (
	sizeEvery  = 16
	sizeWindow = 4096
	sizeSeen   = 1 << 12
)

func newSizer(encoded bool) *sizer { return &sizer{encoded: encoded} }

// observe samples obj, an object about to be stored. It runs on the
// reflector's goroutine (in prepare), one object at a time.
func (s *sizer) observe(obj any) {
	s.n++
	if s.n%sizeEvery != 1 {
		return
	}
	var b int
	if s.encoded {
		b = encodedSize(obj)
	} else {
		if s.seen == nil || len(s.seen) >= sizeSeen {
			s.seen = make(map[uint32]struct{}, 256)
		}
		v := reflect.ValueOf(obj)
		b = s.value(v)
		b += 8 // the table's slot: a pointer
	}
	b++ // the table's tag byte
	if s.count >= sizeWindow {
		s.sum, s.count = s.sum/2, s.count/2
	}
	s.sum += float64(b)
	s.count++
	s.mean.Store(uint64(s.sum/s.count + 0.5))
}

// bytes is the estimate for a cache of n objects.
func (s *sizer) bytes(n int) int64 { return int64(s.mean.Load()) * int64(n) }

// encodedSize is what an encoded cache keeps of obj: its protobuf
// encoding in a string of its own, and the string's header in the table.
func encodedSize(obj any) int {
	m, ok := obj.(interface{ Size() int })
	if !ok {
		return 0
	}
	return sizeClass(m.Size()+8) + 16
}

// first reports whether p has not been counted yet, and marks it.
func (s *sizer) first(p unsafe.Pointer) bool {
	if p == nil {
		return false
	}
	k := seenKey(p)
	if _, ok := s.seen[k]; ok {
		return false
	}
	s.seen[k] = struct{}{}
	return true
}

// seenKey is p as seen keeps it: the low 32 bits of its address.
func seenKey(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

// value is the heap v holds outside itself: what its pointers, strings,
// slices and maps point to and was not counted before.
func (s *sizer) value(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || !s.first(v.UnsafePointer()) {
			return 0
		}
		e := v.Elem()
		return sizeClass(int(e.Type().Size())) + s.value(e)
	case reflect.String:
		if v.Len() == 0 || !s.first(unsafe.Pointer(unsafe.StringData(v.String()))) {
			return 0
		}
		return sizeClass(v.Len())
	case reflect.Slice:
		if v.Cap() == 0 || !s.first(v.UnsafePointer()) {
			return 0
		}
		b := sizeClass(v.Cap() * int(v.Type().Elem().Size()))
		if hasPointers(v.Type().Elem()) {
			for i := range v.Len() {
				b += s.value(v.Index(i))
			}
		}
		return b
	case reflect.Map:
		if v.Len() == 0 || !s.first(v.UnsafePointer()) {
			return 0
		}
		t := v.Type()
		b := mapSize(v.Len(), int(t.Key().Size()+t.Elem().Size()))
		kp, ep := hasPointers(t.Key()), hasPointers(t.Elem())
		if kp || ep {
			for it := v.MapRange(); it.Next(); {
				if kp {
					b += s.value(it.Key())
				}
				if ep {
					b += s.value(it.Value())
				}
			}
		}
		return b
	case reflect.Struct:
		b := 0
		for i := range v.NumField() {
			if hasPointers(v.Type().Field(i).Type) {
				b += s.value(v.Field(i))
			}
		}
		return b
	case reflect.Array:
		b := 0
		if hasPointers(v.Type().Elem()) {
			for i := range v.Len() {
				b += s.value(v.Index(i))
			}
		}
		return b
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return s.value(v.Elem())
	}
	return 0
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return true
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	}
	return false
}

// mapSize is the heap of a Go map of n entries of slot bytes (key and
// value): its header and groups of 8 slots with 8 control bytes, at most
// 7/8 full.
func mapSize(n, slot int) int {
	const header = 48
	if n <= 8 {
		return header + sizeClass(8+8*slot)
	}
	capacity := 8
	for capacity*7/8 < n {
		capacity *= 2
	}
	groups := capacity / 8
	tables := max(1, capacity/1024)
	return header + tables*(48+8) + sizeClass(groups*(8+8*slot)/tables)*tables
}

// sizeClasses are the Go allocator's small size classes.
var sizeClasses = [...]int{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528,
	6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072,
	20480, 21760, 24576, 27264, 28672, 32768,
}

// sizeClass is the bytes an allocation of n bytes takes.
func sizeClass(n int) int {
	if n <= 0 {
		return 0
	}
	if n > 32768 {
		return (n + 8191) &^ 8191 // whole pages
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if sizeClasses[mid] < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return sizeClasses[lo]
}
