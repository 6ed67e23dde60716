package sbtest

import (
	"encoding/hex"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// The names of the protocol the server's tests speak, spelled here as a client spells
// them (the AMQP 1.0 specification; "AMQP 1.0 in Azure Service Bus and Event Hubs
// protocol guide"; the SDKs' request-response operations), not taken from the server,
// so that a misspelling in the server fails the tests.
const (
	cbsNode        = "$cbs"
	mgmtNodeSuffix = "/$management"

	opPutToken         = "put-token"
	opRenewLock        = "com.microsoft:renew-lock"
	opPeek             = "com.microsoft:peek-message"
	opReceiveBySeq     = "com.microsoft:receive-by-sequence-number"
	opUpdateDisp       = "com.microsoft:update-disposition"
	opRenewSessionLock = "com.microsoft:renew-session-lock"
	propAssociatedLink = "associated-link-name"

	condDecodeError      amqp.Symbol = "amqp:decode-error"
	condFramingError     amqp.Symbol = "amqp:connection:framing-error"
	condNotAllowed       amqp.Symbol = "amqp:not-allowed"
	condUnattachedHandle amqp.Symbol = "amqp:session:unattached-handle"
	condHandleInUse      amqp.Symbol = "amqp:session:handle-in-use"
	condLockLost         amqp.Symbol = "com.microsoft:message-lock-lost"
	condResourceLimit    amqp.Symbol = "amqp:resource-limit-exceeded"
	condTransferLimit    amqp.Symbol = "amqp:link:transfer-limit-exceeded"

	sessionFilterName amqp.Symbol = "com.microsoft:session-filter"
	propAcceptTimeout amqp.Symbol = "com.microsoft:timeout"
	annSequenceNumber amqp.Symbol = "x-opt-sequence-number"

	// tlsHandshakeRecord is the first byte of a TLS connection (RFC 8446 section 5.1).
	tlsHandshakeRecord = 0x16
	// batchContentType is the Content-Type of Send Message Batch's JSON body (Service Bus
	// runtime REST API, Send Message Batch).
	batchContentType = "application/vnd.microsoft.servicebus.json"
)

// noExpiry is the absolute-expiry-time the service gives a message without a
// time-to-live: .NET's DateTime.MaxValue.
var noExpiry = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)

// mapGet returns the value of key in m, a string or a symbol key.
func mapGet(m amqp.Map, key string) (any, bool) {
	if v, ok := m.Get(key); ok {
		return v, true
	}
	return m.Get(amqp.Symbol(key))
}

// deliveryTag is the delivery tag of the message with lock token t: the token's GUID
// bytes in .NET's order (the first three groups little-endian), as the service sends it.
// The swap is its own inverse.
func deliveryTag(t [16]byte) []byte {
	t[0], t[1], t[2], t[3] = t[3], t[2], t[1], t[0]
	t[4], t[5] = t[5], t[4]
	t[6], t[7] = t[7], t[6]
	return t[:]
}

// lockTokenGUID is lock token t as the runtime REST API spells it in a message's URI: a
// GUID (.NET's byte order).
func lockTokenGUID(t [16]byte) string {
	h := hex.EncodeToString(deliveryTag(t))
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
