package sbkit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// A message scheduled 5 minutes ahead with a 10 minute TTL expires 15 minutes from now:
// its TTL clock starts when it is enqueued, not when it is sent.
func ExampleExpiresAt_scheduled() {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	msg := &azservicebus.Message{Body: []byte("reminder")}
	_ = sbkit.SetSchedule(msg, now.Add(5*time.Minute))
	_ = sbkit.SetTTL(msg, 10*time.Minute)

	enqueued := sbkit.EnqueueTime(msg, now)
	ttl := sbkit.EffectiveTTL(msg.TimeToLive, time.Hour) // the queue's DefaultTimeToLive is 1h
	fmt.Println(sbkit.ExpiresAt(enqueued, ttl).Sub(now))
	// Output: 15m0s
}

// A TTL longer than the entity's default is capped to it without an error.
func ExampleEffectiveTTL() {
	day := 24 * time.Hour
	fmt.Println(sbkit.EffectiveTTL(&day, time.Hour))
	fmt.Println(sbkit.EffectiveTTL(nil, 0) == sbkit.MaxTTL)
	// Output:
	// 1h0m0s
	// true
}

// A handler asks for a settlement through what it returns.
func ExampleSettlementOf() {
	handler := func(_ context.Context, msg *azservicebus.ReceivedMessage) error {
		if len(msg.Body) == 0 {
			return sbkit.DeadLetter("EmptyBody", "an order needs a body", nil)
		}
		return errors.New("inventory service unavailable")
	}
	for _, body := range []string{"", "order"} {
		action, _ := sbkit.SettlementOf(handler(context.Background(), &azservicebus.ReceivedMessage{Body: []byte(body)}))
		fmt.Println(action)
	}
	// Output:
	// deadletter
	// abandon
}
