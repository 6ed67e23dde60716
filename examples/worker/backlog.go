package main

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/examples/internal/orders"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/sender"
	"github.com/sbkit/sbkit/serialize"
)

// fillBacklog queues, on the in-memory broker, what a producer could have left there:
// ten good orders, a second copy of one of them (a producer retry), a malformed JSON
// body, an order with no items, a flash-sale order whose 1ms TTL runs out in the queue,
// and a bulk order that takes longer than the queue's lock duration. It sends them
// through a sender with hook, which traces each send as a producer would.
func fillBacklog(ctx context.Context, conn *sbenv.Conn, hook sender.Hook) error {
	reg, err := serialize.New(nil)
	if err != nil {
		return err
	}
	now := time.Now()
	var msgs []*azservicebus.Message
	add := func(o orders.Order, edit func(*azservicebus.Message)) error {
		m, err := orders.NewMessage(reg, o)
		if err != nil {
			return err
		}
		if edit != nil {
			edit(m)
		}
		msgs = append(msgs, m)
		return nil
	}
	good := orders.Generate(10, 2001, now)
	for _, o := range good {
		if err := add(o, nil); err != nil {
			return err
		}
	}
	bulk := orders.Order{ID: "order-2011", Customer: "margaret", PlacedAt: now,
		Items: []orders.Item{{SKU: "USB-C", Quantity: 150, PriceCents: 1299}}}
	invalid := orders.Order{ID: "order-2012", Customer: "dennis", PlacedAt: now}
	flash := orders.Generate(1, 2013, now)[0]
	steps := []error{
		add(good[2], nil), // the duplicate: same MessageID as order-2003
		add(orders.Order{ID: "order-2014"}, func(m *azservicebus.Message) {
			m.Body = []byte(`{"id":"order-2014","customer":"linus","items":[{"sku":"KB-1`) // truncated
		}),
		add(invalid, nil),
		add(flash, func(m *azservicebus.Message) { ttl := time.Millisecond; m.TimeToLive = &ttl }),
		add(bulk, nil),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}

	dst, err := conn.NewSender()
	if err != nil {
		return err
	}
	defer dst.Close(context.WithoutCancel(ctx))
	s, err := sender.New(dst, &sender.Options{Hooks: []sender.Hook{hook}})
	if err != nil {
		return err
	}
	if err := s.SendAll(ctx, msgs); err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("backlog: %w", err)
	}
	return s.Close(ctx)
}
