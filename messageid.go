package sbkit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ErrNilMessage is returned wherever a nil message is passed.
var ErrNilMessage = errors.New("sbkit: nil message")

// NewMessageID returns a random (version 4) UUID in its canonical 36-character form.
func NewMessageID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+).
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], u[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], u[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], u[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], u[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], u[10:16])
	return string(out[:])
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
