package workqueue

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// WaitInFlight returns once the keys it matches are Done, whichever path
// Done takes (the lock-free one of an unnamed queue or the locked one of a
// named queue), and ignores keys it does not match.
func TestQueue_WaitInFlight_WaitsForMatchingKeysOnly(t *testing.T) {
	for _, name := range []string{"", "waitinflight"} {
		t.Run("name="+name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := New(Options[string]{Name: name})
				q.Add("a1")
				q.Add("b1")
				a, b := mustGet(t, q), mustGet(t, q)
				isA := func(k string) bool { return strings.HasPrefix(k, "a") }

				waited := make(chan error, 1)
				go func() { waited <- q.WaitInFlight(t.Context(), isA) }()
				synctest.Wait()
				select {
				case err := <-waited:
					t.Fatalf("WaitInFlight returned %v while %s was in flight", err, a)
				default:
				}
				q.Done(b) // not matched: still waiting
				synctest.Wait()
				select {
				case err := <-waited:
					t.Fatalf("WaitInFlight returned %v after only %s was done", err, b)
				default:
				}
				q.Done(a)
				if err := <-waited; err != nil {
					t.Fatalf("WaitInFlight = %v, want nil once %s was done", err, a)
				}
				if err := q.WaitInFlight(t.Context(), isA); err != nil {
					t.Fatalf("WaitInFlight with nothing in flight = %v", err)
				}
			})
		})
	}
}

func TestQueue_WaitInFlight_GivesUpWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("a")
		mustGet(t, q)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := q.WaitInFlight(ctx, func(string) bool { return true }); err != context.DeadlineExceeded {
			t.Fatalf("WaitInFlight = %v, want the context's deadline", err)
		}
	})
}
