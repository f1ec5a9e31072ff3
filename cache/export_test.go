package cache

// Exported for the external tests.
var (
	ParseKey           = parseKey
	SetMutationHandler = setMutationHandler
)

type MutationError = mutationError
