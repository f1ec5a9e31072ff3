package podsim

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExitCode_ReadsTheAnnotationAndNamesABadOne(t *testing.T) {
	pod := func(v *string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		if v != nil {
			p.Annotations = map[string]string{ExitCodeAnnotation: *v}
		}
		return p
	}
	for _, tc := range []struct {
		value   *string
		want    int32
		wantErr bool
	}{
		{nil, 0, false},
		{new("0"), 0, false},
		{new("1"), 1, false},
		{new("255"), 255, false},
		{new("256"), 0, true},
		{new("-1"), 0, true},
		{new("fail"), 0, true},
	} {
		got, err := exitCode(pod(tc.value))
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), ExitCodeAnnotation) || !strings.Contains(err.Error(), "ns/p") {
				t.Errorf("exitCode(%q) = %d, %v; want an error naming the annotation and the pod", *tc.value, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("exitCode(%v) = %d, %v; want %d", tc.value, got, err, tc.want)
		}
	}
}
