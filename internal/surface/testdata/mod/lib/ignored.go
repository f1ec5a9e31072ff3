//go:build ignore

package lib

func Ignored() {}
