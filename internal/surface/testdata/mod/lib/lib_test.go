package lib

func TestOnly() {}

type TestType struct{}
