// Package guid formats 16-byte UUIDs, for the packages of this module that read or make
// them (message IDs, AMQP uuid values).
package guid

import "encoding/hex"

// Format returns u as 36 characters: 8-4-4-4-12 lower-case hex digits, bytes in the
// order given (RFC 4122 network order).
func Format(u [16]byte) string {
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
