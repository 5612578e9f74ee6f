package main

func (franz) admin(a string, o options) (int, error)     { return 0, unsupported("todo") }
func (saramaLib) admin(a string, o options) (int, error) { return 0, unsupported("todo") }
