package httpaddr

import (
	"testing"

	"github.com/kloop-dev/kloop/cli"
)

func TestOne(t *testing.T) {
	for _, tc := range []struct {
		metrics, health, want string
		usage                 bool
	}{
		{"", "", "", false},
		{":8080", "", ":8080", false},
		{"", ":8081", ":8081", false},
		{":8080", ":8080", ":8080", false},
		{":8080", ":8081", "", true},
	} {
		got, err := One(tc.metrics, tc.health)
		if got != tc.want || (err != nil) != tc.usage || (err != nil && !cli.IsUsage(err)) {
			t.Errorf("One(%q, %q) = %q, %v; want %q, usage error %v", tc.metrics, tc.health, got, err, tc.want, tc.usage)
		}
	}
}
