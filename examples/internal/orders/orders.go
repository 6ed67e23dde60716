// Package orders is the domain of the example programs: the order a shop's order
// service publishes and its worker fulfils, encoded as JSON.
package orders

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/serialize"
)

// ContentType is the content type of an order message.
const ContentType = "application/json; charset=utf-8"

// Subject is the Subject (label) of an order message.
const Subject = "order.created"

// Item is one line of an order.
type Item struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

// Order is what the producer publishes and the worker fulfils.
type Order struct {
	ID       string    `json:"id"`
	Customer string    `json:"customer"`
	Items    []Item    `json:"items"`
	PlacedAt time.Time `json:"placed_at"`
}

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("orders: invalid order")

// Validate reports what makes o unfulfillable: no ID, no items, or a quantity that is
// not positive.
func (o Order) Validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("%w: no id", ErrInvalid)
	case len(o.Items) == 0:
		return fmt.Errorf("%w: %s has no items", ErrInvalid, o.ID)
	}
	for _, it := range o.Items {
		if it.Quantity <= 0 {
			return fmt.Errorf("%w: %s: quantity %d of %s", ErrInvalid, o.ID, it.Quantity, it.SKU)
		}
	}
	return nil
}

// Total returns the order's total in cents.
func (o Order) Total() int64 {
	var t int64
	for _, it := range o.Items {
		t += int64(it.Quantity) * it.PriceCents
	}
	return t
}

var (
	customers = []string{"ada", "grace", "alan", "edsger", "barbara", "ken", "rob"}
	catalogue = []Item{{"KB-101", 0, 4999}, {"MS-202", 0, 2599}, {"MON-27", 0, 22900}, {"USB-C", 0, 1299}}
)

// Generate returns n deterministic orders numbered from first, placed at now.
func Generate(n, first int, now time.Time) []Order {
	out := make([]Order, n)
	for i := range out {
		k := first + i
		items := make([]Item, 1+k%3)
		for j := range items {
			items[j] = catalogue[(k+j)%len(catalogue)]
			items[j].Quantity = 1 + (k+j)%4
		}
		out[i] = Order{
			ID:       fmt.Sprintf("order-%d", k),
			Customer: customers[k%len(customers)],
			Items:    items,
			PlacedAt: now.UTC().Truncate(time.Second),
		}
	}
	return out
}

// NewMessage encodes o as a JSON message whose MessageID is the order's ID, so that a
// resent order is recognised as a duplicate by the broker and by the worker.
func NewMessage(reg *serialize.Registry, o Order) (*azservicebus.Message, error) {
	msg, err := reg.Encode(o, ContentType, nil)
	if err != nil {
		return nil, fmt.Errorf("orders: encode %s: %w", o.ID, err)
	}
	id, subject := o.ID, Subject
	msg.MessageID, msg.Subject = &id, &subject
	return msg, nil
}

// Plural formats a count and a noun for the programs' output: "1 unit", "3 units",
// "2 retries".
func Plural(n int, noun string) string {
	switch {
	case n == 1:
		return fmt.Sprintf("1 %s", noun)
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// FormatCents formats an amount in cents as dollars: 12345 -> "$123.45".
func FormatCents(c int64) string {
	return fmt.Sprintf("$%d.%02d", c/100, c%100)
}
