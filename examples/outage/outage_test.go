package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sbkit/sbkit/sbtest"
)

// TestOutage runs the comparison at scale 1 in virtual time (1,000 messages, a 30 s
// outage, the examples' realistic latency) and prints the table the README shows. Delayed
// redelivery dead-letters nothing where plain abandon dead-letters almost everything, and
// the breaker cuts the calls made during the outage.
func TestOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := config{n: 1000, outage: 30 * time.Second, callTime: 5 * time.Millisecond, concurrency: 8, scale: 1,
			latency: sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}, limit: 30 * time.Minute}
		byMode := map[string]result{}
		var results []result
		for _, m := range modes {
			r, err := runMode(context.Background(), m, c)
			if err != nil {
				t.Fatal(err)
			}
			byMode[m] = r
			results = append(results, r)
		}
		var out bytes.Buffer
		printTable(&out, results, c.outage)
		t.Logf("\n%s", out.String())
		if r := byMode["abandon"]; r.deadLettered < c.n/2 {
			t.Errorf("plain abandon dead-lettered %d of %d: the outage should have spent their deliveries", r.deadLettered, c.n)
		}
		for _, m := range []string{"redelivery", "redelivery+breaker"} {
			if r := byMode[m]; r.deadLettered != 0 || r.completed != int64(c.n) {
				t.Errorf("%s: %d dead-lettered, %d completed; want 0 and %d", m, r.deadLettered, r.completed, c.n)
			}
		}
		if b, r := byMode["redelivery+breaker"], byMode["redelivery"]; b.callsDuringOutage*5 > r.callsDuringOutage || b.breakerOpened == 0 {
			t.Errorf("the breaker made %d calls during the outage (opened %d times), redelivery alone %d", b.callsDuringOutage, b.breakerOpened, r.callsDuringOutage)
		}
	})
}

func TestRunFlags(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-n", "0"}, &out); err == nil {
		t.Error("-n 0 accepted")
	}
}

// TestOutageWire runs a smaller comparison in real time, ten times as fast, with the real
// azservicebus client talking AMQP to sbtest.NewServer: delayed redelivery dead-letters
// nothing there either.
func TestOutageWire(t *testing.T) {
	if testing.Short() {
		t.Skip("runs in real time (about 20 s)")
	}
	c := config{n: 200, outage: 30 * time.Second, callTime: 5 * time.Millisecond, concurrency: 8, scale: 0.1,
		limit: 10 * time.Minute, wire: true}
	var results []result
	for _, m := range modes {
		r, err := runMode(context.Background(), m, c)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
		if m == "redelivery" || m == "redelivery+breaker" {
			if r.deadLettered != 0 || r.completed != int64(c.n) {
				t.Errorf("%s: %d dead-lettered, %d completed; want 0 and %d", m, r.deadLettered, r.completed, c.n)
			}
		}
	}
	var out bytes.Buffer
	printTable(&out, results, c.outage)
	t.Logf("\n%s", out.String())
}
