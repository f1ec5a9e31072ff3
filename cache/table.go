package cache

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// table holds the objects of one namespace, by name. It is an
// open-addressing hash table (linear probing) of object pointers with one
// tag byte per slot, keyed by the name each object already holds.
//
// It replaces a Go map[string]T for memory: a map slot holds a copy of the
// key's string header besides the value (24 bytes), and a Go map of
// 100,000 entries runs at 45–87% load, about 35 B per object in all. Here
// a slot is 9 bytes, the table grows by half when it is 7/8 full, and a
// snapshot's table is sized to its contents once complete (fit), so an
// object costs 10–16 B.
//
// Only one goroutine writes a table; readers hold the store's read lock
// while the writer holds its write lock for changes, as with the maps
// before.
type table[T named] struct {
	tags  []uint8 // 0: empty slot; otherwise the tag of the slot's name
	slots []T
	n     int
	seed  maphash.Seed
}

const (
	tableMinCap  = 8
	tableLoadNum = 7 // grow past 7/8 full
	tableLoadDen = 8
)

// named is what a table holds: objects, or the entries of an encoded
// store, each knowing its name.
type named interface{ GetName() string }

func newTable[T named](capacity int) *table[T] {
	t := &table[T]{seed: maphash.MakeSeed()}
	t.alloc(capacity)
	return t
}

// capFor is the capacity that holds n entries at the maximum load.
func capFor(n int) int {
	return max(tableMinCap, (n*tableLoadDen+tableLoadNum-1)/tableLoadNum)
}

func (t *table[T]) alloc(capacity int) {
	capacity = max(capacity, tableMinCap)
	t.tags = make([]uint8, capacity)
	t.slots = make([]T, capacity)
}

// hash returns name's home slot and tag.
func (t *table[T]) hash(name string) (home int, tag uint8) {
	h := maphash.String(t.seed, name)
	hi, _ := bits.Mul64(h, uint64(len(t.tags))) // h scaled to [0, cap)
	tag = uint8(h) | 1                          // never 0, which marks an empty slot
	return int(hi), tag
}

// find returns the slot holding name, or -1. A nil table is empty.
func (t *table[T]) find(name string) int {
	if t == nil || t.n == 0 {
		return -1
	}
	i, tag := t.hash(name)
	for {
		switch t.tags[i] {
		case 0:
			return -1
		case tag:
			if t.slots[i].GetName() == name {
				return i
			}
		}
		if i++; i == len(t.tags) {
			i = 0
		}
	}
}

func (t *table[T]) get(name string) (T, bool) {
	if i := t.find(name); i >= 0 {
		return t.slots[i], true
	}
	var zero T
	return zero, false
}

func (t *table[T]) len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// put stores obj under its name and returns what it replaced.
func (t *table[T]) put(obj T) (old T, existed bool) {
	name := obj.GetName()
	if i := t.find(name); i >= 0 {
		old, t.slots[i] = t.slots[i], obj
		return old, true
	}
	if (t.n+1)*tableLoadDen > len(t.tags)*tableLoadNum {
		t.resize(len(t.tags) + len(t.tags)/2)
	}
	t.insert(name, obj)
	t.n++
	return old, false
}

// insert puts obj, which is not in the table, in the first free slot from
// its home.
func (t *table[T]) insert(name string, obj T) {
	i, tag := t.hash(name)
	for t.tags[i] != 0 {
		if i++; i == len(t.tags) {
			i = 0
		}
	}
	t.tags[i], t.slots[i] = tag, obj
}

func (t *table[T]) resize(capacity int) {
	tags, slots := t.tags, t.slots
	t.alloc(capacity)
	for i, tag := range tags {
		if tag != 0 {
			t.insert(slots[i].GetName(), slots[i])
		}
	}
}

// fit shrinks the table to the capacity its contents need, when that
// saves more than a tenth: a snapshot's table grew while it was filled.
func (t *table[T]) fit() {
	if want := capFor(t.n); want*10 < len(t.tags)*9 {
		t.resize(want)
	}
}

// remove drops name and returns what it held. The entries after it in its
// run move back (backward-shift deletion), so that no tombstones are
// needed and lookups stop at the first empty slot.
func (t *table[T]) remove(name string) (old T, existed bool) {
	i := t.find(name)
	if i < 0 {
		return old, false
	}
	old = t.slots[i]
	for j := i; ; {
		if j++; j == len(t.tags) {
			j = 0
		}
		if t.tags[j] == 0 {
			break
		}
		home, _ := t.hash(t.slots[j].GetName())
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j]: then a lookup from home would not pass i.
		if (i < j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
			t.tags[i], t.slots[i] = t.tags[j], t.slots[j]
			i = j
		}
	}
	var zero T
	t.tags[i], t.slots[i] = 0, zero
	t.n--
	return old, true
}

// all yields the table's objects, in no particular order.
func (t *table[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for i, tag := range t.tags {
			if tag != 0 && !yield(t.slots[i]) {
				return
			}
		}
	}
}
