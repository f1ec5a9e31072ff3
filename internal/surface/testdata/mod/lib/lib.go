package lib

// Exported: a func, a type with an exported and an unexported method, a
// generic type with a method, an alias, a grouped type.
func Exported() {}

func unexported() {}

type T struct{}

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
