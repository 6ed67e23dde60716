package wire

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/atom"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// The runtime (data plane) REST API of Service Bus ("Service Bus runtime REST API",
// learn.microsoft.com/rest/api/servicebus/service-bus-runtime-rest), served on every port
// that serves HTTP, over the same Namespace as AMQP: a message sent over HTTP is received
// over AMQP and the other way round, and locks, lock tokens and delivery counts are the
// same. It uses only the model's exported API (Sender, Receiver), as the administration
// API does. The calls, for a queue path or topic/subscriptions/name:
//
//	POST   /{queue|topic}/messages                   Send Message (201), or Send Message
//	                                                 Batch with application/vnd.microsoft.servicebus.json
//	POST   /{entity}/messages/head?timeout=N         Peek-Lock Message: 201 with the message,
//	                                                 BrokerProperties and Location; 204 when none
//	DELETE /{entity}/messages/head?timeout=N         Receive and Delete Message: 200; 204 when none
//	PUT    /{entity}/messages/{seq|id}/{lockToken}   Unlock Message (200)
//	DELETE /{entity}/messages/{seq|id}/{lockToken}   Delete Message, completing it (200)
//	POST   /{entity}/messages/{seq|id}/{lockToken}   Renew-Lock for a Message (200)
//
// Errors are the service's: 400 for a malformed request, 403 for a message too large
// ("Quota exceeded or message too large"), 404 for a lock token the entity does not hold,
// 410 for an entity that does not exist, 500 otherwise, with the administration API's
// <Error><Code/><Detail/></Error> body.

// dataCall is a parsed data-plane path: the entity and what follows its "messages"
// segment (nothing, "head", or a message reference and a lock token).
type dataCall struct {
	entity string
	rest   []string
}

// parseDataPath splits path at its last "messages" segment after the first segment:
// /{entity}/messages, /{entity}/messages/head or /{entity}/messages/{ref}/{token}.
func parseDataPath(path string) (dataCall, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 1; i-- {
		if !strings.EqualFold(parts[i], "messages") {
			continue
		}
		rest := parts[i+1:]
		switch {
		case len(rest) == 0, len(rest) == 1 && strings.EqualFold(rest[0], "head"), len(rest) == 2:
			for _, p := range parts[:i] {
				if p == "" {
					return dataCall{}, false
				}
			}
			return dataCall{entity: strings.Join(parts[:i], "/"), rest: rest}, true
		}
		return dataCall{}, false
	}
	return dataCall{}, false
}

// isDataRequest reports whether r is a data-plane call rather than one of the
// administration API, whose paths are /{entity...} with PUT, GET and DELETE (an entity
// name may hold slashes): a path shaped like a data-plane call is the data plane's unless
// it names an existing entity, and a PUT is the data plane's only when its last segment
// is a lock token (otherwise it creates an entity by that name).
func (s *Server) isDataRequest(r *http.Request) (dataCall, bool) {
	call, ok := parseDataPath(r.URL.Path)
	if !ok {
		return dataCall{}, false
	}
	switch r.Method {
	case http.MethodPost:
		return call, true
	case http.MethodPut, http.MethodDelete:
		if r.Method == http.MethodPut {
			if len(call.rest) != 2 {
				return dataCall{}, false
			}
			if _, ok := parseLockToken(call.rest[1]); !ok {
				return dataCall{}, false
			}
		}
		if s.entityExists(strings.Trim(r.URL.Path, "/")) {
			return dataCall{}, false
		}
		return call, true
	}
	return dataCall{}, false
}

// entityExists reports whether path names a queue, topic or subscription.
func (s *Server) entityExists(path string) bool { return s.broker.Exists(path) }

// dataError is a data-plane failure: an HTTP status and the detail text.
type dataError struct {
	status int
	detail string
}

func (e *dataError) Error() string { return e.detail }

func dataErr(status int, format string, args ...any) *dataError {
	return &dataError{status: status, detail: fmt.Sprintf(format, args...)}
}

// writeDataError answers err with its status and the service's XML error body.
func writeDataError(w http.ResponseWriter, err error) {
	de := dataStatus(err)
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(de.status)
	_ = xml.NewEncoder(w).Encode(atom.Error{Code: de.status, Detail: de.detail + " TrackingId:sbtest"})
}

