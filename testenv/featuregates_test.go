package testenv

import "testing"

func TestFeatureGatesFlag_DefaultsOnAndOverridable(t *testing.T) {
	for _, tc := range []struct {
		gates map[string]bool
		want  string
	}{
		{nil, "--feature-gates=ShardedListAndWatch=true"},
		{map[string]bool{"ShardedListAndWatch": false}, "--feature-gates=ShardedListAndWatch=false"},
		{map[string]bool{"Zeta": true, "Alpha": false}, "--feature-gates=Alpha=false,ShardedListAndWatch=true,Zeta=true"},
	} {
		if got := featureGatesFlag(tc.gates); got != tc.want {
			t.Errorf("featureGatesFlag(%v) = %q, want %q", tc.gates, got, tc.want)
		}
	}
}
