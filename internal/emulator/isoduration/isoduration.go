// Package isoduration reads and writes ISO 8601 durations as Service Bus uses them: the
// administration API's LockDuration, DefaultMessageTimeToLive and the like ("PT1M",
// "P14D", "P10675199DT2H48M5.4775807S" for .NET's TimeSpan.MaxValue), and the
// emulator's Config.json, which copies them.
package isoduration

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// unit is one part of a duration: its letter and length.
type unit struct {
	letter   byte
	length   time.Duration
	calendar bool // its length varies (years, months): Parse refuses it
}

const day = 24 * time.Hour

// dateUnits and timeUnits are the parts before and after T, in the order they must come.
var (
	dateUnits = []unit{{'Y', 365 * day, true}, {'M', 30 * day, true}, {'W', 7 * day, false}, {'D', day, false}}
	timeUnits = []unit{{'H', time.Hour, false}, {'M', time.Minute, false}, {'S', time.Second, false}}
)

// Parse parses an ISO 8601 duration of parts with a fixed length:
// P[nW][nD][T[nH][nM][n[.f]S]], with at least one part, each at most once and in this
// order, digits only (no sign), and a fraction on the seconds only (rounded to the
// nanosecond). Letters are upper case. A duration beyond time.Duration's range (such as
// TimeSpan.MaxValue) returns the largest time.Duration and capped true, never an
// overflowed value.
func Parse(s string) (d time.Duration, capped bool, err error) { return parse(s, false) }

// ParseCalendar is Parse that also takes years (nY) and months (nM before T), as 365 and
// 30 days: ISO 8601 allows them, and .NET's TimeSpan reads them so; the service never
// sends them.
func ParseCalendar(s string) (d time.Duration, capped bool, err error) { return parse(s, true) }

func parse(s string, calendar bool) (time.Duration, bool, error) {
	bad := func() (time.Duration, bool, error) {
		return 0, false, fmt.Errorf("isoduration: %q is not an ISO 8601 duration such as PT1M or P1DT2H", s)
	}
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" {
		return bad()
	}
	var total time.Duration
	capped, seen, inTime := false, false, false
	units := dateUnits
	for rest != "" {
		if rest[0] == 'T' {
			if inTime || len(rest) == 1 {
				return bad() // a second T, or nothing after it
			}
			inTime, units, rest = true, timeUnits, rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return bad()
		}
		k := 0
		for k < len(units) && units[k].letter != rest[i] {
			k++
		}
		if k == len(units) || units[k].calendar && !calendar {
			return bad() // unknown, out of order, repeated, or a calendar part
		}
		u := units[k]
		units = units[k+1:]
		v, over, ok := value(rest[:i], u)
		if !ok {
			return bad()
		}
		if over || v > math.MaxInt64-total {
			capped = true
		} else {
			total += v
		}
		seen = true
		rest = rest[i+1:]
	}
	if !seen {
		return bad()
	}
	if capped {
		return time.Duration(math.MaxInt64), true, nil
	}
	return total, false, nil
}

// value returns num (digits, and for seconds a fraction) times u's length, and whether
// it is beyond time.Duration's range. ok is false for a malformed number.
func value(num string, u unit) (v time.Duration, over, ok bool) {
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" || hasFrac && (frac == "" || u.letter != 'S' || strings.Contains(frac, ".")) {
		return 0, false, false
	}
	n, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || n > uint64(math.MaxInt64/u.length) {
		return 0, true, true // all digits: only too large
	}
	v = time.Duration(n) * u.length
	if hasFrac {
		ns := fracNanos(frac)
		if ns > math.MaxInt64-v {
			return 0, true, true
		}
		v += ns
	}
	return v, false, true
}

// fracNanos returns the fraction of a second that the digits after the point write, in
// nanoseconds, rounded half up.
func fracNanos(digits string) time.Duration {
	var ns time.Duration
	for i := range 9 {
		ns *= 10
		if i < len(digits) {
			ns += time.Duration(digits[i] - '0')
		}
	}
	if len(digits) > 9 && digits[9] >= '5' {
		ns++
	}
	return ns
}

// Format writes d as the service does: days, hours, minutes and seconds with up to
// seven fractional digits (100 ns ticks), omitting zero parts ("PT1M", "P14D", "PT4H",
// "PT0S" for zero). Negative durations format as PT0S.
func Format(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	days := d / day
	d -= days * day
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	var b strings.Builder
	b.WriteByte('P')
	if days > 0 {
		fmt.Fprintf(&b, "%dD", days)
	}
	if h > 0 || m > 0 || d > 0 {
		b.WriteByte('T')
	}
	if h > 0 {
		fmt.Fprintf(&b, "%dH", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dM", m)
	}
	if d > 0 {
		secs := d / time.Second
		ticks := (d % time.Second) / 100
		if ticks == 0 {
			fmt.Fprintf(&b, "%dS", secs)
		} else {
			frac := strings.TrimRight(fmt.Sprintf("%07d", ticks), "0")
			fmt.Fprintf(&b, "%d.%sS", secs, frac)
		}
	}
	return b.String()
}
