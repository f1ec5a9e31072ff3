package manager

// ElectorForTest is the elector interface, for the external tests.
type ElectorForTest = elector
