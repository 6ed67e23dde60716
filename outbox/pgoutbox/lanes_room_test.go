package pgoutbox

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// TestReadyOrderGoesAsTheWindowHasRoom: a ready order with more waiting rows than the
// sender's window has room for gives them over in portions, each no larger than the
// room its earlier portion left, so that no row waits in the sender for room (in its
// lane, or in SendAsync while the round holds sendMu). Counted by messages (window 4)
// and by bytes (room for two rows).
func TestReadyOrderGoesAsTheWindowHasRoom(t *testing.T) {
	body := make([]byte, 100)
	size := sbkit.MessageSize(&azservicebus.Message{MessageID: new("m"), Body: body})
	for _, tc := range []struct {
		name    string
		bytes   int64
		ttl     time.Duration
		portion int
	}{
		{"messages", 1 << 20, 0, 4},
		{"bytes", 2*size + size/2, 0, 2},
		// The sender counts a message after its DefaultTTL, which makes it larger: three
		// fit without one, two with it.
		{"bytes after the sender's DefaultTTL", 3 * size, time.Hour, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &run{r: &Relay{window: 4, windowBytes: tc.bytes, defaultTTL: tc.ttl}, given: map[string]int{}, givenBytes: map[string]int64{}}
			u.handing = true // the test takes the rows itself: no handOver goroutine
			o := &order{dest: "q", okey: "s:x"}
			for i := range 10 {
				o.waiting = append(o.waiting, &row{id: int64(i + 1), destination: "q", order: o,
					ctx: context.Background(), msg: &azservicebus.Message{MessageID: new("m"), Body: body}})
			}
			o.ready = true
			u.ready = []*order{o}
			next := int64(1)
			for left := 10; left > 0; {
				u.lmu.Lock()
				rows, ended := u.takeReadyLocked()
				given := u.given["q"]
				u.lmu.Unlock()
				want := min(tc.portion, left)
				if len(ended) != 0 || len(rows) != want {
					t.Fatalf("took %d rows (%d ended), want %d of the %d waiting", len(rows), len(ended), want, left)
				}
				if given > 4 || u.givenBytes["q"] > tc.bytes {
					t.Fatalf("given %d rows, %d bytes: over the window (4, %d)", given, u.givenBytes["q"], tc.bytes)
				}
				for _, rw := range rows {
					if rw.id != next {
						t.Fatalf("took row %d, want %d (id order)", rw.id, next)
					}
					next++
				}
				u.lmu.Lock()
				again, _ := u.takeReadyLocked()
				u.lmu.Unlock()
				if len(again) != 0 {
					t.Fatalf("took %d more rows while the order's earlier rows are in the sender", len(again))
				}
				for _, rw := range rows {
					u.left(rw) // their outcomes: the order is ready again
				}
				left -= len(rows)
			}
			if len(u.given) != 0 || len(u.givenBytes) != 0 || len(u.ready) != 0 {
				t.Fatalf("after every outcome: given %v, bytes %v, ready %d", u.given, u.givenBytes, len(u.ready))
			}
		})
	}
}
