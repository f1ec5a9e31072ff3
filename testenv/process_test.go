package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// An early exit is told apart by its log: a port taken between being
// picked and being bound (which Start answers by starting again on other
// ports) from every other failure (which it reports).
func TestProcess_ExitErrorTellsATakenPortApart(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		taken     bool
	}{
		{"kube-apiserver", `E1207 16:45:23.363073   17852 run.go:72] "command failed" err="failed to create listener: failed to listen on 127.0.0.1:35489: listen tcp 127.0.0.1:35489: bind: address already in use"` + "\n", true},
		{"etcd", `{"level":"fatal","msg":"listener failed","error":"listen tcp 127.0.0.1:2379: bind: address already in use"}` + "\n", true},
		{"etcd", `{"level":"panic","msg":"failed to create WAL","error":"no space left on device"}` + "\n", false},
	} {
		path := filepath.Join(t.TempDir(), tc.name+".log")
		if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &process{name: tc.name, logPath: path, err: errors.New("exit status 1")}
		err := p.exitError()
		if got := errors.Is(err, errPortTaken); got != tc.taken {
			t.Errorf("%s with log %q: errors.Is(err, errPortTaken) = %v, want %v (err: %v)", tc.name, tc.log, got, tc.taken, err)
		}
	}
}
