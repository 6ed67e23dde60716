# Conformance of cmd/sbemulator with the Python Service Bus SDK as Debian ships it
# (python3-azure: azure-servicebus 7.8.2 on uamqp 1.5.3). That release predates the SDKs'
# emulator support: it speaks only AMQP over TLS to port 5671 (with an sb:// connection
# string the port is ignored; custom_endpoint_address switches to web sockets), so the
# emulator listens on port 5671 of a loopback address of its own, and the SDK trusts the
# certificate the emulator wrote (-cert) through SSL_CERT_FILE (uamqp's OpenSSL) and
# REQUESTS_CA_BUNDLE (the admin client). No shim sits between them. Usage:
#
#   /usr/bin/python3 conformance.py /path/to/sbemulator
#
# SBEMULATOR_COMMAND, when set, is the command that starts the emulator instead (a prefix
# the flags are appended to, split as a shell would), such as the image's
# "docker run --rm --network host -v DIR:DIR IMAGE" (../docker/run.sh): DIR must hold
# Config.json and the temporary directory the certificate is written to, at the same paths.
#
# Each step runs against its own entity of Config.json. The last line is
# "N passed, M failed"; the exit code is 1 when a step failed. CONFORMANCE_STEPS, when
# set, runs only the steps whose names contain it (case-insensitive).
import datetime
import logging
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

from checks import Steps, expect, expect_eq, failure_text

HERE = os.path.dirname(os.path.abspath(__file__))
STEP_TIMEOUT = 20  # seconds, as conformance.mjs
SHORT_WAIT = 1  # seconds: max_wait_time of receives that expect messages

# The steps that need a fault name their entity; the emulator injects these at start.
FAULTS = [
    "lockloss:renew:0:lock-lost",
    "lockloss:complete:0:lock-lost",
    "session-lockloss:renew-session-lock:0:lock-lost",
]


class Emulator:
    """The sbemulator process, on port 5671 of a loopback address of its own."""

    def __init__(self, command, name="cert", extra=()):
        self.command = command
        self.cert = os.path.join(tempfile.gettempdir(), "sbemulator-%s-%d.pem" % (name, os.getpid()))
        self.extra = list(extra)
        self.proc = None
        self.stderr = []

    def start(self):
        # 127.0.0.0/8 is loopback on Linux: a random address makes room for parallel runs
        # on one machine, which all need port 5671.
        last = ""
        for _ in range(5):
            host = "127.%d.%d.%d" % (random.randint(1, 254), random.randint(1, 254), random.randint(1, 254))
            args = self.command + ["-addr", host + ":5671", "-config", os.path.join(HERE, "Config.json"),
                                   "-cert", self.cert]
            for f in FAULTS:
                args += ["-fault", f]
            args += self.extra
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            threading.Thread(target=self._drain, daemon=True).start()
            line = self._first_line(30)  # a container may take a while to start
            if line:
                return line
            self.proc.wait(5)
            last = "".join(self.stderr)
            if "address already in use" not in last:
                break
        raise RuntimeError("the emulator did not start: " + last)

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _first_line(self, seconds):
        out = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(seconds)
        return out[0].strip() if out and out[0] else ""

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the emulator did not stop within 10 s of SIGTERM")
        if code != 0:
            raise AssertionError("the emulator exited with %s after SIGTERM: %s" % (code, "".join(self.stderr)))


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def body_of(m):
    """The body of a received message: the text of its data sections, or its value or
    sequence."""
    from azure.servicebus.amqp import AmqpMessageBodyType

    if m.body_type == AmqpMessageBodyType.DATA:
        return b"".join(m.body).decode()
    if m.body_type == AmqpMessageBodyType.SEQUENCE:
        return [[text(v) for v in section] for section in m.body]
    return m.body


def props_of(m):
    return {text(k): text(v) for k, v in (m.application_properties or {}).items()}


def receive_n(receiver, n):
    """Receives until it has n messages or a receive returns none."""
    out = []
    while len(out) < n:
        got = receiver.receive_messages(max_message_count=n - len(out), max_wait_time=SHORT_WAIT)
        if not got:
            break
        out.extend(got)
    return out


def expect_empty(client, queue, what):
    with client.get_queue_receiver(queue) as r:
        expect_drained(r, "%s: messages left in %s" % (what, queue))


