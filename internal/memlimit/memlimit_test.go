package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root writes files (path → content, relative to the root) into a new
// directory standing for the file system's root: only the location of the
// cgroup files is faked, they are read as on a real machine.
func root(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func noEnv(string) string { return "" }

const mi = 1 << 20

func TestDecide(t *testing.T) {
	v2 := map[string]string{
		"proc/self/cgroup":                           "0::/kubepods/pod1/ctr\n",
		"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "536870912\n",
	}
	cases := []struct {
		name     string
		explicit int64
		env      string
		files    map[string]string
		limit    int64
		whyHas   string
	}{
		{"cgroup v2", 0, "", v2, 512 * mi * 9 / 10, "90% of the container's memory limit of 536870912 bytes (/sys/fs/cgroup/kubepods/pod1/ctr/memory.max)"},
		{"a lower limit on an ancestor", 0, "", map[string]string{
			"proc/self/cgroup":                           "0::/kubepods/pod1/ctr\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":     "209715200\n",
			"sys/fs/cgroup/kubepods/memory.max":          "max\n",
		}, 200 * mi * 9 / 10, "limit of 209715200 bytes"},
		{"cgroup v1 (hybrid: the memory controller on v1)", 0, "", map[string]string{
			"proc/self/cgroup": "12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
		}, 1024 * mi * 9 / 10, "memory.limit_in_bytes"},
		{"v2 max", 0, "", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, 0, "the container has no memory limit (sys/fs/cgroup/memory.max)"},
		{"v1 unlimited", 0, "", map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0, "the container has no memory limit"},
		{"no cgroup file", 0, "", map[string]string{"etc/hostname": "h\n"}, 0, "cannot read the container's memory limit: open proc/self/cgroup"},
		{"no limit file", 0, "", map[string]string{"proc/self/cgroup": "0::/a\n"}, 0, "cannot read the container's memory limit: no memory.max in /sys/fs/cgroup/a or its parents"},
		{"garbage in the limit file", 0, "", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"}, 0, `"lots" is not a number of bytes or max`},
		{"a path leaving the hierarchy", 0, "", map[string]string{"proc/self/cgroup": "0::/../../etc\n"}, 0, "leaves the hierarchy"},
		{"GOMEMLIMIT set", 0, "300MiB", v2, 0, "GOMEMLIMIT=300MiB is set: the Go runtime applies it"},
		{"explicit", 100 * mi, "300MiB", v2, 100 * mi, "set by the program"},
		{"off", -1, "", v2, 0, "turned off by the program"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			}
			d := Decide(tc.explicit, getenv, os.DirFS(root(t, tc.files)))
			if d.Limit != tc.limit || !strings.Contains(d.Why, tc.whyHas) {
				t.Errorf("Decide = %d, %q; want %d and a reason saying %q", d.Limit, d.Why, tc.limit, tc.whyHas)
			}
		})
	}
}

// This machine's own cgroup files parse, whatever they say.
func TestContainerLimit_ReadsThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/cgroup"); err != nil {
		t.Skipf("no /proc/self/cgroup here: %v", err)
	}
	limit, file, err := ContainerLimit(os.DirFS("/"))
	if err != nil {
		t.Fatalf("ContainerLimit of this machine: %v", err)
	}
	if limit < 0 || file == "" {
		t.Errorf("ContainerLimit = %d, %q", limit, file)
	}
	t.Logf("this machine: limit %d bytes from /%s", limit, file)
}
