package main

import (
	"context"
	"log"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/examples/internal/orders"
	"github.com/sbkit/sbkit/serialize"
)

// bulkUnits is the size from which an order is announced before it is packed.
const bulkUnits = 100

// fulfiller is the business logic: it picks and packs an order. It is safe for
// concurrent use.
type fulfiller struct {
	out  *log.Logger
	unit time.Duration // time per unit ordered
}

// fulfil handles one decoded order. An invalid order is dead-lettered at once (retrying
// cannot fix it); a cancelled context (lock lost, expiry, shutdown) abandons the message
// so that it is delivered again.
func (f *fulfiller) fulfil(ctx context.Context, o orders.Order, msg *azservicebus.ReceivedMessage) error {
	if err := o.Validate(); err != nil {
		f.out.Printf("  rejected   %s: %v", msg.MessageID, err)
		return sbkit.DeadLetter("InvalidOrder", err.Error(), err)
	}
	units := 0
	for _, it := range o.Items {
		units += it.Quantity
	}
	if units >= bulkUnits {
		f.out.Printf("  packing    %s: %d units, this takes a while", o.ID, units)
	}
	select {
	case <-time.After(time.Duration(units) * f.unit):
	case <-ctx.Done():
		f.out.Printf("  stopped    %s: %v", o.ID, context.Cause(ctx))
		return context.Cause(ctx)
	}
	f.out.Printf("  fulfilled  %s for %s: %s, %s, delivery %d", o.ID, o.Customer, orders.Plural(units, "unit"),
		orders.FormatCents(o.Total()), msg.DeliveryCount)
	return nil
}

// undecodable reports a message that serialize dead-letters because no decoder could
// read it.
func (f *fulfiller) undecodable(_ context.Context, e *serialize.UndecodableError) {
	f.out.Printf("  unreadable %s: dead-lettered: %v", e.Message.MessageID, e.Err)
}
