package protowalk

import (
	"errors"
	"reflect"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Leaving fields out and decoding them on the side ends where a full
// Unmarshal does.
func TestUnmarshalExcept_EndsAsAFullUnmarshalButForTheFieldsTaken(t *testing.T) {
	want := metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"x": "1", "y": "2"}, Finalizers: []string{"f"}}
	msg, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got metav1.ObjectMeta
	var taken []string
	err = UnmarshalExcept(&got, msg, func(num uint64, off, n int) (bool, error) {
		if num != 3 { // namespace
			return false, nil
		}
		got.Namespace = string(msg[off : off+n])
		taken = append(taken, got.Namespace)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || len(taken) != 1 {
		t.Fatalf("got %+v (taken %q), want %+v", got, taken, want)
	}

	stop := errors.New("stop")
	if err := UnmarshalExcept(&got, msg, func(uint64, int, int) (bool, error) { return false, stop }); !errors.Is(err, stop) {
		t.Fatalf("take's error: got %v", err)
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 'a'}, {0x80}, {0x0b}} { // short payload, cut tag, group
		if err := UnmarshalExcept(&got, bad, func(uint64, int, int) (bool, error) { return true, nil }); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: got %v, want ErrMalformed", bad, err)
		}
	}
}
