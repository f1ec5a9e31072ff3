package main

// The budget that holds, under a real container limit: each informer syncs
// in a child process of its own placed in a memory cgroup with a hard
// limit, as a container's would be, and the test asserts which one the
// kernel's OOM killer ends.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/testenv"
)

// The limit sits between the two informers' peaks at 100,000 ConfigMaps
// (BENCHMARKS.md, peak RSS medians of two runs: kloop 166 MiB in both,
// client-go 324 and 338 MiB, base RSS included): 240 MiB is near their
// geometric mean, 74 MiB (45%) above kloop's peak, so that GC timing on a
// loaded machine does not end kloop, and 84 MiB below client-go's, whose
// retained heap alone (189 MiB) plus the process's base (29 MiB) and the
// garbage collector's headroom cannot fit in it. (The cgroup counts a
// little less than RSS: the test binary's pages were charged when it was
// first read, not to the child. Measured: kloop's cgroup peaked at 142 MiB
// for a peak RSS of 167.)
var (
	cgroupObjects = flag.Int("cgroup-n", 100000, "ConfigMaps TestCgroup seeds")
	cgroupLimit   = flag.Int64("cgroup-limit", 240<<20, "TestCgroup's memory limit in bytes")
)

// The environment of a child started by memoryHierarchy.run, which runs a
// peak side (runPeakChild).
const (
	cgroupSideEnv       = "KLOOP_CGROUP_TEST_SIDE"
	cgroupKubeconfigEnv = "KLOOP_CGROUP_TEST_KUBECONFIG"
	cgroupObjectsEnv    = "KLOOP_CGROUP_TEST_N"
	cgroupPrefix        = "kloop-cgroup-test-"
)

