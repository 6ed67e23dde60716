// Package wire is sbtest's emulator server: AMQP 1.0 on a TCP socket (plain, TLS or a
// WebSocket), the administration API and the runtime REST API over HTTP(S), and the
// explorer page. sbtest.NewServer makes one (New) over sbtest's in-memory model, which
// it sees only through the interfaces of model.go: this package cannot import sbtest
// (sbtest imports it), so the compiler keeps the seam. sbtest.Server and
// sbtest.ServerOptions document what the server does; Options mirrors ServerOptions,
// and the comments here name ServerOptions' fields.
//
// The files: server.go (listening, accepting, closing), limits.go (what a client can
// make the server hold), pending_unix.go and pending_other.go (the bytes a socket has
// not sent), tls.go and endpoint.go (the certificate and the advertised host),
// address.go (a link's address as the service spells it), order.go (a session's frames
// take effect in the order they arrive); amqpconn.go, amqpsession.go and amqplink.go for
// AMQP connections, sessions and links; linkin.go and linkout.go for what the links a
// client sends on and those it receives on share, with one file per kind of link:
// send.go, receive.go, request.go and response.go; msgsession.go for Service Bus
// sessions, management.go for $management, sas.go for authorization, message.go and
// rawmessage.go for messages between AMQP and the SDK's types, errors.go for the model's
// errors as AMQP errors; https.go, httphead.go, httproutes.go, httpdata.go,
// httpdata_props.go and websocket.go for HTTP; inspect.go for what sbtest's tests look
// at. The server's tests are mostly sbtest's (wire_*_test.go), which drive it with the
// SDK; those here test its parts, and with a fake Broker what the model cannot be made
// to do on cue (attach_deleted_test.go: an entity deleted while a link attaches).
package wire
