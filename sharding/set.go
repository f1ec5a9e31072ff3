package sharding

import "github.com/kloop-dev/kloop/internal/slots"

// Set is a set of slots out of a fixed number (its capacity), printed as
// comma-separated runs such as "0-3,7,9-10". Sets are values: their
// operations return new sets and never change their receiver.
type Set = slots.Set