func TestMain(m *testing.M) {
	if side := os.Getenv(cgroupSideEnv); side != "" {
		os.Exit(cgroupChild(side))
	}
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

// cgroupChild is the child, in its cgroup from its first instruction: it
// syncs and reports as a peak child.
func cgroupChild(side string) int {
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	n, err := strconv.Atoi(os.Getenv(cgroupObjectsEnv))
	if err == nil {
		err = runPeakChild(side, os.Getenv(cgroupKubeconfigEnv), "configmaps", n, "")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// Under a hard memory limit, kloop's informer syncs 100,000 ConfigMaps and
// client-go's, run the same way (same harness, the Go runtime's defaults:
// no GOMEMLIMIT, GOGC 100), is OOM-killed.
func TestCgroup_KloopSyncsWhereClientGoIsOOMKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and seeds 100,000 ConfigMaps (not with -short)")
	}
	if raceEnabled {
		t.Skip("measures memory: the race detector multiplies a process's memory; run without -race (make test does)")
	}
	h, why := findMemoryHierarchy()
	if h == nil {
		t.Skip(why)
	}
	h.removeStale(t)

	n := *cgroupObjects
	env := testenv.StartT(t, testenv.Options{Logger: slog.New(slog.DiscardHandler)})
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.ContentType = kruntime.ContentTypeProtobuf
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	workload = "configmaps"
	if err := seed(ctx, kc, 0, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d ConfigMaps in %.1fs", n, time.Since(began).Seconds())

	limit := *cgroupLimit
	k := h.run(t, "kloop", env.KubeconfigPath, n, limit)
	if k.err != nil || k.report == nil {
		t.Errorf("kloop's informer did not sync %d ConfigMaps under a %d MiB limit: %v (%s); stderr:\n%s", n, limit>>20, k.err, k.state, k.stderr)
	} else {
		t.Logf("kloop synced %d ConfigMaps under %d MiB: peak RSS %.1f MiB, cgroup's peak usage %.1f MiB, sync %.1fs",
			n, limit>>20, mib(k.report.PeakRSS), mib(k.peakUsage), time.Duration(k.report.Sync).Seconds())
	}
	if k.oomKills > 0 {
		t.Errorf("kloop's cgroup counted %d OOM kills, want 0", k.oomKills)
	}

	c := h.run(t, "client-go", env.KubeconfigPath, n, limit)
	ws, _ := c.state.Sys().(syscall.WaitStatus)
	switch {
	case c.report != nil:
		t.Errorf("client-go's informer synced %d ConfigMaps under %d MiB (peak RSS %.1f MiB): the limit no longer tells the two apart", n, limit>>20, mib(c.report.PeakRSS))
	case !ws.Signaled() || ws.Signal() != syscall.SIGKILL:
		t.Errorf("client-go's child ended with %s, want killed by SIGKILL (the OOM killer); stderr:\n%s", c.state, c.stderr)
	default:
		t.Logf("client-go's informer was killed (%s) under %d MiB: %d OOM kill(s) in its cgroup", c.state, limit>>20, c.oomKills)
	}
	switch {
	case c.oomKills == -1 && c.failcnt < 1:
		// A kernel before 4.13 (v1) keeps no OOM kill count: the limit
		// must at least have been hit.
		t.Errorf("client-go's cgroup's usage never hit its limit (failcnt %d)", c.failcnt)
	case c.oomKills == 0:
		t.Errorf("client-go's cgroup counted no OOM kill, want at least 1")
	}
}

// memoryHierarchy is where memory cgroups are made: the root of cgroup v2
// (with the memory controller enabled for its children) or of cgroup v1's
// memory hierarchy.
type memoryHierarchy struct {
	root string
	v2   bool
}

// findMemoryHierarchy finds a memory controller this process can make a
// cgroup in, or says why there is none.
func findMemoryHierarchy() (*memoryHierarchy, string) {
	var h *memoryHierarchy
	if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && hasField(ctl, "memory") {
		h = &memoryHierarchy{root: "/sys/fs/cgroup", v2: true}
	} else if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		h = &memoryHierarchy{root: "/sys/fs/cgroup/memory"}
	} else {
		return nil, "this machine has no memory cgroup to limit a process with: neither cgroup v2 with the memory controller in " +
			"/sys/fs/cgroup/cgroup.subtree_control nor cgroup v1's memory controller at /sys/fs/cgroup/memory"
	}
	probe := filepath.Join(h.root, fmt.Sprintf("%sprobe-%d", cgroupPrefix, os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return nil, fmt.Sprintf("cannot create a memory cgroup under %s (the test creates one as root, as CI runs it): %v", h.root, err)
	}
	if err := os.Remove(probe); err != nil {
		return nil, fmt.Sprintf("cannot remove the memory cgroup %s it made: %v", probe, err)
	}
	return h, ""
}

func hasField(b []byte, f string) bool {
	for _, w := range strings.Fields(string(b)) {
		if w == f {
			return true
		}
	}
	return false
}

// removeStale removes the empty cgroups this test left behind in runs
// whose process is gone (one killed by go test's timeout, say).
func (h *memoryHierarchy) removeStale(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(h.root, cgroupPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), cgroupPrefix), "-", 2)[0])
		if err != nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if err := os.Remove(d); err != nil {
			t.Logf("a cgroup of an earlier run stays: %v", err)
		}
	}
}

// memoryCgroup is a cgroup with a hard memory limit.
type memoryCgroup struct {
	dir string
	v2  bool
}

// create makes the cgroup name with a hard limit of limit bytes, swap
// included where the kernel accounts it (so that swapping does not hide
// the kill).
func (h *memoryHierarchy) create(name string, limit int64) (*memoryCgroup, error) {
	c := &memoryCgroup{dir: filepath.Join(h.root, name), v2: h.v2}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, err
	}
	v := strconv.FormatInt(limit, 10)
	var err error
	if h.v2 {
		err = c.write("memory.max", v)
		if err == nil && c.has("memory.swap.max") {
			err = c.write("memory.swap.max", "0")
		}
	} else {
		err = c.write("memory.limit_in_bytes", v)
		if err == nil && c.has("memory.memsw.limit_in_bytes") {
			err = c.write("memory.memsw.limit_in_bytes", v)
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.remove())
	}
	return c, nil
}

