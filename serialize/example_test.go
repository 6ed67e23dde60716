package serialize_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/serialize"
)

// formCodec is a toy codec for application/x-www-form-urlencoded bodies. A MessagePack,
// CBOR or Avro codec plugs in the same way: a name and the library's Marshal and
// Unmarshal.
type formCodec struct{}

func (formCodec) Name() string { return "form" }

func (formCodec) Marshal(v any) ([]byte, error) {
	values, ok := v.(url.Values)
	if !ok {
		return nil, fmt.Errorf("%w: form encodes url.Values, got %T", serialize.ErrUnsupportedType, v)
	}
	return []byte(values.Encode()), nil
}

func (formCodec) Unmarshal(data []byte, v any) error {
	target, ok := v.(*url.Values)
	if !ok {
		return fmt.Errorf("%w: form decodes into *url.Values, got %T", serialize.ErrUnsupportedType, v)
	}
	values, err := url.ParseQuery(string(data))
	*target = values
	return err
}

// Registering a codec for another format takes one call.
func ExampleRegistry_Register() {
	reg, _ := serialize.New(nil)
	_ = reg.Register("application/x-www-form-urlencoded", formCodec{})

	msg, _ := reg.Encode(url.Values{"sku": {"A-1"}, "qty": {"3"}}, "application/x-www-form-urlencoded", nil)
	fmt.Println(*msg.ContentType, string(msg.Body))

	got, err := serialize.Decode[url.Values](reg, &azservicebus.ReceivedMessage{Body: msg.Body, ContentType: msg.ContentType})
	fmt.Println(got.Get("sku"), got.Get("qty"), err)
	// Output:
	// application/x-www-form-urlencoded qty=3&sku=A-1
	// A-1 3 <nil>
}

type Order struct {
	ID  string `json:"id" xml:"id"`
	Qty int    `json:"qty" xml:"qty"`
}

// Encode sets the body, the content type and, when configured, a message-type property.
func ExampleRegistry_Encode() {
	reg, _ := serialize.New(&serialize.Options{MessageTypeProperty: "MessageType"})
	msg, err := reg.Encode(Order{ID: "o-1", Qty: 2}, "application/vnd.acme.order+json", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(*msg.ContentType)
	fmt.Println(string(msg.Body))
	fmt.Println(msg.ApplicationProperties["MessageType"])
	// Output:
	// application/vnd.acme.order+json
	// {"id":"o-1","qty":2}
	// serialize_test.Order
}

// Decode picks the codec by content type, whatever its spelling and parameters.
func ExampleDecode() {
	reg, _ := serialize.New(nil)
	for _, m := range []struct{ contentType, body string }{
		{"application/json; charset=utf-8", `{"id":"j","qty":1}`},
		{"APPLICATION/VND.ACME.ORDER+JSON", `{"id":"v","qty":2}`},
		{"text/xml", `<Order><id>x</id><qty>3</qty></Order>`},
	} {
		o, err := serialize.Decode[Order](reg, &azservicebus.ReceivedMessage{ContentType: &m.contentType, Body: []byte(m.body)})
		fmt.Printf("%s -> %+v %v\n", m.contentType, o, err)
	}
	// Output:
	// application/json; charset=utf-8 -> {ID:j Qty:1} <nil>
	// APPLICATION/VND.ACME.ORDER+JSON -> {ID:v Qty:2} <nil>
	// text/xml -> {ID:x Qty:3} <nil>
}

// When the content type is missing or wrong, the fallbacks are tried in order.
func ExampleRegistry_SetFallbacks() {
	reg, _ := serialize.New(nil)
	_ = reg.SetFallbacks("application/json", "application/xml")

	ct := "application/json" // mislabelled: the body is XML from an older producer
	o, err := serialize.Decode[Order](reg, &azservicebus.ReceivedMessage{ContentType: &ct, Body: []byte(`<Order><id>old</id></Order>`)})
	fmt.Printf("%+v %v\n", o, err)

	_, err = serialize.Decode[Order](reg, &azservicebus.ReceivedMessage{Body: []byte(`garbage`)})
	var derr *serialize.DecodeError
	if errors.As(err, &derr) {
		for _, a := range derr.Attempts {
			fmt.Println(a)
		}
	}
	// Output:
	// {ID:old Qty:0} <nil>
	// content-type: serialize: no content type
	// fallback "application/json" (json): invalid character 'g' looking for beginning of value
	// fallback "application/xml" (xml): serialize: no XML element in body: unexpected EOF
}

// A typed handler: the processor completes what it returns nil for and dead-letters, at
// once, what cannot be decoded.
func ExampleHandler() {
	reg, _ := serialize.New(nil)
	h, err := serialize.Handler(reg, func(ctx context.Context, o Order, msg *azservicebus.ReceivedMessage) error {
		fmt.Printf("processing %s x%d\n", o.ID, o.Qty)
		return nil
	}, nil)
	if err != nil {
		panic(err)
	}

	ct := "application/json"
	good := &azservicebus.ReceivedMessage{ContentType: &ct, Body: []byte(`{"id":"o-7","qty":3}`)}
	bad := &azservicebus.ReceivedMessage{ContentType: &ct, Body: []byte(`{"id":`)}

	for _, msg := range []*azservicebus.ReceivedMessage{good, bad} {
		action, se := sbkit.SettlementOf(h(context.Background(), msg))
		fmt.Println(action)
		if se != nil {
			fmt.Println(se.Reason)
			fmt.Println(se.Description)
		}
	}
	// Output:
	// processing o-7 x3
	// complete
	// deadletter
	// DeserializationFailed
	// 1 attempt(s) failed: content-type "application/json" (json): unexpected end of JSON input
}
