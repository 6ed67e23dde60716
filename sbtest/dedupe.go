package sbtest

import "time"

// dupDetector remembers the MessageIDs accepted within a window. Not safe for concurrent
// use: its owner's mutex guards it. Pruning is amortised O(1) per send.
type dupDetector struct {
	window time.Duration
	seen   map[string]time.Time
	order  []dupEntry
}

type dupEntry struct {
	id string
	at time.Time
}

// accept reports whether a message with id sent at now is new, and remembers it.
func (d *dupDetector) accept(id string, now time.Time) bool {
	if d.window <= 0 || id == "" {
		return true
	}
	for len(d.order) > 0 && !now.Before(d.order[0].at.Add(d.window)) {
		e := d.order[0]
		d.order = d.order[1:]
		if at, ok := d.seen[e.id]; ok && at.Equal(e.at) {
			delete(d.seen, e.id)
		}
	}
	if at, ok := d.seen[id]; ok && now.Before(at.Add(d.window)) {
		return false
	}
	if d.seen == nil {
		d.seen = make(map[string]time.Time)
	}
	d.seen[id] = now
	d.order = append(d.order, dupEntry{id, now})
	return true
}
