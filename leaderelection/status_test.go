package leaderelection

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestElectorStatus_ReportsLeaderSinceAndRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		e, err := newTestElector(&memLeases{}, testConfig("a", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if s := e.Status(); s.Lease != "ns/lock" || s.Identity != "a" || s.Leading || !s.LeadingSince.IsZero() {
			t.Fatalf("before Run: %+v", s)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- e.Run(ctx) }()
		<-started
		began := time.Now()
		time.Sleep(10*DefaultRetryPeriod + time.Millisecond) // virtual time: ten renewals
		synctest.Wait()
		s := e.Status()
		if !s.Leading || s.Leader != "a" || !s.LeadingSince.Equal(began) || s.Renewals != 10 {
			t.Fatalf("leading: %+v; want leading as a since %v with 10 renewals", s, began)
		}
		if s.RenewedAt.Before(began.Add(9 * DefaultRetryPeriod)) {
			t.Fatalf("RenewedAt %v, want within the last retry period before %v", s.RenewedAt, time.Now())
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if s := e.Status(); s.Leading || s.Leader != "" || s.Renewals != 10 {
			t.Fatalf("after release: %+v; want not leading, no holder", s)
		}
	})
}