// dataStatus maps the model's errors to the statuses the runtime REST API documents for
// its calls (Send Message, Peek-Lock Message, Unlock Message, ...): 410 for an entity
// that does not exist, 404 for a lock that is not held, 403 for a message too large or a
// disabled entity, 400 for what the entity does not allow, 500 otherwise.
func dataStatus(err error) *dataError {
	var de *dataError
	var sbErr *azservicebus.Error
	var ae *goamqp.Error
	switch {
	case errors.As(err, &de):
		return de
	case errors.Is(err, azservicebus.ErrMessageTooLarge):
		return dataErr(http.StatusForbidden, "%v", err)
	case errors.Is(err, modelerr.ErrInvalidArgument), errors.Is(err, modelerr.ErrNotSettleable):
		return dataErr(http.StatusBadRequest, "%v", err)
	case errors.As(err, &ae) && ae.Condition == modelerr.CondEntityDisabled:
		return dataErr(http.StatusForbidden, "%s", ae.Description)
	case errors.As(err, &ae):
		return dataErr(http.StatusBadRequest, "%s", ae.Description)
	case errors.As(err, &sbErr):
		switch sbErr.Code {
		case azservicebus.CodeNotFound:
			return dataErr(http.StatusGone, "The messaging entity could not be found.")
		case azservicebus.CodeLockLost:
			return dataErr(http.StatusNotFound, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.")
		case azservicebus.CodeUnauthorizedAccess:
			return dataErr(http.StatusUnauthorized, "%v", err)
		case azservicebus.CodeConnectionLost, azservicebus.CodeTimeout:
			return dataErr(http.StatusServiceUnavailable, "%v", err)
		}
	}
	return dataErr(http.StatusInternalServerError, "%v", err)
}

// serveData serves a data-plane call (see the list above).
func (s *Server) serveData(w http.ResponseWriter, r *http.Request, call dataCall) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close ends waiting receives
	defer stop()
	var err error
	switch {
	case len(call.rest) == 0:
		err = s.dataSend(ctx, w, r, call.entity)
	case len(call.rest) == 1 && r.Method == http.MethodPost:
		err = s.dataReceive(ctx, w, r, call.entity, true)
	case len(call.rest) == 1 && r.Method == http.MethodDelete:
		err = s.dataReceive(ctx, w, r, call.entity, false)
	case len(call.rest) == 2:
		err = s.dataSettle(ctx, w, r, call)
	default:
		err = dataErr(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
	}
	if err != nil {
		writeDataError(w, err)
	}
}

// batchContentType is the Content-Type of Send Message Batch's JSON body.
const batchContentType = "application/vnd.microsoft.servicebus.json"

// maxDataBody bounds a send request's body: the namespace's message size limit, twice
// over for a batch's JSON escaping, plus room for its properties.
func (s *Server) maxDataBody() int64 { return 2*int64(s.broker.MaxMessageSize()) + 64<<10 }

// dataSend serves Send Message and Send Message Batch (201).
func (s *Server) dataSend(ctx context.Context, w http.ResponseWriter, r *http.Request, entity string) error {
	if r.Method != http.MethodPost {
		return dataErr(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
	}
	if e, ok := s.broker.Entity(entity); ok && e.Topic != "" {
		return dataErr(http.StatusBadRequest, "'%s' is a subscription: send to its topic.", entity)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxDataBody()))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return dataErr(http.StatusForbidden, "The request body exceeds %d bytes: message too large.", tooBig.Limit)
		}
		return dataErr(http.StatusBadRequest, "reading the body: %v", err)
	}
	var msgs []*azservicebus.Message
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), batchContentType) {
		if msgs, err = decodeBatch(body); err != nil {
			return err
		}
	} else {
		m := &azservicebus.Message{Body: body}
		if bp := r.Header.Get("BrokerProperties"); bp != "" {
			var in brokerIn
			if err := json.Unmarshal([]byte(bp), &in); err != nil {
				return dataErr(http.StatusBadRequest, "The BrokerProperties header is not valid JSON: %v", err)
			}
			if err := in.apply(m); err != nil {
				return err
			}
		}
		if ct != "" {
			m.ContentType = &ct
		}
		m.ApplicationProperties = headerProperties(r.Header)
		msgs = []*azservicebus.Message{m}
	}
	snd, err := s.broker.NewSender(entity)
	if err != nil {
		return err
	}
	defer snd.Close(context.Background())
	if len(msgs) == 1 {
		err = snd.SendMessage(ctx, msgs[0], nil)
	} else {
		err = sendBatch(ctx, snd, msgs)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

// sendBatch sends msgs as one batch: all of them or none.
func sendBatch(ctx context.Context, snd Sender, msgs []*azservicebus.Message) error {
	b, err := snd.NewBatch(ctx, nil)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := b.AddMessage(m, nil); err != nil {
			return fmt.Errorf("sbtest: a batch of %d messages exceeds the message size limit: %w", len(msgs), err)
		}
	}
	return snd.SendBatch(ctx, b, nil)
}

// Receive waits: the timeout query parameter in seconds, 60 by default, and never more
// than half the server's WriteTimeout, so that the answer leaves within it.
const defaultReceiveTimeout = 60 * time.Second

// receiveWait is how long a receive request waits for a message.
func (s *Server) receiveWait(r *http.Request) (time.Duration, error) {
	wait := defaultReceiveTimeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, dataErr(http.StatusBadRequest, "timeout %q is not a number of seconds.", v)
		}
		wait = time.Duration(n) * time.Second
	}
	wait = min(wait, s.limits.writeTimeout/2)
	// timeout=0 takes what is there: one round trip of the latency model and a moment.
	return wait + s.broker.RoundTrip() + 50*time.Millisecond, nil
}

