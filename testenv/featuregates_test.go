package testenv

import (
	"strings"
	"testing"
)

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

func TestControllersFlag_ExtrasComeBeforeTheDefaults(t *testing.T) {
	if got, want := controllersFlag(nil), "--controllers="+strings.Join(DefaultControllers, ","); got != want {
		t.Errorf("controllersFlag(nil) = %q, want %q", got, want)
	}
	// First: kube-controller-manager obeys the first entry naming a
	// controller, so -deployment-controller must precede the default.
	got := controllersFlag([]string{"job-controller", "-deployment-controller"})
	want := "--controllers=job-controller,-deployment-controller," + strings.Join(DefaultControllers, ",")
	if got != want {
		t.Errorf("controllersFlag = %q, want %q", got, want)
	}
}
