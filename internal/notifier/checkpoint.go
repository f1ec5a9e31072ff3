package notifier

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/client"
)

// Checkpoint types.
const (
	CheckpointConfigMap = "configmap"
	CheckpointFile      = "file"
	CheckpointNone      = "none"
)

// DefaultCheckpointName is the checkpoint ConfigMap's name unless the
// config sets one.
const DefaultCheckpointName = "kubewatch-checkpoint"

// DefaultCheckpointMaxObjects bounds the objects a checkpoint records.
const DefaultCheckpointMaxObjects = 10000

// checkpointKey is the ConfigMap's binaryData key: gzipped JSON.
const checkpointKey = "checkpoint.json.gz"

// maxCheckpointBytes keeps the encoded checkpoint under the API server's
// 1 MiB limit on a ConfigMap, with room for its metadata.
const maxCheckpointBytes = 900 << 10

// CheckpointConfig says where the notifier keeps what it has notified, so
// that a restart notifies what changed while it was down and nothing
// twice.
type CheckpointConfig struct {
	// Type is configmap (the default), file or none.
	Type string
	// Namespace and Name of the ConfigMap. Namespace defaults to the
	// watched namespace, else $POD_NAMESPACE, else the pod's service
	// account namespace, else "default"; Name to DefaultCheckpointName.
	Namespace, Name string
	// Path of the file (type file).
	Path string
	// MaxObjects bounds the objects recorded; default
	// DefaultCheckpointMaxObjects. Past it the checkpoint is marked
	// overflowed (see the package doc).
	MaxObjects int
}

