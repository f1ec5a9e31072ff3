package notifier

import "slices"

// overflow holds, per object, the changes a sink's full queue could not
// take, merged so that it never holds more than two events per object: a
// delete, then a create of an object of the same name (with its later
// updates). It is bounded by the objects the notifier watches, not by the
// changes they make. The worker moves its events to the queue, oldest
// object first, as the queue has room.
type overflow struct {
	order []string            // object keys, by first overflow
	byKey map[string][]*Event // in order; at most 2
}

func overflowKey(ev *Event) string {
	return ev.Resource + "\x00" + ev.Namespace + "\x00" + ev.Name
}

func (o *overflow) len() int { return len(o.order) }

// add sets ev aside, merged with the object's earlier changes still
// waiting. It returns the events the merge took in: their sink reference
// is released as carried (see tracker.carry), never committed alone.
func (o *overflow) add(ev *Event) (carried []*Event) {
	if o.byKey == nil {
		o.byKey = map[string][]*Event{}
	}
	k := overflowKey(ev)
	evs, ok := o.byKey[k]
	if !ok {
		o.order = append(o.order, k)
	}
	evs, carried = coalesce(evs, ev)
	if len(evs) == 0 {
		delete(o.byKey, k)
		o.order = slices.DeleteFunc(o.order, func(x string) bool { return x == k })
	} else {
		o.byKey[k] = evs
	}
	return carried
}

// pop takes the oldest object's first waiting event.
func (o *overflow) pop() (*Event, bool) {
	if len(o.order) == 0 {
		return nil, false
	}
	k := o.order[0]
	evs := o.byKey[k]
	ev := evs[0]
	if len(evs) == 1 {
		delete(o.byKey, k)
		o.order = o.order[1:]
	} else {
		o.byKey[k] = evs[1:]
	}
	return ev, true
}

// coalesce appends ev to the waiting events of its object, merging where
// one notification of the latest state tells the receiver what both
// would have:
//
//	create + update → create of the latest state
//	update + update → update of the latest state; changes of both, old object of the first
//	create + delete → nothing (the receiver never heard of the object)
//	update + delete → delete
//	delete + delete → the first delete
//	delete + create → both (another object of the same name)
//
// carried are the events merged away (for create + delete, both).
func coalesce(evs []*Event, ev *Event) (out []*Event, carried []*Event) {
	if len(evs) == 0 {
		return []*Event{ev}, nil
	}
	last := evs[len(evs)-1]
	head := evs[: len(evs)-1 : len(evs)-1]
	merged := *ev
	switch {
	case last.Type == Delete && ev.Type == Delete:
		return evs, []*Event{ev}
	case last.Type == Delete:
		return append(evs[:len(evs):len(evs)], ev), nil
	case last.Type == Create && ev.Type == Update:
		merged.Type, merged.Changes, merged.OldObject = Create, nil, nil
	case last.Type == Create && ev.Type == Delete:
		return head, []*Event{last, ev}
	case last.Type == Update && ev.Type == Update:
		merged.Changes = unionSorted(last.Changes, ev.Changes)
		merged.OldObject = last.OldObject
	case last.Type == Update && ev.Type == Delete:
	default: // a create after a create or an update: cannot happen without a delete between
		return append(evs[:len(evs):len(evs)], ev), nil
	}
	return append(head, &merged), []*Event{last}
}

// unionSorted merges two sorted lists of paths, without duplicates. A
// capped list ends in "...", kept last.
func unionSorted(a, b []string) []string {
	capped := false
	var out []string
	for _, l := range [][]string{a, b} {
		for _, p := range l {
			if p == "..." {
				capped = true
				continue
			}
			out = append(out, p)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if capped {
		out = append(out, "...")
	}
	return out
}
