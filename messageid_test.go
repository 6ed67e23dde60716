package sbkit_test

import (
	"errors"
	"regexp"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewMessageIDIsUniqueV4(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := sbkit.NewMessageID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("%q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestEnsureMessageID(t *testing.T) {
	if _, err := sbkit.EnsureMessageID(nil); !errors.Is(err, sbkit.ErrNilMessage) {
		t.Fatalf("nil message: err = %v", err)
	}
	for _, empty := range []*string{nil, ptr("")} {
		msg := &azservicebus.Message{MessageID: empty}
		id, err := sbkit.EnsureMessageID(msg)
		if err != nil || !uuidV4.MatchString(id) || *msg.MessageID != id {
			t.Fatalf("EnsureMessageID = %q, %v; message id %v", id, err, msg.MessageID)
		}
		again, _ := sbkit.EnsureMessageID(msg)
		if again != id {
			t.Fatalf("second call changed the id: %q -> %q (a retry would not be a duplicate)", id, again)
		}
	}
	msg := &azservicebus.Message{MessageID: ptr("order-42")}
	if id, _ := sbkit.EnsureMessageID(msg); id != "order-42" {
		t.Fatalf("caller's id replaced: %q", id)
	}
}

func TestBatchSenderRejectsForeignBatch(t *testing.T) {
	bs := sbkit.NewBatchSender(nil)
	err := bs.SendBatch(t.Context(), fakeBatch{}, nil)
	if !errors.Is(err, sbkit.ErrForeignBatch) {
		t.Fatalf("err = %v, want ErrForeignBatch", err)
	}
}

type fakeBatch struct{}

func (fakeBatch) AddMessage(*azservicebus.Message, *azservicebus.AddMessageOptions) error { return nil }
func (fakeBatch) NumMessages() int32                                                      { return 0 }
func (fakeBatch) NumBytes() uint64                                                        { return 0 }
