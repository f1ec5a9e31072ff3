package slots

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Set is a set of slots out of a fixed number (its capacity). The zero
// value is an empty set of capacity 0. Sets are values: the operations
// return new sets and never change their receiver.
type Set struct {
	n int
	w []uint64
}

// New returns the set of capacity n holding slots.
func New(n int, slots ...int) Set {
	s := Set{n: n, w: make([]uint64, (n+63)/64)}
	for _, i := range slots {
		if i >= 0 && i < n {
			s.w[i/64] |= 1 << (i % 64)
		}
	}
	return s
}

// Full returns the set of all n slots.
func Full(n int) Set {
	s := New(n)
	for i := range n {
		s.w[i/64] |= 1 << (i % 64)
	}
	return s
}

// Cap is the number of slots the set is drawn from.
func (s Set) Cap() int { return s.n }

// Has reports whether slot i is in s.
func (s Set) Has(i int) bool {
	return i >= 0 && i < s.n && s.w[i/64]&(1<<(i%64)) != 0
}

// Len is the number of slots in s.
func (s Set) Len() int {
	c := 0
	for _, w := range s.w {
		c += bits.OnesCount64(w)
	}
	return c
}

// Slots lists the slots of s in increasing order.
func (s Set) Slots() []int {
	var out []int
	for i := range s.n {
		if s.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

func (s Set) combine(t Set, f func(a, b uint64) uint64) Set {
	n := max(s.n, t.n)
	out := Set{n: n, w: make([]uint64, (n+63)/64)}
	for i := range out.w {
		var a, b uint64
		if i < len(s.w) {
			a = s.w[i]
		}
		if i < len(t.w) {
			b = t.w[i]
		}
		out.w[i] = f(a, b)
	}
	return out
}

// Union is s ∪ t.
func (s Set) Union(t Set) Set { return s.combine(t, func(a, b uint64) uint64 { return a | b }) }

// Minus is s \ t.
func (s Set) Minus(t Set) Set { return s.combine(t, func(a, b uint64) uint64 { return a &^ b }) }

// Intersect is s ∩ t.
func (s Set) Intersect(t Set) Set { return s.combine(t, func(a, b uint64) uint64 { return a & b }) }

// Equal reports whether s and t hold the same slots.
func (s Set) Equal(t Set) bool { return s.Minus(t).Len() == 0 && t.Minus(s).Len() == 0 }

// String lists the slots as comma-separated runs, such as "0-3,7,9-10";
// the empty set is "". Parse reads it back.
func (s Set) String() string {
	var b strings.Builder
	for i := 0; i < s.n; {
		if !s.Has(i) {
			i++
			continue
		}
		j := i
		for j+1 < s.n && s.Has(j+1) {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(j))
		}
		i = j + 1
	}
	return b.String()
}

// Parse reads a set of capacity n in String's form.
func Parse(text string, n int) (Set, error) {
	s := New(n)
	if text == "" {
		return s, nil
	}
	for _, part := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return Set{}, fmt.Errorf("slot set %q: %w", text, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return Set{}, fmt.Errorf("slot set %q: %w", text, err)
			}
		}
		if a < 0 || b < a || b >= n {
			return Set{}, fmt.Errorf("slot set %q: %q is outside 0-%d", text, part, n-1)
		}
		for i := a; i <= b; i++ {
			s.w[i/64] |= 1 << (i % 64)
		}
	}
	return s, nil
}

// Add puts slot i into s, in place: only for a set its caller just made,
// since copies of a set share its storage.
func (s *Set) Add(i int) {
	if i >= 0 && i < s.n {
		s.w[i/64] |= 1 << (i % 64)
	}
}
