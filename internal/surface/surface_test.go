package surface

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// limit is the most exported functions, methods and types the library
// packages may have. Lower it when the surface shrinks; never raise it to
// make room: absorb a new name into an existing concept instead.
//
// 455 since the fleet became a package of its own (#40): its 17 names
// replace the root's 9 (Fleet, ClusterKey and its String,
// NewFleetController, FleetControllerBuilder and its For and Owns,
// App.Cluster, Handle.In), and the root offers it typed hooks where it
// reached into internals: App.AddGatherer, App.Config, ShardOf,
// KeyedControllerBuilder.Sharded, Unavailable, controller.Map and
// debug.ClusterStatus; and client.ApplyConfigurationFromUnstructured
// (#38), the one way to apply a kind known only at run time.
const limit = 455

func TestLibrary_ExportsAtMostTheLimit(t *testing.T) {
	pkgs, err := Count("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no library packages found from the repository's root")
	}
	var funcs, methods, types int
	for _, p := range pkgs {
		t.Logf("%-20s %4d  (funcs %3d, methods %3d, types %3d)", p.Path, p.Total(), len(p.Funcs), len(p.Methods), len(p.Types))
		funcs += len(p.Funcs)
		methods += len(p.Methods)
		types += len(p.Types)
	}
	total := funcs + methods + types
	t.Logf("%-20s %4d  (funcs %3d, methods %3d, types %3d)", "total", total, funcs, methods, types)
	if total > limit {
		t.Errorf("the library packages export %d functions, methods and types, want at most %d: "+
			"unexport what only kloop uses, or fold the new name into an existing one", total, limit)
	}
}

func TestCount_ExportedFuncsMethodsAndTypesOfLibraryPackagesOnly(t *testing.T) {
	pkgs, err := Count("testdata/mod")
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{
		{Path: ".", Funcs: []string{"Root"}},
		{
			Path:    "lib",
			Funcs:   []string{"Exported"},
			Methods: []string{"G.Get", "T.M"},
			Types:   []string{"A", "B", "G", "T"},
		},
	}
	if !slices.EqualFunc(pkgs, want, func(a, b Package) bool {
		return a.Path == b.Path && slices.Equal(a.Funcs, b.Funcs) &&
			slices.Equal(a.Methods, b.Methods) && slices.Equal(a.Types, b.Types)
	}) {
		t.Errorf("Count(testdata/mod) = %+v, want %+v", pkgs, want)
	}
	if got := want[1].Total(); got != 7 {
		t.Errorf("Total() = %d, want 7", got)
	}
}
