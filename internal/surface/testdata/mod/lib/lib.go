package lib

import "example.com/mod/internal/x"

// Exported: a func, a type with an exported and an unexported method, a
// generic type with a method, an alias, a grouped type.
func Exported() {}

func unexported() {}

// T has an exported field of an unexported type, and an unexported one
// that does not count.
type T struct {
	F hidden
	g hidden
}

func (T) M()  {}
func (*T) m() {}

type G[K comparable, V any] struct{}

func (g *G[K, V]) Get() {}

type hidden struct{}

func (hidden) Shown() {}

type A = T

type (
	B int
	c int
)

// Alias brings x.Y's exported method in.
type Alias = x.Y

// Leak returns a type the user cannot import.
func Leak() *x.Z { return nil }

// Named returns a type the user names by its alias.
func Named() x.Y { return x.Y{} }

var own int

func init() {
	x.Hook = func() {}
	own = 1
}