// newDataReceiver opens a receiver for a queue, a topic's subscription
// (topic/subscriptions/name) or either's dead-letter queue (.../$DeadLetterQueue).
func (s *Server) newDataReceiver(entity string, mode azservicebus.ReceiveMode) (Receiver, error) {
	var sub azservicebus.SubQueue
	if i := strings.LastIndexByte(entity, '/'); i > 0 && strings.EqualFold(entity[i+1:], "$DeadLetterQueue") {
		entity, sub = entity[:i], azservicebus.SubQueueDeadLetter
	}
	e, ok := s.broker.Entity(entity)
	if !ok {
		return nil, modelerr.NotFound()
	}
	if t := e.Topic; t != "" {
		return s.broker.NewReceiverForSubscription(t, e.Name[len(t)+len("/Subscriptions/"):], mode, sub)
	}
	return s.broker.NewReceiverForQueue(entity, mode, sub)
}

// dataReceive serves Peek-Lock Message (lock) and Receive and Delete Message.
func (s *Server) dataReceive(ctx context.Context, w http.ResponseWriter, r *http.Request, entity string, lock bool) error {
	wait, err := s.receiveWait(r)
	if err != nil {
		return err
	}
	mode := azservicebus.ReceiveModeReceiveAndDelete
	if lock {
		mode = azservicebus.ReceiveModePeekLock
	}
	rcv, err := s.newDataReceiver(entity, mode)
	if err != nil {
		return err
	}
	// Closing the receiver keeps the lock until it expires, for any receiver of the
	// entity to settle (Receiver.Close).
	defer rcv.Close(context.Background())
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ms, err := rcv.ReceiveMessages(rctx, 1, nil)
	switch {
	case err != nil && rctx.Err() != nil && ctx.Err() == nil:
		w.WriteHeader(http.StatusNoContent) // none within the timeout
		return nil
	case err != nil:
		return err
	}
	m := ms[0]
	h := w.Header()
	bp, err := json.Marshal(brokerOut(m, lock))
	if err != nil {
		return err
	}
	h["BrokerProperties"] = []string{string(bp)}
	setPropertyHeaders(h, m.ApplicationProperties)
	ct := "application/octet-stream"
	if m.ContentType != nil && *m.ContentType != "" {
		ct = *m.ContentType
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(m.Body)))
	status := http.StatusOK
	if lock {
		h.Set("Location", dataURL(r, entity, fmt.Sprintf("messages/%d/%s", *m.SequenceNumber, formatLockToken(m.LockToken))))
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	_, _ = w.Write(m.Body)
	return nil
}

// dataURL is the absolute URL of path under entity, on the host and scheme r came by.
func dataURL(r *http.Request, entity, path string) string {
	scheme := "http"
	if isTLSRequest(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/" + entity + "/" + path
}

// isTLSRequest reports whether r came over TLS (connContext marks those connections).
func isTLSRequest(r *http.Request) bool {
	tls, _ := r.Context().Value(tlsConnKey{}).(bool)
	return tls
}

// tlsConnKey marks the context of a connection that came over TLS.
type tlsConnKey struct{}

// connContext is the http.Server's ConnContext: it marks TLS connections, which reach
// the HTTP server wrapped (a tlsConn, under the headConn of readRequestHead), so that the
// request's TLS field stays nil.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if _, ok := unwrapHead(c).(*tlsConn); ok {
		return context.WithValue(ctx, tlsConnKey{}, true)
	}
	return ctx
}

// unwrapHead returns the connection under c's read-ahead header (headConn), if any.
func unwrapHead(c net.Conn) net.Conn {
	if hc, ok := c.(*headConn); ok {
		return hc.Conn
	}
	return c
}

// dataSettle serves Unlock Message (PUT), Delete Message (DELETE) and Renew-Lock for a
// Message (POST) by lock token; the message reference (sequence number or MessageId)
// is not checked, the lock token names the message.
func (s *Server) dataSettle(ctx context.Context, w http.ResponseWriter, r *http.Request, call dataCall) error {
	token, ok := parseLockToken(call.rest[1])
	if !ok {
		return dataErr(http.StatusBadRequest, "%q is not a lock token.", call.rest[1])
	}
	rcv, err := s.newDataReceiver(call.entity, azservicebus.ReceiveModePeekLock)
	if err != nil {
		return err
	}
	defer rcv.Close(context.Background())
	msg := &azservicebus.ReceivedMessage{LockToken: token}
	switch r.Method {
	case http.MethodPut:
		err = rcv.AbandonMessage(ctx, msg, nil)
	case http.MethodDelete:
		err = rcv.CompleteMessage(ctx, msg, nil)
	case http.MethodPost:
		if err = rcv.RenewMessageLock(ctx, msg, nil); err == nil && msg.LockedUntil != nil {
			// The renewed lock's expiry, as the SDKs report it after a renewal.
			bp, _ := json.Marshal(map[string]string{"LockedUntilUtc": msg.LockedUntil.UTC().Format(http.TimeFormat)})
			w.Header()["BrokerProperties"] = []string{string(bp)}
		}
	default:
		return dataErr(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
