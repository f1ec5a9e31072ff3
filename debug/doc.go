// Package debug serves a live page of a running manager: its informers,
// queues, controllers and leader election, with a JSON document behind it
// that scripts can read too.
//
//	srv, err := debug.New(mgr, debug.Options{Addr: "127.0.0.1:8082"})
//	if err != nil { ... }
//	if err := mgr.Add(srv); err != nil { ... }
//	// once started: srv.URL(debug.PagePath) is "http://127.0.0.1:8082/debug/"
//
// The page (PagePath, "/debug/"; "/" redirects there) is one HTML file with
// its CSS and JavaScript, embedded in the binary; it loads nothing from
// elsewhere and polls the snapshot (SnapshotPath, "/debug/api/v1/snapshot")
// once a second. For scripts:
//
//	curl -s 127.0.0.1:8082/debug/api/v1/snapshot | jq '.informers[] | select(.level != "ok")'
//
// On the builder (package kloop), add the server to the App's manager
// before Run; behind --metrics-secure (kloop.Options.SecureMetrics) give it
// the guard and the TLS of /metrics, so that it answers only callers the
// API server authenticates and authorizes, on any address:
//
//	sm, err := secure.New(cfg, secure.Options{})
//	srv, err := debug.New(app.Manager(), debug.Options{Addr: ":8082", Wrap: sm.Wrap, TLS: sm.TLSConfig()})
//	err = app.Manager().Add(srv)
//
// # Guarantees
//
//   - It costs nothing while nobody looks: no goroutine but the HTTP server's,
//     nothing counted on any hot path. Each request reads the parts' Status
//     methods (the state their locks guard and their Prometheus metrics, the
//     way a scrape reads them) and keeps at most one sample per second, for
//     Options.Series (5 minutes), for the rates and the plots.
//   - The counts are the metrics: an informer's changes are
//     kloop_informer_changes_total, its relists kloop_reflector_events_total
//     with type RelistDone, a controller's reconciles
//     controller_runtime_reconcile_total, its queue's adds and retries
//     workqueue_adds_total and workqueue_retries_total, its ready keys the
//     sum of workqueue_depth over priorities. A scrape and a snapshot taken
//     while nothing changes agree.
//   - Without Options.Wrap the server listens only on a loopback address
//     (New fails with ErrInsecureAddr otherwise). With Wrap and Options.TLS
//     (the authentication, authorization and TLS that guard /metrics with
//     --metrics-secure: a metrics/secure.Secure's Wrap and TLSConfig), any
//     address; readers then need get on the non-resource URLs "/debug" and
//     "/debug/*".
//   - The server runs on every replica (NeedLeaderElection is false); a
//     standby shows its warm caches and idle controllers.
//
// # Not guaranteed
//
//   - Rates and windowed quantiles need history: the first request after a
//     quiet spell has none (rates are null) and the plots start from when
//     someone last looked.
//   - A snapshot is not atomic across parts: each part is read in turn.
//
// # The snapshot (schema version 1)
//
// Times are RFC 3339, durations and rates are float seconds and per-second
// values. Counters count since the part was made. Fields may be added in
// any version; Version changes only when a field changes meaning or goes.
//
//	version        1
//	time           when the snapshot was taken
//	windowSeconds  how far back rates, windowed quantiles and trouble rules
//	               look (up to Options.Window; 0 when there is no history)
//	level          "ok", "warn" or "bad": the worst of the parts
//	manager        {started, synced (every cache), leaderElection, electing,
//	               leading (controllers run), stopping}
//	leader         null without leader election, else {lease ("ns/name"),
//	               identity, holder (as last observed), leading, leadingSince,
//	               renewedAt, renewals}
//	informers[]    one per informer of every informer factory:
//	  name, resource ("plural.version.group"), scope ("all namespaces",
//	  "namespace=x", selectors)
//	  synced          the first snapshot is in the cache
//	  state           "listing" (fetching a snapshot), "connecting" (opening a
//	                  watch), "watching", "waiting" (backing off after error,
//	                  or waiting for its kind: kloop.Options.WaitForKinds),
//	                  "stopped"
//	  stateLevel      the colour of state: "ok" watching; "warn" syncing,
//	                  listing, connecting, or waiting for its kind (an
//	                  informer whose kind is not served yet, which the
//	                  program asked to wait for, is amber, not red); "bad"
//	                  not synced after an error, or backing off after one;
//	                  "plain" stopped
//	  error           the latest list/watch error, "" when healthy
//	  objects, resourceVersion   what the cache holds
//	  cacheBytes      the estimated heap of the cached objects
//	  encoded, cacheWhy  the cache keeps objects encoded (informer.Memory),
//	                  and why it is or is not ("" when not asked)
//	  lastEvent       when the newest event arrived (null before any)
//	  pending         events between the reflector and the cache
//	  lists, watches, relists (completed snapshots), errors
//	  changes         {add, update, delete, deleteFinalStateUnknown}
//	  handlers[]      {name, pending (notifications waiting), synced, inline (no queue: a controller source)}
//	  level, trouble[]  see below
//	controllers[]  one per controller:
//	  name, workers, active (reconciles running now)
//	  reconciles      {total, success, error, requeueAfter, requeue, terminal,
//	                  panics, timeouts, skipped (not run: woken only by
//	                  the key's own writes; not in total)}
//	  rates           null without history, else per second over the window:
//	                  {reconciles, errors, adds, retries}
//	  duration        {count, window (true: over the window, else over the
//	                  controller's life), p50, p99}, estimated from the
//	                  histogram's buckets like histogram_quantile
//	  recentErrors[]  the latest failed reconciles, newest first, at most 10:
//	                  {time (started), key, outcome, durationSeconds, error,
//	                  terminal, retries (before this one), causes[] (what
//	                  woke it, as the logs write them), causesTotal}
//	  recentReconciles[]  the latest reconciles, failed or not, newest
//	                  first, at most 20, in the same form: why each ran
//	                  ("For Foo ns/web@42 Updated") and how it ended
//	                  (outcome "success", "requeue_after", "error", or
//	                  "skipped": not run, every cause the key's own write)
//	  hotLoops[]      keys woken only by the controller's own writes:
//	                  {key, reconciles, since, last, causes[]}
//	  queue           {ready, readyByPriority {"0": n, ...}, delayed,
//	                  inFlight, oldestReadySeconds, longestRunningSeconds,
//	                  adds, retries}
//	  series          for plots, oldest first over Options.Series, parallel
//	                  arrays: t (Unix seconds), ready, reconciles and errors
//	                  (per second since the point before)
//	  level, trouble[]
//	shards[]       one per shard group this replica is a member of (package
//	               sharding; empty without): {group, identity, slots, key
//	               ("namespace", "uid"), joined, blocked, leaving, scope (this
//	               replica's slots, "0-5,9"), inScope, members[] {identity,
//	               self, live, held, heldCount, draining, assigned,
//	               ageSeconds}, informers[] {name, objects, filtering
//	               ("server", "client", "none")}, level, trouble[]}
//	clusters[]     one per cluster of a fleet App (kloop.Options.Fleet; empty
//	               without): {name, origin ("home", "file <path>", "Secret
//	               <ns>/<name>"), state ("joining", "joined", "failed",
//	               "invalid"), since, objects (in its caches), lastError,
//	               level (failed or invalid: bad; joining, or an informer's
//	               error: warn), trouble[]}
//	memory         {goLimitBytes (the Go memory limit now; 0: none), why
//	               (what kloop.App.Run derived or found at the start)}
//
// # Why did a key run?
//
// KeysPath ("/debug/api/v1/keys?controller=NAME", optionally &key=KEY)
// answers with {version, controller, keys: {KEY: [reconcile, ...]}}: the
// latest 5 reconciles of each of the 256 keys the controller reconciled
// most recently, newest first, in the form of recentReconciles. On the
// page, a click on a key of the latest reconciles shows its history.
//
// # Trouble
//
// Every informer and controller has a level ("ok", "warn", "bad") and the
// reasons for it (trouble, short sentences); the page colours by them.
//
//   - Informer: not synced with an error: bad; not synced yet: warn; synced
//     but not watching with an error (the API server is gone, access was
//     revoked): bad; an error while watching: warn; a handler with more than
//     HandlerBacklog notifications waiting: warn.
//   - Controller, over the window: half or more of the reconciles failed:
//     bad; some failed: warn; the ready keys grew by at least 10 and by
//     half: warn. At any time: a ready key waiting, or a reconcile running,
//     longer than StuckAfter: warn.
//   - Shard group: not joined, or blocked by a member with another
//     configuration: bad; leaving: warn; a member that is not live but
//     holds slots: warn.
package debug
