package isoduration

import (
	"math"
	"testing"
	"time"
)

// Durations as the SDK's live tests send them and expect them back, and as Microsoft's
// emulator configuration writes them.
func TestParseAndFormat(t *testing.T) {
	for _, tc := range []struct {
		s      string
		d      time.Duration
		capped bool
		back   string
	}{
		{"PT45S", 45 * time.Second, false, "PT45S"},
		{"PT1M", time.Minute, false, "PT1M"},
		{"PT4H", 4 * time.Hour, false, "PT4H"},
		{"PT1H30M", 90 * time.Minute, false, "PT1H30M"},
		{"P14D", 14 * 24 * time.Hour, false, "P14D"},
		{"P0DT0H1M0S", time.Minute, false, "PT1M"},
		{"P1DT2H3M4.5S", 26*time.Hour + 3*time.Minute + 4500*time.Millisecond, false, "P1DT2H3M4.5S"},
		{"PT0.5S", 500 * time.Millisecond, false, "PT0.5S"},
		{"PT0.0000001S", 100, false, "PT0.0000001S"},
		{"PT0.0000000015S", 2, false, ""}, // rounded to the nanosecond
		{"PT0S", 0, false, "PT0S"},
		{"P1W", 7 * 24 * time.Hour, false, "P7D"},
		// Beyond time.Duration's range: the longest one, not an overflowed value.
		{"P10675199DT2H48M5.4775807S", math.MaxInt64, true, ""},
		{"P106751DT23H47M16.854775807S", math.MaxInt64, false, ""},
		{"P106751DT23H47M16.855S", math.MaxInt64, true, ""},
		{"P200000D", math.MaxInt64, true, ""},
		{"PT99999999999999999999S", math.MaxInt64, true, ""},
		{"P15250W2D", math.MaxInt64, true, ""},
	} {
		d, capped, err := Parse(tc.s)
		if err != nil || d != tc.d || capped != tc.capped {
			t.Errorf("Parse(%q) = %v, %v, %v; want %v, %v", tc.s, d, capped, err, tc.d, tc.capped)
		}
		if tc.back != "" && Format(d) != tc.back {
			t.Errorf("Format(%v) = %q, want %q", d, Format(d), tc.back)
		}
	}
	for _, bad := range []string{"", "P", "PT", "45S", "PT45", "PTS", "P1H", "PT1D", "PT1.5M", "P1.5D", "P1DT",
		"PT1S2", "PTT1S", "Pxyz", "PT-1S", "pt1m", "PT1M1H", "P1D1D", "PT.5S", "PT5.S", "PT1.2.3S", "1 minute", "P1Y", "P1M"} {
		if d, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, d)
		}
	}
}

// ParseCalendar also takes years and months, of 365 and 30 days.
func TestParseCalendar(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"P1Y":      365 * 24 * time.Hour,
		"P2M":      60 * 24 * time.Hour,
		"P1Y1M1D":  396 * 24 * time.Hour,
		"P1MT1M":   30*24*time.Hour + time.Minute,
		"PT1M":     time.Minute,
		"P300000Y": math.MaxInt64,
	} {
		if d, _, err := ParseCalendar(s); err != nil || d != want {
			t.Errorf("ParseCalendar(%q) = %v, %v; want %v", s, d, err, want)
		}
	}
	for _, bad := range []string{"P1M1Y", "PT1Y", "P1Y1Y"} {
		if _, _, err := ParseCalendar(bad); err == nil {
			t.Errorf("ParseCalendar(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"PT1M", "P1DT2H3M4.5S", "P10675199DT2H48M5.4775807S", "P1Y2M3W4DT5H6M7.8S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, capped, err := ParseCalendar(s)
		if err != nil {
			return
		}
		if d < 0 || capped && d != math.MaxInt64 {
			t.Fatalf("ParseCalendar(%q) = %v, %v", s, d, capped)
		}
		if capped {
			return
		}
		// What Format writes, Parse reads back, to the 100 ns tick.
		back, _, err := Parse(Format(d))
		if err != nil || back != d/100*100 {
			t.Fatalf("Parse(Format(%v) = %q) = %v, %v", d, Format(d), back, err)
		}
	})
}
