package serialize_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sbkit/sbkit/serialize"
)

func BenchmarkDecode(b *testing.B) {
	reg := mustNew(b, nil)
	if err := reg.SetFallbacks("application/xml", "application/json"); err != nil {
		b.Fatal(err)
	}
	pb, _ := structpb.NewStruct(map[string]any{"id": "a1", "qty": 3})
	pbBytes, _ := proto.Marshal(pb)
	json := []byte(`{"id":"a1","qty":3,"price":9.5}`)
	b.Run("json", func(b *testing.B) {
		msg := received("application/json; charset=utf-8", json)
		for b.Loop() {
			if _, err := serialize.Decode[order](reg, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-after-failed-xml-fallback", func(b *testing.B) {
		msg := received("", json)
		for b.Loop() {
			if _, err := serialize.Decode[order](reg, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		msg := received("application/x-protobuf", pbBytes)
		for b.Loop() {
			if _, err := serialize.Decode[*structpb.Struct](reg, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("all-fail", func(b *testing.B) {
		msg := received("application/json", []byte("garbage"))
		for b.Loop() {
			if _, err := serialize.Decode[order](reg, msg); err == nil {
				b.Fatal("decoded garbage")
			}
		}
	})
}

func BenchmarkHandler(b *testing.B) {
	reg := mustNew(b, nil)
	h, _ := serialize.Handler(reg, func(context.Context, order, *azservicebus.ReceivedMessage) error { return nil }, nil)
	msg := received("application/json", []byte(`{"id":"a1","qty":3}`))
	ctx := context.Background()
	for b.Loop() {
		if err := h(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}