func (c *memoryCgroup) has(file string) bool {
	_, err := os.Stat(filepath.Join(c.dir, file))
	return err == nil
}

func (c *memoryCgroup) write(file, v string) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(v), 0)
}

// counter reads one "key value" line of a flat-keyed cgroup file, or -1.
func (c *memoryCgroup) counter(file, key string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), " "); ok && k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// value reads a cgroup file holding one number, or -1.
func (c *memoryCgroup) value(file string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// oomKills is how many processes the OOM killer ended in the cgroup
// (v2 memory.events, v1 memory.oom_control), -1 if the kernel does not
// say.
func (c *memoryCgroup) oomKills() int64 {
	if c.v2 {
		return c.counter("memory.events", "oom_kill")
	}
	return c.counter("memory.oom_control", "oom_kill")
}

// limitHits is how often the cgroup's usage reached its limit (v2
// memory.events max, v1 memory.failcnt or, with swap accounted, the
// memory.memsw.failcnt of the limit that counts swap too).
func (c *memoryCgroup) limitHits() int64 {
	if c.v2 {
		return c.counter("memory.events", "max")
	}
	return max(c.value("memory.failcnt"), c.value("memory.memsw.failcnt"))
}

// peakUsage is the cgroup's largest memory usage (v2 memory.peak, v1
// memory.max_usage_in_bytes), -1 if the kernel does not keep it.
func (c *memoryCgroup) peakUsage() int64 {
	if c.v2 {
		return c.value("memory.peak")
	}
	return c.value("memory.max_usage_in_bytes")
}

// remove removes the cgroup, which must have no process left.
func (c *memoryCgroup) remove() error {
	err := os.Remove(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// outcome is how a side's child ended in its cgroup.
type outcome struct {
	err       error // the child's exit, nil for status 0
	state     *os.ProcessState
	report    *peakReport // the child's PEAK report, nil if it made none
	stderr    string
	oomKills  int64
	failcnt   int64
	peakUsage int64
}

// run syncs side's informer on n ConfigMaps in a child process in a
// cgroup of its own limited to limit bytes, and removes the cgroup once
// the child is gone, whatever happened.
func (h *memoryHierarchy) run(t *testing.T, side, kubeconfig string, n int, limit int64) outcome {
	t.Helper()
	cg, err := h.create(fmt.Sprintf("%s%d-%s", cgroupPrefix, os.Getpid(), side), limit)
	if err != nil {
		t.Fatalf("creating a memory cgroup for %s: %v", side, err)
	}
	defer func() {
		if err := cg.remove(); err != nil {
			t.Errorf("removing the cgroup %s: %v", cg.dir, err)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// A shell puts itself in the cgroup, then becomes this test binary as
	// the child: all the child's memory, the Go runtime's own included,
	// is charged to the cgroup, as a container's process's is.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `echo $$ > "$0" && exec "$1" -test.run='^$'`,
		filepath.Join(cg.dir, "cgroup.procs"), os.Args[0])
	for _, kv := range os.Environ() {
		// The Go runtime's defaults, on both sides.
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		cgroupSideEnv+"="+side,
		cgroupKubeconfigEnv+"="+kubeconfig,
		cgroupObjectsEnv+"="+strconv.Itoa(n))
	// Should this test's process die, its child goes with it (the signal
	// is kept across the shell's exec).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	o := outcome{err: cmd.Run()}
	o.state, o.stderr = cmd.ProcessState, stderr.String()
	if o.state == nil {
		t.Fatalf("starting %s's child: %v", side, o.err)
	}
	for l := range strings.Lines(stdout.String()) {
		if rest, ok := strings.CutPrefix(l, "PEAK "); ok {
			var rep peakReport
			if err := json.Unmarshal([]byte(rest), &rep); err != nil {
				t.Fatalf("%s's child reported %q: %v", side, rest, err)
			}
			o.report = &rep
		}
	}
	o.oomKills, o.failcnt, o.peakUsage = cg.oomKills(), cg.limitHits(), cg.peakUsage()
	return o
}
