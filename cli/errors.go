package cli

import (
	"errors"
	"fmt"
)

// FlagError is a flag value that cannot be used: it names the flag, the
// value given and what would be right. Run exits 2 on one.
type FlagError struct {
	Flag  string // with its dashes, for example "--log-level"
	Value string
	Want  string // what to give instead
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Flag, e.Value, e.Want)
}

// usageError is a mistake in how a command was called that no FlagError
// describes, such as two flags that exclude each other. Run exits 2 on one.
type usageError struct{ Err error }

func (e *usageError) Error() string { return e.Err.Error() }
func (e *usageError) Unwrap() error { return e.Err }

// Usagef returns an error with the formatted message for a mistake in how
// a command was called that no FlagError describes, such as two flags that
// exclude each other: Run prints it with the usage hint and exits 2.
func Usagef(format string, args ...any) error {
	return &usageError{Err: fmt.Errorf(format, args...)}
}

// isUsage reports whether err is, or wraps, a *FlagError or an error of
// Usagef.
func isUsage(err error) bool {
	var fe *FlagError
	var ue *usageError
	return errors.As(err, &fe) || errors.As(err, &ue)
}

// ExitCode is an error for a command that has reported its failure
// itself: Run prints nothing more and exits with Code.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
