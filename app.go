package kloop

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"
)

// App is one controller program: it owns the manager, one informer factory,
// one client and one event recorder, made on first use and registered with
// the manager. (Being built; the API above is what the commands use.)
type App struct {
	cfg  *rest.Config
	opts Options
}

// New returns an App talking to the API server at cfg. It does no I/O.
func New(cfg *rest.Config, opts Options) (*App, error) {
	if cfg == nil {
		return nil, errors.New("kloop: New needs a *rest.Config")
	}
	return &App{cfg: cfg, opts: opts}, nil
}

// Run starts everything the App holds and blocks until ctx is done and
// everything has stopped.
func (a *App) Run(ctx context.Context) error { <-ctx.Done(); return nil }
