package informer

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSizeClass_RoundsUpAsTheAllocatorDoes(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 0}, {1, 8}, {8, 8}, {9, 16}, {33, 48}, {264, 288}, {513, 576}, {32768, 32768}, {40000, 40960}} {
		if got := sizeClass(tc.n); got != tc.want {
			t.Errorf("sizeClass(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if got := mapSize(1, 32); got != 336 {
		t.Errorf("a map[string]string of one entry: %d B, want 336 (header 48, one group of 8 slots 288)", got)
	}
}

// sizedCM is a ConfigMap whose heap is known: the struct (288 B), a Data map
// of one entry (336 B), its 512-byte value, its 8-byte key and 8-byte name;
// the labels map is shared when labels is (its strings are constants).
func sizedCM(i int, labels map[string]string) *corev1.ConfigMap {
	if labels == nil {
		labels = map[string]string{"app": "x"}
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(100000 + i)[1:], Labels: labels},
		Data:       map[string]string{"payload" + strconv.Itoa(i%1): strings.Repeat(strconv.Itoa(i%10), 512)},
	}
}

func TestSizer_CountsEachObjectsHeapAndWhatObjectsShareOnce(t *testing.T) {
	shared := map[string]string{"app": "x"}
	var own, share sizer
	var live []*corev1.ConfigMap // as a cache's are: no address is reused
	for i := range 4096 {
		a, b := sizedCM(i, nil), sizedCM(i, shared)
		own.observe(a)
		share.observe(b)
		live = append(live, a, b)
	}
	// struct 288 + Data map 336 + value 512 + key 8 + name 8 + slot 8 + tag 1.
	const base = 288 + 336 + 512 + 8 + 8 + 8 + 1
	if got := share.bytes(1); got < base-16 || got > base+16 {
		t.Errorf("shared labels: %d B an object, want about %d", got, base)
	}
	// An own labels map of one entry adds its 336 B.
	if got, want := own.bytes(1), int64(base+336); got < want-16 || got > want+16 {
		t.Errorf("own labels: %d B an object, want about %d", got, want)
	}
	if got := share.bytes(1000); got != 1000*share.bytes(1) {
		t.Errorf("bytes(1000) = %d, want 1000 × bytes(1)", got)
	}
	runtime.KeepAlive(live)
}

func TestSizer_CountsAnEncodedCachesEncodings(t *testing.T) {
	s := newSizer(true)
	obj := sizedCM(1, nil)
	for range sizeEvery {
		s.observe(obj)
	}
	if got, want := s.bytes(1), int64(sizeClass(obj.Size()+8)+16+1); got != want {
		t.Errorf("%d B an object, want %d (the encoding's allocation, its header in the table, the tag)", got, want)
	}
}