def expect_drained(receiver, what):
    """Peeks until the entity is empty, for up to 2 s: 7.8.2 settles on the receive link
    without waiting for the outcome (its receiver's _settle_message_with_retry says so),
    so a peek on the management link may overtake a completion."""
    deadline = time.monotonic() + 2
    while True:
        left = len(receiver.peek_messages(10))
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError("%s: %d" % (what, left))
        time.sleep(0.05)


def expect_raises(cls, fn, what):
    try:
        fn()
    except cls:
        return
    except Exception as err:  # the wrong type fails the step with what was raised
        raise AssertionError("%s: got %s (%s), want %s" % (what, type(err).__name__, err, cls.__name__))
    raise AssertionError("%s: succeeded, want %s" % (what, cls.__name__))


STEPS = Steps()
step = STEPS


@step("send a single message; receive it in peek-lock mode; complete it")
def _(client, env):
    from azure.servicebus import ServiceBusMessage

    with client.get_queue_sender("send") as s:
        s.send_messages(ServiceBusMessage("hello", message_id="m-1"))
    with client.get_queue_receiver("send") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        m = got[0]
        expect_eq(body_of(m), "hello", "body")
        expect_eq(m.message_id, "m-1", "message_id")
        expect_eq(m.delivery_count, 0, "delivery_count of a first delivery")
        expect(isinstance(m.lock_token, uuid.UUID), "lock_token %r" % (m.lock_token,))
        r.complete_message(m)
    expect_empty(client, "send", "after complete")


