package notifier

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/watcher"
)

// DefaultSilencePrefix is the prefix of the silence-until label and
// annotation unless silences.prefix sets one.
const DefaultSilencePrefix = "notifier.kloop.dev"

// SilenceConfig silences notifications: by time of day, and by a
// `<Prefix>/silence-until` annotation or label on the object or its
// namespace, whose value is a time (RFC 3339, or 20060102T1504Z in a
// label, which cannot hold a colon) until which nothing about it is sent.
// Silenced changes are not notified at all (counted in
// kubewatch_events_suppressed_total{reason="silenced"}); an incident's
// resolve is still sent to the sinks that heard of it.
type SilenceConfig struct {
	// Enabled: the config has a silences section. Only then the
	// notifier watches namespaces for the annotation.
	Enabled bool
	// Prefix of the silence-until key. Default DefaultSilencePrefix.
	Prefix string
	// Times are daily quiet times.
	Times []QuietTime
}

// QuietTime is a daily time range in which nothing is sent about objects
// of Namespaces (all if empty).
type QuietTime struct {
	// From and To are "HH:MM"; a range past midnight (22:00 to 06:00)
	// wraps.
	From, To string
	// Timezone is an IANA name; default UTC.
	Timezone   string
	Namespaces []string
}

// silenceLayouts are the accepted forms of a silence-until value.
var silenceLayouts = []string{time.RFC3339, "20060102T1504Z", "20060102T150405Z"}

func parseSilenceUntil(v string) (time.Time, error) {
	for _, l := range silenceLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-12-07T22:00:00Z) or, in a label, 20261207T2200Z", v)
}

// quiet is a compiled QuietTime.
type quiet struct {
	from, to   int // minutes of the day
	loc        *time.Location
	namespaces []string
	text       string
}

func parseClock(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, fmt.Errorf("%q: want HH:MM", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

func compileQuiet(q QuietTime) (quiet, error) {
	from, err := parseClock(q.From)
	if err != nil {
		return quiet{}, fmt.Errorf("from: %w", err)
	}
	to, err := parseClock(q.To)
	if err != nil {
		return quiet{}, fmt.Errorf("to: %w", err)
	}
	loc, err := time.LoadLocation(orDefault(q.Timezone, "UTC"))
	if err != nil {
		return quiet{}, fmt.Errorf("timezone: %w", err)
	}
	text := fmt.Sprintf("%s to %s %s", q.From, q.To, loc)
	if len(q.Namespaces) > 0 {
		text += " in " + strings.Join(q.Namespaces, ", ")
	}
	return quiet{from: from, to: to, loc: loc, namespaces: q.Namespaces, text: text}, nil
}

func (q quiet) covers(namespace string, now time.Time) bool {
	if len(q.namespaces) > 0 && !slices.Contains(q.namespaces, namespace) {
		return false
	}
	t := now.In(q.loc)
	m := t.Hour()*60 + t.Minute()
	if q.from <= q.to {
		return m >= q.from && m < q.to
	}
	return m >= q.from || m < q.to
}

// silencer judges whether a change is silenced.
type silencer struct {
	key   string // <prefix>/silence-until
	times []quiet

	mu sync.Mutex
	// namespaces: silence-until of each namespace that has one; owners:
	// of each watched object that has one (Kind/namespace/name), for the
	// objects it controls.
	namespaces map[string]time.Time
	owners     map[string]time.Time
}

func newSilencer(c SilenceConfig) (*silencer, error) {
	s := &silencer{key: orDefault(c.Prefix, DefaultSilencePrefix) + "/silence-until", namespaces: map[string]time.Time{}, owners: map[string]time.Time{}}
	for i, q := range c.Times {
		cq, err := compileQuiet(q)
		if err != nil {
			return nil, fmt.Errorf("silences.times[%d].%w", i, err)
		}
		s.times = append(s.times, cq)
	}
	return s, nil
}

// until is the silence-until of an object's annotations or labels (zero
// if none or unreadable).
func (s *silencer) until(annotations, labels map[string]string) time.Time {
	for _, m := range []map[string]string{annotations, labels} {
		if v, ok := m[s.key]; ok {
			if t, err := parseSilenceUntil(v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// namespaceChanged records a namespace's silence-until.
func (s *silencer) namespaceChanged(obj watcher.Object, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.until(obj.GetAnnotations(), obj.GetLabels())
	if gone || t.IsZero() {
		delete(s.namespaces, obj.GetName())
		return
	}
	s.namespaces[obj.GetName()] = t
}

func (s *silencer) handler() objectHandler {
	return objectHandler{
		add:    func(obj watcher.Object, _ bool) { s.namespaceChanged(obj, false) },
		update: func(_, obj watcher.Object) { s.namespaceChanged(obj, false) },
		del:    func(obj watcher.Object, _ bool) { s.namespaceChanged(obj, true) },
	}
}

// silenced says why ev is silenced at now, "" if it is not. It also
// records ev's own silence-until, which silences the objects ev's object
// controls (a Deployment's Pods) when its kind is watched.
func (s *silencer) silenced(ev *Event, now time.Time) string {
	var ann map[string]string
	if meta, ok := ev.Object["metadata"].(map[string]any); ok {
		if a, ok := meta["annotations"].(map[string]any); ok {
			ann = make(map[string]string, len(a))
			for k, v := range a {
				ann[k], _ = v.(string)
			}
		}
	}
	own := s.until(ann, ev.Labels)
	var owner string
	if ev.Explanation != nil && ev.Explanation.Owner != "" {
		owner = ev.Explanation.Owner + "@" + ev.Namespace
	}
	s.mu.Lock()
	self := ev.Kind + "/" + ev.Name + "@" + ev.Namespace
	if own.IsZero() || ev.Type == Delete {
		delete(s.owners, self)
	} else {
		s.owners[self] = own
	}
	nsUntil, ownerUntil := s.namespaces[ev.Namespace], s.owners[owner]
	s.mu.Unlock()
	if now.Before(own) {
		return fmt.Sprintf("%s %s on the object", s.key, own.Format(time.RFC3339))
	}
	if now.Before(ownerUntil) {
		return fmt.Sprintf("%s %s on its owner %s", s.key, ownerUntil.Format(time.RFC3339), strings.TrimSuffix(owner, "@"+ev.Namespace))
	}
	if now.Before(nsUntil) {
		return fmt.Sprintf("%s %s on namespace %s", s.key, nsUntil.Format(time.RFC3339), ev.Namespace)
	}
	for _, q := range s.times {
		if q.covers(ev.Namespace, now) {
			return "quiet time " + q.text
		}
	}
	return ""
}

// describe lists the silences for `notifier config check`.
func (s *silencer) describe() []string {
	out := []string{"annotation or label " + s.key + " on an object, its namespace or its owner (when the owner's kind is watched)"}
	for _, q := range s.times {
		out = append(out, "quiet time "+q.text)
	}
	return out
}
