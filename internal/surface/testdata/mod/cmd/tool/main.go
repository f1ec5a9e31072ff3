package tool

func Command() {}
