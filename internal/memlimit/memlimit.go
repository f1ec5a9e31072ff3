// Package memlimit derives the Go memory limit (runtime/debug.SetMemoryLimit)
// from the memory limit of the container the process runs in, so that the
// garbage collector works harder as the heap nears the limit instead of the
// kernel's OOM killer ending the process. kloop.App.Run applies it.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Fraction is the share of the container's limit the Go memory limit gets.
// The rest is for what the limit does not count or cannot hold back: the
// binary's pages, cgo and the kernel's accounting of the page cache.
const Fraction = 0.9

// Decision is the Go memory limit to set and why.
type Decision struct {
	// Limit is the Go memory limit in bytes; 0 leaves it as it is.
	Limit int64
	// Why says where Limit comes from, or why the limit is left as it is.
	Why string
}

// Decide picks the Go memory limit. explicit > 0 is taken as it is; < 0
// leaves the limit alone. Otherwise, unless $GOMEMLIMIT is set (read
// through getenv; then the runtime has applied it already), it is
// Fraction of the container's limit read under fsys, the root of the
// file system (ContainerLimit); no limit there, or none that can be
// read, leaves the Go memory limit as it is.
func Decide(explicit int64, getenv func(string) string, fsys fs.FS) Decision {
	switch {
	case explicit > 0:
		return Decision{Limit: explicit, Why: "set by the program (kloop.Options.MemoryLimit, --memory-limit)"}
	case explicit < 0:
		return Decision{Why: "turned off by the program (kloop.Options.MemoryLimit < 0, --memory-limit=off)"}
	}
	if v := getenv("GOMEMLIMIT"); v != "" {
		return Decision{Why: fmt.Sprintf("GOMEMLIMIT=%s is set: the Go runtime applies it", v)}
	}
	limit, file, err := ContainerLimit(fsys)
	switch {
	case err != nil:
		return Decision{Why: "cannot read the container's memory limit: " + err.Error()}
	case limit == 0:
		return Decision{Why: "the container has no memory limit (" + file + ")"}
	}
	return Decision{
		Limit: int64(float64(limit) * Fraction),
		Why:   fmt.Sprintf("%.0f%% of the container's memory limit of %d bytes (/%s)", Fraction*100, limit, file),
	}
}

// applied is the latest Decision Record noted.
var applied atomic.Pointer[Decision]

// Record notes d as the decision applied to this process, for Applied.
// The Go memory limit is the process's, and so is this note.
func Record(d Decision) { applied.Store(&d) }

// Applied returns the decision Record noted last; ok is false when none
// was (no kloop.App has run).
func Applied() (d Decision, ok bool) {
	if p := applied.Load(); p != nil {
		return *p, true
	}
	return Decision{}, false
}

// unlimitedV1 is the least value cgroup v1's memory.limit_in_bytes takes
// for "no limit": the kernel writes the largest page-aligned int64.
const unlimitedV1 = math.MaxInt64 &^ (1<<20 - 1)

// ContainerLimit returns the memory limit of this process's cgroup, the
// least one set on it or on its ancestors, read under fsys (the root of
// the file system): /proc/self/cgroup names the cgroup; cgroup v2's
// memory.max or, where the memory controller is on v1,
// memory.limit_in_bytes holds the limit. limit is 0 when there is none;
// file is the one read last (for messages, relative to fsys's root).
func ContainerLimit(fsys fs.FS) (limit int64, file string, err error) {
	data, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, "", err
	}
	base, dir, name, err := memoryCgroup(data)
	if err != nil {
		return 0, "", fmt.Errorf("/proc/self/cgroup: %w", err)
	}
	// From the process's own cgroup up to the root of the hierarchy: a
	// limit on an ancestor holds too. A file that is not there (the root
	// of v2 has no memory.max) sets nothing.
	for p := dir; ; p = path.Dir(p) {
		f := path.Join(p, name)
		v, err := fs.ReadFile(fsys, f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, f, err
		default:
			file = f
			n, err := parseLimit(v)
			if err != nil {
				return 0, f, fmt.Errorf("/%s: %w", f, err)
			}
			if n > 0 && (limit == 0 || n < limit) {
				limit = n
			}
		}
		if p == base {
			break
		}
	}
	if file == "" {
		return 0, "", fmt.Errorf("no %s in /%s or its parents", name, dir)
	}
	return limit, file, nil
}

// memoryCgroup returns the root of the memory controller's hierarchy, the
// directory of the process's memory cgroup under it (both relative to the
// file system's root) and the name of its limit file, from the lines of
// /proc/self/cgroup ("ID:CONTROLLERS:PATH").
func memoryCgroup(data []byte) (base, dir, name string, err error) {
	var v2 string
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		id, rest, ok1 := strings.Cut(sc.Text(), ":")
		controllers, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return "", "", "", fmt.Errorf("line %q: want ID:CONTROLLERS:PATH", sc.Text())
		}
		if id == "0" && controllers == "" {
			v2, found = p, true
			continue
		}
		if slices.Contains(strings.Split(controllers, ","), "memory") {
			return under("sys/fs/cgroup/memory", p, "memory.limit_in_bytes")
		}
	}
	if !found {
		return "", "", "", errors.New("no memory controller on cgroup v1 and no cgroup v2 line")
	}
	return under("sys/fs/cgroup", v2, "memory.max")
}

func under(base, cgroup, name string) (string, string, string, error) {
	dir := path.Join(base, cgroup)
	if dir != base && !strings.HasPrefix(dir, base+"/") {
		return "", "", "", fmt.Errorf("cgroup path %q leaves the hierarchy", cgroup)
	}
	return base, dir, name, nil
}

// parseLimit reads a limit file: a number of bytes, or "max" (v2) or
// unlimitedV1 and above (v1) for none, returned as 0.
func parseLimit(v []byte) (int64, error) {
	s := strings.TrimSpace(string(v))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a number of bytes or max", s)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return n, nil
}
