package serialize_test

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/serialize"
)

func mustNew(t testing.TB, opts *serialize.Options) *serialize.Registry {
	t.Helper()
	reg, err := serialize.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return reg
}

func received(contentType string, body []byte) *azservicebus.ReceivedMessage {
	msg := &azservicebus.ReceivedMessage{Body: body, MessageID: "m1"}
	if contentType != "" {
		msg.ContentType = &contentType
	}
	return msg
}

type order struct {
	ID    string  `json:"id" xml:"id"`
	Qty   int     `json:"qty" xml:"qty"`
	Price float64 `json:"price,omitempty" xml:"price,omitempty"`
}
