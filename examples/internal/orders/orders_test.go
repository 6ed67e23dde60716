package orders_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sbkit/sbkit/examples/internal/orders"
	"github.com/sbkit/sbkit/serialize"
)

func TestGenerateIsDeterministicAndValid(t *testing.T) {
	now := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)
	a, b := orders.Generate(10, 1001, now), orders.Generate(10, 1001, now)
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Total() != b[i].Total() {
			t.Fatalf("not deterministic at %d", i)
		}
		if err := a[i].Validate(); err != nil {
			t.Errorf("generated order invalid: %v", err)
		}
	}
	if a[0].ID != "order-1001" || a[9].ID != "order-1010" {
		t.Errorf("ids %s..%s", a[0].ID, a[9].ID)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		order orders.Order
		ok    bool
	}{
		{"valid", orders.Order{ID: "o", Items: []orders.Item{{SKU: "A", Quantity: 1}}}, true},
		{"no id", orders.Order{Items: []orders.Item{{SKU: "A", Quantity: 1}}}, false},
		{"no items", orders.Order{ID: "o"}, false},
		{"zero quantity", orders.Order{ID: "o", Items: []orders.Item{{SKU: "A"}}}, false},
	}
	for _, tc := range tests {
		err := tc.order.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, orders.ErrInvalid)) {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
}

func TestNewMessage(t *testing.T) {
	reg, err := serialize.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	o := orders.Generate(1, 7, time.Now())[0]
	msg, err := orders.NewMessage(reg, o)
	if err != nil {
		t.Fatal(err)
	}
	if *msg.MessageID != "order-7" || *msg.ContentType != orders.ContentType || *msg.Subject != orders.Subject {
		t.Errorf("message id %v, content type %v, subject %v", *msg.MessageID, *msg.ContentType, *msg.Subject)
	}
	var back orders.Order
	if err := json.Unmarshal(msg.Body, &back); err != nil || back.ID != o.ID || back.Total() != o.Total() {
		t.Errorf("body %s does not decode back: %v", msg.Body, err)
	}
}

func TestFormatCents(t *testing.T) {
	for c, want := range map[int64]string{0: "$0.00", 5: "$0.05", 12345: "$123.45"} {
		if got := orders.FormatCents(c); got != want {
			t.Errorf("FormatCents(%d) = %q, want %q", c, got, want)
		}
	}
}

func TestPlural(t *testing.T) {
	tests := []struct {
		n    int
		noun string
		want string
	}{{1, "unit", "1 unit"}, {0, "unit", "0 units"}, {3, "unit", "3 units"}, {2, "retry", "2 retries"}, {1, "retry", "1 retry"}}
	for _, tc := range tests {
		if got := orders.Plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
