package atom

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxTimeSpan is .NET's TimeSpan.MaxValue as the service writes it: the "infinite"
// duration of DefaultMessageTimeToLive and AutoDeleteOnIdle (SDK live test
// TestAdminClient_QueueWithMaxValues).
const MaxTimeSpan = "P10675199DT2H48M5.4775807S"

// ParseDuration parses an ISO 8601 duration of the form the service uses,
// P[nD][T[nH][nM][n[.f]S]] (also nW and the Y/M date parts as 365 and 30 days, which the
// service does not send but the spec allows). A duration beyond [time.Duration]'s range
// (such as MaxTimeSpan) returns the largest [time.Duration] and capped true.
func ParseDuration(s string) (d time.Duration, capped bool, err error) {
	bad := func() (time.Duration, bool, error) {
		return 0, false, fmt.Errorf("atom: %q is not an ISO 8601 duration", s)
	}
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" {
		return bad()
	}
	var total float64 // seconds
	inTime := false
	seen := false
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return bad()
			}
			inTime = true
			rest = rest[1:]
			if rest == "" {
				return bad()
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return bad()
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || (rest[i] != 'S' && strings.Contains(rest[:i], ".")) {
			return bad()
		}
		var unit float64
		switch u := rest[i]; {
		case !inTime && u == 'Y':
			unit = 365 * 86400
		case !inTime && u == 'M':
			unit = 30 * 86400
		case !inTime && u == 'W':
			unit = 7 * 86400
		case !inTime && u == 'D':
			unit = 86400
		case inTime && u == 'H':
			unit = 3600
		case inTime && u == 'M':
			unit = 60
		case inTime && u == 'S':
			unit = 1
		default:
			return bad()
		}
		total += n * unit
		seen = true
		rest = rest[i+1:]
	}
	if !seen {
		return bad()
	}
	if total*1e9 >= math.MaxInt64 {
		return time.Duration(math.MaxInt64), true, nil
	}
	return time.Duration(math.Round(total * 1e9)), false, nil
}

// FormatDuration writes d as the service does: days, hours, minutes and seconds with up
// to seven fractional digits (100 ns ticks), omitting zero parts ("PT1M", "P14D",
// "PT4H", "PT0S" for zero). Negative durations format as PT0S.
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
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