// saNamespaceFile holds the namespace of a pod's service account.
const saNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// defaults fills in what the config leaves empty; getenv reads the
// environment.
func (c *CheckpointConfig) defaults(watched string, getenv func(string) string) {
	if c.Type == "" {
		c.Type = CheckpointConfigMap
	}
	if c.MaxObjects == 0 {
		c.MaxObjects = DefaultCheckpointMaxObjects
	}
	if c.Type != CheckpointConfigMap {
		return
	}
	if c.Name == "" {
		c.Name = DefaultCheckpointName
	}
	if c.Namespace == "" {
		c.Namespace = watched
	}
	if c.Namespace == "" {
		c.Namespace = getenv("POD_NAMESPACE")
	}
	if c.Namespace == "" {
		if b, err := os.ReadFile(saNamespaceFile); err == nil {
			c.Namespace = strings.TrimSpace(string(b))
		}
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
}

func (c *CheckpointConfig) validate() []string {
	var errs []string
	switch c.Type {
	case "", CheckpointConfigMap, CheckpointNone:
	case CheckpointFile:
		if c.Path == "" {
			errs = append(errs, "checkpoint.path: required for a file checkpoint")
		}
	default:
		errs = append(errs, fmt.Sprintf("checkpoint.type %q; allowed: configmap, file, none", c.Type))
	}
	if c.MaxObjects < 0 {
		errs = append(errs, fmt.Sprintf("checkpoint.maxobjects %d; allowed: at least 1", c.MaxObjects))
	}
	return errs
}

// ckEntry is what the checkpoint keeps of one object: its uid, the
// resourceVersion last notified (or judged not worth a notification) and
// a hash of each top-level field, to tell which changed while down.
type ckEntry struct {
	UID    string            `json:"u"`
	RV     string            `json:"r"`
	Fields map[string]string `json:"h,omitempty"`
}

// ckState is the checkpoint as stored.
type ckState struct {
	Version int `json:"v"`
	// Overflow: more objects than the bound; a start treats the
	// checkpoint as absent.
	Overflow bool `json:"overflow,omitempty"`
	// Scopes: watched scope (resource@namespace) → object key → entry.
	Scopes map[string]map[string]ckEntry `json:"scopes"`
	// Incidents are the open incidents, those whose resolve is on its
	// way, and the sinks' references to their messages.
	Incidents *incidentState `json:"incidents,omitempty"`
}

// checkpointStore loads and saves a checkpoint.
type checkpointStore interface {
	// load returns nil, nil when there is no checkpoint yet.
	load(ctx context.Context) (*ckState, error)
	save(ctx context.Context, st *ckState) error
	where() string
}

func encodeState(st *ckState) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(st); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeState(b []byte) (*ckState, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var st ckState
	if err := json.NewDecoder(zr).Decode(&st); err != nil {
		return nil, err
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("checkpoint version %d; this notifier reads version 1", st.Version)
	}
	return &st, nil
}

// fileStore keeps the checkpoint in a file, replaced atomically.
type fileStore struct{ path string }

func (f *fileStore) where() string { return "file " + f.path }

func (f *fileStore) load(context.Context) (*ckState, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeState(b)
}

func (f *fileStore) save(_ context.Context, st *ckState) error {
	b, err := encodeState(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

// configMapStore keeps the checkpoint in a ConfigMap's binaryData.
type configMapStore struct {
	cms             *client.Resource[*corev1.ConfigMap]
	namespace, name string
	// rv is the resourceVersion last read or written, "" if the
	// ConfigMap does not exist.
	rv string
}

func (c *configMapStore) where() string { return "ConfigMap " + c.namespace + "/" + c.name }

func (c *configMapStore) load(ctx context.Context) (*ckState, error) {
	cm, err := c.cms.Get(ctx, c.namespace, c.name)
	if apierrors.IsNotFound(err) {
		c.rv = ""
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.rv = cm.ResourceVersion
	b, ok := cm.BinaryData[checkpointKey]
	if !ok {
		return nil, nil
	}
	return decodeState(b)
}

func (c *configMapStore) save(ctx context.Context, st *ckState) error {
	b, err := encodeState(st)
	if err != nil {
		return err
	}
	if len(b) > maxCheckpointBytes {
		return errTooLarge
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace, ResourceVersion: c.rv,
			Labels: map[string]string{"app.kubernetes.io/component": "notifier-checkpoint"}},
		BinaryData: map[string][]byte{checkpointKey: b},
	}
	var out *corev1.ConfigMap
	if c.rv == "" {
		out, err = c.cms.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			// Written by an earlier life of this notifier since the
			// load: ours is newer.
			var cur *corev1.ConfigMap
			if cur, err = c.cms.Get(ctx, c.namespace, c.name); err == nil {
				cm.ResourceVersion = cur.ResourceVersion
				out, err = c.cms.Update(ctx, cm)
			}
		}
	} else {
		out, err = c.cms.Update(ctx, cm)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Someone else wrote it (or removed it): this process's
			// state is what it notified, so it wins.
			c.rv = ""
			return c.save(ctx, st)
		}
	}
	if err != nil {
		return err
	}
	c.rv = out.ResourceVersion
	return nil
}

var errTooLarge = errors.New("checkpoint larger than a ConfigMap holds")

// tracker is the checkpoint in memory: what was notified per object,
// advanced only once every sink that took a notification is through with
// it, and in each object's order (a notification still in flight holds
// back the later ones of its object), so that a crash at any point leaves
// a checkpoint from which a restart sends again what may not have been
// delivered, and nothing that was.
type tracker struct {
	max int

	mu        sync.Mutex
	committed map[string]map[string]ckEntry // scope → key → entry
	chains    map[string][]*pending         // scope + "\x00" + key → in order
	overflow  bool
	dirty     bool
	// restored is the checkpoint loaded at start (nil: none); the
	// sources consume it as their initial lists arrive.
	restored *ckState
}

// pending is one change of an object on its way through the sinks.
type pending struct {
	scope, key string
	entry      *ckEntry // nil: the object is gone
	remaining  atomic.Int32
	finished   bool
	abandoned  bool
	// carried: a sink merged this change into a later one of its object
	// (a full queue: see overflow), so it is never committed alone; the
	// later one commits the object's state.
	carried bool
}

func newTracker(max int, restored *ckState) *tracker {
	t := &tracker{max: max, committed: map[string]map[string]ckEntry{}, chains: map[string][]*pending{}}
	if restored != nil && !restored.Overflow {
		t.restored = restored
	}
	return t
}

// restoredScope returns the objects the checkpoint holds for scope, and
// whether it holds the scope at all (false: first start for it).
func (t *tracker) restoredScope(scope string) (map[string]ckEntry, bool) {
	if t == nil || t.restored == nil {
		return nil, false
	}
	m, ok := t.restored.Scopes[scope]
	return m, ok
}

// begin registers a change of key; the caller holds one reference, which
// it gives back with finish once it has offered the change to the sinks.
func (t *tracker) begin(scope, key string, entry *ckEntry) *pending {
	if t == nil {
		return nil
	}
	p := &pending{scope: scope, key: key, entry: entry}
	p.remaining.Store(1)
	t.mu.Lock()
	ck := scope + "\x00" + key
	t.chains[ck] = append(t.chains[ck], p)
	t.mu.Unlock()
	return p
}

// hold adds a reference for a sink that took the change.
func (p *pending) hold() {
	if p != nil {
		p.remaining.Add(1)
	}
}

// finish gives back a reference: delivered false (a stop before the sink
// got to it) keeps the change, and every later one of its object, out of
// the checkpoint, so that the next start sends it again.
func (t *tracker) finish(p *pending, delivered bool) {
	if t == nil || p == nil {
		return
	}
	if !delivered {
		t.mu.Lock()
		p.abandoned = true
		t.mu.Unlock()
	}
	if p.remaining.Add(-1) > 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p.finished = true
	ck := p.scope + "\x00" + p.key
	chain := t.chains[ck]
	for len(chain) > 0 && chain[0].finished && !chain[0].abandoned {
		if !chain[0].carried {
			t.commit(chain[0])
		}
		chain = chain[1:]
	}
	if len(chain) == 0 {
		delete(t.chains, ck)
	} else {
		t.chains[ck] = chain
	}
}

// carry marks p as merged into a later change of its object: once
// finished it leaves the chain without being committed, which leaves the
// checkpoint at an earlier state of the object until that later change is
// committed (a crash meanwhile sends the change again: at least once).
func (t *tracker) carry(p *pending) {
	if t == nil || p == nil {
		return
	}
	t.mu.Lock()
	p.carried = true
	t.mu.Unlock()
}

func (t *tracker) commit(p *pending) {
	t.dirty = true
	objs := t.committed[p.scope]
	if p.entry == nil {
		delete(objs, p.key)
		return
	}
	if objs == nil {
		objs = map[string]ckEntry{}
		t.committed[p.scope] = objs
	}
	if _, ok := objs[p.key]; !ok && !t.overflow && t.size() >= t.max {
		t.overflow = true
	}
	objs[p.key] = *p.entry
}

// touch records scope as watched, even while it holds no object.
func (t *tracker) touch(scope string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.committed[scope] == nil {
		t.committed[scope] = map[string]ckEntry{}
		t.dirty = true
	}
	t.mu.Unlock()
}

func (t *tracker) size() int {
	n := 0
	for _, objs := range t.committed {
		n += len(objs)
	}
	return n
}

// snapshot returns the state to save, if it changed since the last one
// or force is set.
func (t *tracker) snapshot(force bool) (*ckState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty && !force {
		return nil, false
	}
	t.dirty = false
	st := &ckState{Version: 1, Overflow: t.overflow, Scopes: map[string]map[string]ckEntry{}}
	if t.overflow {
		return st, true
	}
	for scope, objs := range t.committed {
		m := make(map[string]ckEntry, len(objs))
		for k, e := range objs {
			m[k] = e
		}
		st.Scopes[scope] = m
	}
	return st, true
}

// markDirty makes the next snapshot save again (after a failed save).
func (t *tracker) markDirty() {
	t.mu.Lock()
	t.dirty = true
	t.mu.Unlock()
}

// setOverflow records that the state no longer fits its store.
func (t *tracker) setOverflow() {
	t.mu.Lock()
	t.overflow, t.dirty = true, true
	t.mu.Unlock()
}

// entryOf is what the checkpoint keeps of an object in the form m.
func entryOf(uid, rv string, m map[string]any) *ckEntry {
	return &ckEntry{UID: uid, RV: rv, Fields: fieldHashes(m)}
}

// fieldHashes hashes each top-level field of an object but kind and
// apiVersion; metadata without the fields that change with every write.
func fieldHashes(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch k {
		case "kind", "apiVersion":
			continue
		case "metadata":
			meta, _ := v.(map[string]any)
			trimmed := make(map[string]any, len(meta))
			for mk, mv := range meta {
				if !ignoredPaths["metadata."+mk] {
					trimmed[mk] = mv
				}
			}
			v = trimmed
		}
		b, _ := json.Marshal(v) // sorted keys: the same value, the same bytes
		h := fnv.New64a()
		h.Write(b)
		out[k] = strconv.FormatUint(h.Sum64(), 36)
	}
	return out
}

// changedFields are the top-level fields whose hashes differ, sorted.
func changedFields(old, new map[string]string) []string {
	var out []string
	for k, h := range new {
		if old[k] != h {
			out = append(out, k)
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
