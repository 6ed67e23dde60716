package sbkit

import (
	"crypto/rand"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/internal/guid"
)

// ErrNilMessage is returned wherever a nil message is passed.
var ErrNilMessage = errors.New("sbkit: nil message")

// NewMessageID returns a random (version 4) UUID in its canonical 36-character form.
func NewMessageID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+).
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return guid.Format(u)
}

// EnsureMessageID sets message.MessageID to a new random UUID when it is nil or empty, so
// that a retried send is recognisable as a duplicate, and returns the message's ID.
// It returns ErrNilMessage for a nil message.
func EnsureMessageID(message *azservicebus.Message) (string, error) {
	if message == nil {
		return "", ErrNilMessage
	}
	if message.MessageID == nil || *message.MessageID == "" {
		id := NewMessageID()
		message.MessageID = &id
	}
	return *message.MessageID, nil
}
