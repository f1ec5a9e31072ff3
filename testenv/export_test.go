package testenv

// NewProxy is exported for the external tests.
var NewProxy = newProxy
