package x

func Internal() {}

// Y is brought into lib by an alias, Z by a signature.
type Y struct{}

func (Y) Do()     {}
func (Y) hidden() {}

type Z struct{}

func (*Z) Run() {}

// Hook is filled by lib's init, which the count reports.
var Hook func()
