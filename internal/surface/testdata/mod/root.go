package mod

func Root() {}
