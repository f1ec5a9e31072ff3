package x

func Internal() {}
