package controller

import (
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// Names the external tests reach that users do not need.
var (
	ControllerOwnerKey = controllerOwnerKey
	WithLogger         = withLogger
)

func ResourceVersionChanged[T watcher.Object](e cache.Event[T]) bool {
	return resourceVersionChanged(e)
}

// Unretryable is unretryable, for tests.
var Unretryable = unretryable