@step("send a batch; messages arrive in order")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode

    with client.get_queue_sender("batch") as s:
        batch = s.create_message_batch()
        for i in range(5):
            batch.add_message(ServiceBusMessage("b%d" % i))
        s.send_messages(batch)
        s.send_messages([ServiceBusMessage("a0"), ServiceBusMessage("a1")])  # a list is a batch too
    with client.get_queue_receiver("batch", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        got = receive_n(r, 7)
    expect_eq([body_of(m) for m in got], ["b0", "b1", "b2", "b3", "b4", "a0", "a1"], "bodies")
    seqs = [m.sequence_number for m in got]
    expect(seqs == sorted(set(seqs)), "sequence numbers not increasing: %s" % seqs)


@step("a message sent without message_id gets one; settlement works")
def _(client, env):
    from azure.servicebus import ServiceBusMessage

    with client.get_queue_sender("noid") as s:
        s.send_messages(ServiceBusMessage("no id"))
    with client.get_queue_receiver("noid") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        expect(got[0].message_id, "message_id %r" % got[0].message_id)
        r.complete_message(got[0])


@step("schedule two messages, cancel one; only the other arrives")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusMessageState

    with client.get_queue_sender("schedule") as s, client.get_queue_receiver("schedule") as r:
        expect_eq(r.peek_messages(10), [], "messages in the queue before")  # both links are open now
        now = datetime.datetime.now(datetime.timezone.utc)
        soon = now + datetime.timedelta(seconds=2)
        [keep] = s.schedule_messages(ServiceBusMessage("kept"), soon)
        [drop] = s.schedule_messages(ServiceBusMessage("cancelled"), now + datetime.timedelta(seconds=60))
        expect(keep != drop, "sequence numbers %s %s" % (keep, drop))
        peeked = r.peek_messages(10)
        expect_eq([m.state for m in peeked], [ServiceBusMessageState.SCHEDULED] * 2, "states of the peeked scheduled messages")
        s.cancel_scheduled_messages(drop)
        got = r.receive_messages(max_message_count=1, max_wait_time=6)
        expect(got, "the scheduled message did not arrive")
        m = got[0]
        expect_eq(body_of(m), "kept", "body")
        expect(m.enqueued_time_utc >= soon - datetime.timedelta(seconds=1), "enqueued %s before %s" % (m.enqueued_time_utc, soon))
        # Service Bus docs, message sequencing: an activated scheduled message gets a new sequence number.
        expect(m.sequence_number > drop, "sequence number %s, want one after %s and %s" % (m.sequence_number, keep, drop))
        r.complete_message(m)
        expect_drained(r, "messages left after the cancel")


@step("receive-and-delete removes the messages")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode

    with client.get_queue_sender("rad") as s:
        s.send_messages([ServiceBusMessage("1"), ServiceBusMessage("2")])
    with client.get_queue_receiver("rad", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        got = receive_n(r, 2)
    expect_eq([body_of(m) for m in got], ["1", "2"], "bodies")
    expect(all(m.lock_token is None for m in got), "receive-and-delete messages carry no lock token")
    expect_empty(client, "rad", "after receive-and-delete")


@step("every broker property round-trips")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusMessageState

    sent = dict(message_id="props-1", correlation_id="corr-1", content_type="application/json", subject="order-placed",
                to="shipping", reply_to="replies", reply_to_session_id="reply-session", partition_key="pk-1")
    before = datetime.datetime.now(datetime.timezone.utc)
    with client.get_queue_sender("props") as s:
        s.send_messages(ServiceBusMessage('{"order": 42}', time_to_live=datetime.timedelta(minutes=2),
                                          application_properties={"s": "text", "n": 7, "f": 1.5, "b": True}, **sent))
    with client.get_queue_receiver("props") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        m = got[0]
        expect_eq(body_of(m), '{"order": 42}', "body")
        for k, v in sent.items():
            expect_eq(getattr(m, k), v, k)
        expect_eq(m.time_to_live, datetime.timedelta(minutes=2), "time_to_live")
        expect_eq(props_of(m), {"s": "text", "n": 7, "f": 1.5, "b": True}, "application properties")
        expect(m.sequence_number > 0, "sequence_number %s" % m.sequence_number)
        expect(m.enqueued_time_utc >= before - datetime.timedelta(seconds=2), "enqueued_time_utc %s" % m.enqueued_time_utc)
        expect(m.locked_until_utc > m.enqueued_time_utc, "locked_until_utc %s" % m.locked_until_utc)
        expect_eq(m.expires_at_utc - m.enqueued_time_utc, datetime.timedelta(minutes=2), "expires_at_utc - enqueued_time_utc")
        expect_eq(m.state, ServiceBusMessageState.ACTIVE, "state")
        expect_eq(m.delivery_count, 0, "delivery_count")
        r.complete_message(m)


@step("renew the lock")
def _(client, env):
    from azure.servicebus import ServiceBusMessage

    with client.get_queue_sender("renew") as s:
        s.send_messages(ServiceBusMessage("renew me"))
    with client.get_queue_receiver("renew") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        m = got[0]
        first = m.locked_until_utc
        time.sleep(1.1)
        until = r.renew_message_lock(m)
        expect(until > first, "renewed until %s, was %s" % (until, first))
        expect_eq(m.locked_until_utc, until, "the message's locked_until_utc after the renewal")
        r.complete_message(m)


@step("abandon: the message is redelivered with delivery_count 1")
def _(client, env):
    from azure.servicebus import ServiceBusMessage

    with client.get_queue_sender("abandon") as s:
        s.send_messages(ServiceBusMessage("again", message_id="ab-1"))
    with client.get_queue_receiver("abandon") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        r.abandon_message(got[0])
        again = receive_n(r, 1)
        expect(again, "not redelivered")
        expect_eq(again[0].message_id, "ab-1", "message_id")
        expect_eq(again[0].delivery_count, 1, "delivery_count after an abandon")
        r.complete_message(again[0])


@step("defer, then receive the deferred message by sequence number")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusMessageState

    with client.get_queue_sender("defer") as s:
        s.send_messages(ServiceBusMessage("later"))
    with client.get_queue_receiver("defer") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        seq = got[0].sequence_number
        r.defer_message(got[0])
        expect_eq(len(r.receive_messages(max_message_count=1, max_wait_time=0.5)), 0, "a deferred message is not received normally")
        [d] = r.receive_deferred_messages([seq])
        expect_eq(body_of(d), "later", "body")
        expect_eq(d.state, ServiceBusMessageState.DEFERRED, "state")
        r.complete_message(d)
    expect_empty(client, "defer", "after completing the deferred message")


@step("dead-letter with reason and description; read the dead-letter queue")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

    with client.get_queue_sender("deadletter") as s:
        s.send_messages(ServiceBusMessage("poison", message_id="dl-1"))
    with client.get_queue_receiver("deadletter") as r:
        got = receive_n(r, 1)
        expect(got, "no message received")
        r.dead_letter_message(got[0], reason="Invalid", error_description="bad payload")
    with client.get_queue_receiver("deadletter", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        got = receive_n(dlq, 1)
        expect(got, "nothing in the dead-letter queue")
        d = got[0]
        expect_eq([d.message_id, body_of(d)], ["dl-1", "poison"], "message_id and body")
        expect_eq(d.dead_letter_reason, "Invalid", "dead_letter_reason")
        expect_eq(d.dead_letter_error_description, "bad payload", "dead_letter_error_description")
        dlq.complete_message(d)
    expect_empty(client, "deadletter", "main queue after dead-lettering")


@step("peek does not lock, and reads from a sequence number")
def _(client, env):
    from azure.servicebus import ServiceBusMessage

    with client.get_queue_sender("peek") as s:
        s.send_messages([ServiceBusMessage("p0"), ServiceBusMessage("p1"), ServiceBusMessage("p2")])
    with client.get_queue_receiver("peek") as r:
        first = r.peek_messages(2)
        expect_eq([body_of(m) for m in first], ["p0", "p1"], "first peek")
        expect(all(m.lock_token is None for m in first), "peeked messages carry no lock token")
        # 7.8.2 peeks from the last received sequence number, or 1: the caller continues.
        expect_eq([body_of(m) for m in r.peek_messages(2, sequence_number=first[1].sequence_number + 1)], ["p2"], "second peek")
        frm = r.peek_messages(3, sequence_number=first[1].sequence_number)
        expect_eq([body_of(m) for m in frm], ["p1", "p2"], "peek from a sequence number")
        got = receive_n(r, 3)
        expect_eq([body_of(m) for m in got], ["p0", "p1", "p2"], "peeked messages are still receivable")
        for m in got:
            r.complete_message(m)


@step("iterating a receiver receives every message")
def _(client, env):
    from azure.servicebus import ServiceBusMessage

    n = 20
    with client.get_queue_sender("stream") as s:
        s.send_messages([ServiceBusMessage(str(i)) for i in range(n)])
    seen = []
    with client.get_queue_receiver("stream", max_wait_time=SHORT_WAIT) as r:
        for m in r:
            seen.append(int(body_of(m)))
            r.complete_message(m)
            if len(seen) == n:
                break
    expect_eq(sorted(seen), list(range(n)), "bodies")
    expect_empty(client, "stream", "after iterating")


@step("topic: subscriptions get the messages their rules match")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode

    with client.get_topic_sender("events") as s:
        s.send_messages([
            ServiceBusMessage("c", subject="created", application_properties={"priority": "low"}),
            ServiceBusMessage("d", subject="deleted", application_properties={"priority": "high"}),
        ])
    want = {"audit": ["c", "d"], "billing": ["c"], "urgent": ["d"]}  # $Default, Label = created, priority = 'high'
    for sub, bodies in want.items():
        with client.get_subscription_receiver("events", sub, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            got = receive_n(r, 2)
        expect_eq([body_of(m) for m in got], bodies, "subscription " + sub)
        if sub == "urgent":
            expect_eq(props_of(got[0]).get("routed"), "urgent", "property set by the rule's action")


@step("duplicate detection drops a repeated message_id")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode

    with client.get_queue_sender("dedupe") as s:
        s.send_messages(ServiceBusMessage("1", message_id="same"))
        s.send_messages(ServiceBusMessage("2", message_id="same"))
    with client.get_queue_receiver("dedupe", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        expect_eq([body_of(m) for m in receive_n(r, 2)], ["1"], "bodies")


@step("sessions: accept by id and next, in order, state, renew the session lock")
def _(client, env):
    from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage

    with client.get_queue_sender("sessions") as s:
        s.send_messages([ServiceBusMessage("a0", session_id="a"), ServiceBusMessage("b0", session_id="b"),
                         ServiceBusMessage("a1", session_id="a"), ServiceBusMessage("a2", session_id="a")])
    with client.get_queue_receiver("sessions", session_id="a") as a:
        expect_eq(a.session.session_id, "a", "session_id of the accepted session")
        got = receive_n(a, 3)
        expect_eq([(body_of(m), m.session_id) for m in got], [("a0", "a"), ("a1", "a"), ("a2", "a")], "session a in order")
        a.session.set_state("step-1")
        expect_eq(a.session.get_state(), b"step-1", "session state")
        before = a.session.locked_until_utc
        expect(before is not None, "the accepted session's locked_until_utc is unknown")
        time.sleep(1.1)
        until = a.session.renew_lock()
        expect(until > before, "session lock renewed until %s, was %s" % (until, before))
        for m in got:
            a.complete_message(m)
    with client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION) as nxt:
        expect_eq(nxt.session.session_id, "b", "the next session with messages")
        expect(nxt.session.locked_until_utc is not None, "the next session's locked_until_utc is unknown")
        got = receive_n(nxt, 1)
        expect_eq([body_of(m) for m in got], ["b0"], "session b's message")
        nxt.complete_message(got[0])


@step("auto-forwarding passes messages on")
def _(client, env):
    from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode

    with client.get_queue_sender("forward-in") as s:
        s.send_messages(ServiceBusMessage("passed on", message_id="fw-1"))
    with client.get_queue_receiver("forward-out", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        got = receive_n(r, 1)
    expect_eq([(m.message_id, body_of(m)) for m in got], [("fw-1", "passed on")], "the forwarded message")
    expect_empty(client, "forward-in", "the forwarding queue")


@step("AMQP value and sequence bodies round-trip")
def _(client, env):
    from azure.servicebus import ServiceBusReceiveMode
    from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

    with client.get_queue_sender("bodies") as s:
        s.send_messages(AmqpAnnotatedMessage(value_body={"k": "v", "n": 3}))
        s.send_messages(AmqpAnnotatedMessage(sequence_body=[["x", 1], ["y", 2]]))
    with client.get_queue_receiver("bodies", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        got = receive_n(r, 2)
    expect_eq([m.body_type for m in got], [AmqpMessageBodyType.VALUE, AmqpMessageBodyType.SEQUENCE], "body types")
    expect_eq({text(k): text(v) for k, v in got[0].body.items()}, {"k": "v", "n": 3}, "value body")
    expect_eq(body_of(got[1]), [["x", 1], ["y", 2]], "sequence body")


@step("the admin client creates, reads, lists and deletes queues, topics, subscriptions and rules")
def _(client, env):
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

    admin = ServiceBusAdministrationClient.from_connection_string(env["conn"])
    created = admin.create_queue("made-by-admin", max_delivery_count=4, lock_duration=datetime.timedelta(seconds=45))
    expect_eq((created.name, created.max_delivery_count), ("made-by-admin", 4), "created queue")
    expect_eq(admin.get_queue("made-by-admin").lock_duration, datetime.timedelta(seconds=45), "lock_duration")
    with client.get_queue_sender("made-by-admin") as s:
        s.send_messages([ServiceBusMessage("1"), ServiceBusMessage("2")])
    rt = admin.get_queue_runtime_properties("made-by-admin")
    expect_eq((rt.active_message_count, rt.total_message_count), (2, 2), "runtime counts")
    names = [q.name for q in admin.list_queues()]
    expect("made-by-admin" in names and "send" in names, "list_queues %s" % names)
    admin.create_topic("made-by-admin-topic")
    admin.create_subscription("made-by-admin-topic", "only-x")
    admin.create_rule("made-by-admin-topic", "only-x", "kind-x", filter=SqlRuleFilter("kind = 'x'"))
    admin.delete_rule("made-by-admin-topic", "only-x", "$Default")
    expect_eq([r.name for r in admin.list_rules("made-by-admin-topic", "only-x")], ["kind-x"], "rules")
    with client.get_topic_sender("made-by-admin-topic") as s:
        s.send_messages([ServiceBusMessage("y", application_properties={"kind": "y"}),
                         ServiceBusMessage("x", application_properties={"kind": "x"})])
    with client.get_subscription_receiver("made-by-admin-topic", "only-x") as r:
        got = receive_n(r, 2)
        expect_eq([body_of(m) for m in got], ["x"], "messages the rule let through")
        r.complete_message(got[0])
    admin.delete_topic("made-by-admin-topic")
    admin.delete_queue("made-by-admin")
    expect("made-by-admin" not in [q.name for q in admin.list_queues()], "the deleted queue is still listed")
    admin.close()


@step("AMQP over WebSockets (TransportType.AmqpOverWebsocket): send, receive, abandon, complete")
def _(client, env):
    from urllib.parse import urlparse

    from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType

    # uamqp tunnels through wss://HOST:PORT/$servicebus/websocket/ (subprotocol AMQPWSB10),
    # port 443 unless custom_endpoint_address names one: the emulator's TLS port here.
    host = urlparse(env["conn"].split(";")[0].split("=", 1)[1])
    ws = ServiceBusClient.from_connection_string(
        env["conn"], transport_type=TransportType.AmqpOverWebsocket,
        custom_endpoint_address="sb://%s:%d" % (host.hostname, host.port), retry_total=1, retry_backoff_factor=0.2)
    with ws:
        with ws.get_queue_sender("websocket") as s:
            s.send_messages([ServiceBusMessage("over ws", message_id="ws-1"), ServiceBusMessage("w" * 200000)])
        with ws.get_queue_receiver("websocket") as r:
            got = receive_n(r, 2)
            expect_eq([len(body_of(m)) if len(body_of(m)) > 100 else body_of(m) for m in got], ["over ws", 200000], "bodies")
            r.abandon_message(got[0])
            again = receive_n(r, 1)
            expect(again, "the abandoned message did not come back")
            expect_eq((again[0].message_id, again[0].delivery_count), ("ws-1", 1), "the abandoned message's id and delivery count")
            r.complete_message(again[0])
            r.complete_message(got[1])
        expect_empty(ws, "websocket", "after completing over WebSockets")


@step("a missing entity is ServiceBusAuthenticationError, as the Python live test test_sb_client_bad_entity expects")
def _(client, env):
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.exceptions import ServiceBusAuthenticationError

    def send():
        with client.get_queue_sender("no-such-queue") as s:
            s.send_messages(ServiceBusMessage("lost"))

    expect_raises(ServiceBusAuthenticationError, send, "send to a missing queue")

    def receive():
        with client.get_queue_receiver("no-such-queue") as r:
            r.receive_messages(max_message_count=1, max_wait_time=SHORT_WAIT)

    expect_raises(ServiceBusAuthenticationError, receive, "receive from a missing queue")


@step("lock lost (-fault lock-lost): MessageLockLostError and SessionLockLostError")
def _(client, env):
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.exceptions import MessageLockLostError, SessionLockLostError

    with client.get_queue_sender("lockloss") as s:
        s.send_messages([ServiceBusMessage("renewed"), ServiceBusMessage("deferred")])
    with client.get_queue_receiver("lockloss") as r:
        got = receive_n(r, 2)
        expect_eq(len(got), 2, "messages received")
        expect_raises(MessageLockLostError, lambda: r.renew_message_lock(got[0]), "renew_message_lock")
        r.defer_message(got[1])
        [d] = r.receive_deferred_messages([got[1].sequence_number])
        # A deferred message is settled through $management, whose answer carries the error.
        expect_raises(MessageLockLostError, lambda: r.complete_message(d), "complete_message of a deferred message")
    with client.get_queue_sender("session-lockloss") as s:
        s.send_messages(ServiceBusMessage("s", session_id="s"))
    with client.get_queue_receiver("session-lockloss", session_id="s") as sr:
        expect_raises(SessionLockLostError, sr.session.renew_lock, "renew_lock of a session")


@step("with keys from Config.json (Sbkit.SharedAccessKeys), the right key sends and receives; a wrong one is ServiceBusAuthenticationError")
def _(client, env):
    from azure.servicebus import ServiceBusClient, ServiceBusMessage
    from azure.servicebus.exceptions import ServiceBusAuthenticationError

    # A second emulator, its keys in a file of their own beside Config.json; the
    # temporary directory is where an SBEMULATOR_COMMAND container sees it too.
    keys = os.path.join(tempfile.gettempdir(), "sbemulator-keys-%d.json" % os.getpid())
    with open(keys, "w") as f:
        f.write('{"Sbkit": {"SharedAccessKeys": [{"KeyName": "RootManageSharedAccessKey", "Key": "right-key"}]}}')
    keyed = Emulator(env["command"], name="keyed", extra=["-config", keys, "-queue", "keyed"])
    try:
        conn = keyed.start()
        expect("SharedAccessKey=right-key" in conn, "the connection string %r names no key of the file" % conn)

        def client_with(cs):
            return ServiceBusClient.from_connection_string(
                cs, connection_verify=keyed.cert, retry_total=0, retry_backoff_factor=0.2)

        with client_with(conn) as right:
            with right.get_queue_sender("keyed") as s:
                s.send_messages(ServiceBusMessage("keyed", message_id="k-1"))
            with right.get_queue_receiver("keyed") as r:
                got = receive_n(r, 1)
                expect_eq([m.message_id for m in got], ["k-1"], "received with the right key")
                r.complete_message(got[0])
        with client_with(conn.replace("right-key", "wrong-key")) as wrong:
            def send():
                with wrong.get_queue_sender("keyed") as s:
                    s.send_messages(ServiceBusMessage("refused"))

            def receive():
                with wrong.get_queue_receiver("keyed") as r:
                    r.receive_messages(max_message_count=1, max_wait_time=SHORT_WAIT)

            expect_raises(ServiceBusAuthenticationError, send, "send with a wrong key")
            expect_raises(ServiceBusAuthenticationError, receive, "receive with a wrong key")
    finally:
        if keyed.proc is not None:
            keyed.stop()
        for f in (keys, keyed.cert):
            try:
                os.remove(f)
            except OSError:
                pass


class Run:
    """One step running in its own thread; at most PARALLEL steps run at once."""

    slots = threading.BoundedSemaphore(6)

    def __init__(self, name, fn, client, env):
        self.name, self.fn, self.client, self.env = name, fn, client, env
        self.started = threading.Event()
        self.t0 = self.t1 = None
        self.failure = "did not finish"
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        with Run.slots:
            self.t0 = time.monotonic()
            self.started.set()
            try:
                self.fn(self.client, self.env)
                self.failure = None
            except Exception as err:  # reported as the step's failure
                self.failure = failure_text(err)
                if os.environ.get("CONFORMANCE_TRACE"):
                    traceback.print_exc()
            self.t1 = time.monotonic()

    def wait(self):
        """Waits for the step, at most STEP_TIMEOUT from its start: None or the failure."""
        self.started.wait()
        self.thread.join(max(0, STEP_TIMEOUT - (time.monotonic() - self.t0)))
        if self.thread.is_alive():
            return "timed out after %d s" % STEP_TIMEOUT
        return self.failure


def main():
    command = shlex.split(os.environ.get("SBEMULATOR_COMMAND", ""))
    if not command and len(sys.argv) != 2:
        print("usage: python3 conformance.py /path/to/sbemulator, or SBEMULATOR_COMMAND set", file=sys.stderr)
        return 2
    emu = Emulator(command or [sys.argv[1]])
    started = time.monotonic()
    conn = emu.start()
    print("emulator started in %d ms: %s" % ((time.monotonic() - started) * 1000, conn), flush=True)
    # What the SDK reads to trust the emulator's certificate: OpenSSL's (uamqp) and
    # requests' (the admin client) standard variables.
    os.environ["SSL_CERT_FILE"] = emu.cert
    os.environ["REQUESTS_CA_BUNDLE"] = emu.cert
    from azure.servicebus import ServiceBusClient

    if not os.environ.get("CONFORMANCE_TRACE"):
        # uamqp logs the errors the steps provoke (a missing entity, lost locks).
        logging.getLogger().addHandler(logging.NullHandler())
    env = {"conn": conn, "command": emu.command}
    client = ServiceBusClient.from_connection_string(conn, retry_total=1, retry_backoff_factor=0.2)
    passed = failed = 0
    # The steps use entities of their own, so they run side by side: the SDK takes most
    # of a second to close each sender and receiver.
    only = os.environ.get("CONFORMANCE_STEPS", "").lower()
    runs = [Run(name, fn, client, env) for name, fn in STEPS if only in name.lower()]
    for run in runs:
        failure = run.wait()
        ms = ((run.t1 or time.monotonic()) - run.t0) * 1000
        if failure is None:
            passed += 1
            print("ok   %s (%d ms)" % (run.name, ms), flush=True)
        else:
            failed += 1
            print("FAIL %s (%d ms): %s" % (run.name, ms, failure), flush=True)
    client.close()
    try:
        emu.stop()
        passed += 1
        print("ok   the emulator stops cleanly on SIGTERM")
    except AssertionError as err:
        failed += 1
        print("FAIL the emulator stops cleanly on SIGTERM: %s" % err)
    try:
        os.remove(emu.cert)
    except OSError:
        pass
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
