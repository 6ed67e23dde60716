# A generic AMQP 1.0 client against cmd/sbemulator: Apache Qpid Proton (python3-qpid-proton),
# which knows nothing of Service Bus, drives what the SDKs never do. Every outcome
# (accepted, released, rejected, modified both ways), link credit and drain, pre-settled
# and unsettled transfers in flight together, multi-frame messages both ways, every
# message section, and a $management request by hand; plain AMQP and AMQP over TLS.
# Usage:
#
#   /usr/bin/python3 probe.py /path/to/sbemulator
#
# The last line is "N passed, M failed"; the exit code is 1 when a step failed.
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

from proton import Delivery, Message, SSLDomain, int32, symbol, ulong
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

from checks import Steps, expect, expect_eq, failure_text

QUEUES = ["outcomes", "credit", "inflight", "big", "sections", "tls"]
WAIT = 10  # seconds any single wait may take


class Emulator:
    def __init__(self, binary):
        self.cert = os.path.join(tempfile.gettempdir(), "sbemulator-probe-%d.pem" % os.getpid())
        self.proc = subprocess.Popen(
            [binary, "-addr", "127.0.0.1:0", "-queue", ",".join(QUEUES), "-lock-duration", "30s", "-cert", self.cert],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        line = self.proc.stdout.readline().strip()
        if not line.startswith("Endpoint=sb://"):
            raise RuntimeError("the emulator did not start: %s" % "".join(self.stderr))
        self.addr = line[len("Endpoint=sb://"):].split(";")[0]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(10)
        try:
            os.remove(self.cert)
        except OSError:
            pass
        if code != 0:
            raise AssertionError("the emulator exited with %s: %s" % (code, "".join(self.stderr)))


def connect(env, tls=False):
    url = "amqp://%s" % env["addr"]
    kw = {}
    if tls:
        url = "amqps://%s" % env["addr"]
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(env["cert"])
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
        kw["ssl_domain"] = domain
    return BlockingConnection(url, timeout=WAIT, allowed_mechs="ANONYMOUS", **kw)


def send(conn, address, bodies):
    snd = conn.create_sender(address)
    for b in bodies:
        snd.send(b if isinstance(b, Message) else Message(body=b))
    snd.close()


def take(conn, rcv, n):
    """Receives n messages and leaves them unsettled on rcv."""
    return [rcv.receive(timeout=WAIT) for _ in range(n)]


def settle_next(rcv, state, failed=None, undeliverable=None, annotations=None):
    """Settles the oldest unsettled delivery of rcv with state and the modified fields."""
    d = rcv.fetcher.unsettled.popleft()
    if failed is not None:
        d.local.failed = failed
    if undeliverable is not None:
        d.local.undeliverable = undeliverable
    if annotations is not None:
        d.local.annotations = annotations
    d.update(state)
    d.settle()


class Management:
    """$management requests over a pair of links, by hand."""

    def __init__(self, conn, entity):
        self.conn = conn
        self.reply = "probe-reply-%s" % uuid.uuid4()
        self.snd = conn.create_sender(entity + "/$management")
        self.rcv = conn.create_receiver(entity + "/$management", name=self.reply, options=_Target(self.reply))

    def request(self, operation, body):
        self.snd.send(Message(body=body, properties={"operation": operation}, reply_to=self.reply, id=str(uuid.uuid4())))
        return self.rcv.receive(timeout=WAIT)  # responses come settled

    def peek(self, n=10):
        resp = self.request("com.microsoft:peek-message", {"from-sequence-number": 0, "message-count": int32(n)})
        code = resp.properties["statusCode"]
        if code == 204:
            return []
        expect_eq(code, 200, "peek statusCode")
        out = []
        for entry in resp.body["messages"]:
            m = Message()
            m.decode(entry["message"])
            out.append(m)
        return out


class _Target:
    """A receiver option that names the link's target (the reply-to of requests)."""

    def __init__(self, address):
        self.address = address

    def apply(self, link):
        link.target.address = self.address

    def test(self, link):
        return link.is_receiver


def seq(m):
    return m.annotations["x-opt-sequence-number"]


STEPS = Steps()
step = STEPS


@step("every outcome: accepted, released, rejected, modified (failed; undeliverable-here)")
def _(env):
    conn = connect(env)
    try:
        send(conn, "outcomes", ["accept", "release", "reject", "modify-failed", "modify-undeliverable"])
        rcv = conn.create_receiver("outcomes", credit=0)
        rcv.link.flow(5)
        got = take(conn, rcv, 5)
        expect_eq([m.body for m in got], ["accept", "release", "reject", "modify-failed", "modify-undeliverable"], "bodies")
        expect(all(m.delivery_count == 0 for m in got), "first deliveries with delivery-count %s" % [m.delivery_count for m in got])
        settle_next(rcv, Delivery.ACCEPTED)
        settle_next(rcv, Delivery.RELEASED)
        settle_next(rcv, Delivery.REJECTED)
        settle_next(rcv, Delivery.MODIFIED, failed=True, annotations={symbol("touched"): "yes"})
        settle_next(rcv, Delivery.MODIFIED, failed=False, undeliverable=True)
        # Released and modified come back, in order; the modified one counts its delivery
        # and carries its annotations as properties; accepted, rejected and deferred do not.
        rcv.link.flow(3)
        again = sorted((rcv.receive(timeout=WAIT) for _ in range(2)), key=lambda m: m.body)
        expect_eq([(m.body, m.delivery_count) for m in again], [("modify-failed", 1), ("release", 0)], "redelivered (body, delivery-count)")
        expect_eq((again[0].properties or {}).get("touched"), "yes", "property set by the modified outcome")
        rcv.accept()
        rcv.accept()
        peeked = Management(conn, "outcomes").peek()
        expect_eq([(m.body, m.annotations.get("x-opt-message-state")) for m in peeked], [("modify-undeliverable", 1)],
                  "left in the queue (body, x-opt-message-state): the undeliverable-here one, deferred")
        dlq = conn.create_receiver("outcomes/$DeadLetterQueue")
        dead = dlq.receive(timeout=WAIT)
        dlq.accept()
        expect_eq(dead.body, "reject", "the rejected message in the dead-letter queue")
    finally:
        conn.close()


@step("link credit bounds deliveries; drain uses up the credit and completes")
def _(env):
    conn = connect(env)
    try:
        send(conn, "credit", ["c%d" % i for i in range(5)])
        rcv = conn.create_receiver("credit", credit=0)
        rcv.link.flow(3)
        conn.wait(lambda: rcv.fetcher.has_message >= 3, timeout=WAIT, msg="3 deliveries")
        time.sleep(0.2)
        expect_eq(rcv.fetcher.has_message, 3, "deliveries for a credit of 3")
        expect_eq(rcv.link.credit, 0, "credit left")
        # The drain completes when the server's flow takes the credit that is left; Proton's
        # draining() turns false as soon as the credit equals what is queued.
        rcv.link.drain(10)
        conn.wait(lambda: rcv.link.credit == 0, timeout=WAIT, msg="the drain to complete")
        expect_eq(rcv.fetcher.has_message, 5, "deliveries after a drain of 10 with 2 left")
        rcv.link.drain(4)  # nothing left: the drain completes at once
        conn.wait(lambda: rcv.link.credit == 0, timeout=WAIT, msg="an empty drain to complete")
        expect_eq(rcv.fetcher.has_message, 5, "deliveries after an empty drain")
        got = [rcv.receive(timeout=WAIT).body for _ in range(5)]
        expect_eq(got, ["c%d" % i for i in range(5)], "bodies in order")
        for _ in got:
            rcv.accept()
    finally:
        conn.close()


@step("pre-settled and unsettled transfers in flight together are all stored, in order")
def _(env):
    conn = connect(env)
    try:
        presettled = conn.create_sender("inflight", name="presettled", options=AtMostOnce())
        unsettled = conn.create_sender("inflight", name="unsettled")
        deliveries = []
        for i in range(40):
            presettled.link.send(Message(body="p%d" % i))
            deliveries.append(unsettled.link.send(Message(body="u%d" % i)))
        conn.wait(lambda: all(d.remote_state for d in deliveries), timeout=WAIT, msg="outcomes of 40 unsettled sends")
        expect(all(d.remote_state == Delivery.ACCEPTED for d in deliveries), "outcomes %s" % {d.remote_state for d in deliveries})
        for d in deliveries:
            d.settle()
        rcv = conn.create_receiver("inflight", credit=100, options=AtMostOnce())
        got = [rcv.receive(timeout=WAIT).body for _ in range(80)]
        expect_eq([b for b in got if b.startswith("p")], ["p%d" % i for i in range(40)], "pre-settled bodies in order")
        expect_eq([b for b in got if b.startswith("u")], ["u%d" % i for i in range(40)], "unsettled bodies in order")
    finally:
        conn.close()


@step("a message of 200 KiB crosses in many frames both ways")
def _(env):
    conn = connect(env)
    try:
        body = bytes(range(256)) * 800
        m = Message(body=body)
        m.inferred = True  # a data section
        send(conn, "big", [m])
        rcv = conn.create_receiver("big")
        got = rcv.receive(timeout=WAIT)
        rcv.accept()
        expect_eq(len(got.body), len(body), "body length")
        expect(bytes(got.body) == body, "the body came back different")
    finally:
        conn.close()


@step("every message section: header, annotations, properties, application properties, bodies")
def _(env):
    conn = connect(env)
    try:
        mid = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
        m = Message(body=b"data", durable=True, priority=7, ttl=60, first_acquirer=False, id=mid, user_id=b"user",
                    address="to-somewhere", subject="subject", reply_to="reply", correlation_id=ulong(42),
                    content_type="text/plain", content_encoding="identity", creation_time=1700000000.0,
                    group_id=None, group_sequence=3, reply_to_group_id="reply-group",
                    properties={"s": "text", "n": int32(7), "f": 1.5, "b": True})
        m.inferred = True
        m.instructions = {symbol("x-opt-delivery"): "instruction"}
        m.annotations = {symbol("x-opt-custom"): "kept", symbol("custom"): 1}
        value = Message(body={"k": "v", "n": int32(3)})
        sequence = Message(body=["x", int32(1)])
        sequence.inferred = True
        before = time.time()
        send(conn, "sections", [m, value, sequence])
        rcv = conn.create_receiver("sections")
        got = take(conn, rcv, 3)
        for _ in got:
            rcv.accept()
        g = got[0]
        expect_eq((g.durable, g.priority, g.ttl, g.first_acquirer, g.delivery_count), (True, 7, 60.0, False, 0),
                  "header (durable, priority, ttl, first-acquirer, delivery-count)")
        expect_eq(g.instructions.get("x-opt-delivery"), "instruction", "delivery annotation")
        expect(isinstance(g.instructions.get("x-opt-lock-token"), uuid.UUID), "x-opt-lock-token %r" % g.instructions.get("x-opt-lock-token"))
        expect_eq((g.annotations.get("x-opt-custom"), g.annotations.get("custom")), ("kept", 1), "the client's message annotations")
        expect(isinstance(seq(g), int) and g.annotations.get("x-opt-enqueued-time") and g.annotations.get("x-opt-locked-until"),
               "broker annotations %s" % g.annotations)
        expect("x-opt-message-state" not in g.annotations, "an active message with x-opt-message-state")
        expect_eq((g.id, g.user_id, g.address, g.subject, g.reply_to, g.correlation_id, g.content_type, g.content_encoding,
                   g.group_sequence, g.reply_to_group_id),
                  (mid, b"user", "to-somewhere", "subject", "reply", 42, "text/plain", "identity", 3, "reply-group"),
                  "properties")
        # creation-time and absolute-expiry-time are the broker's: enqueued, and enqueued + ttl.
        expect(abs(g.creation_time - before) < 5, "creation-time %s, want about %s" % (g.creation_time, before))
        expect(abs(g.expiry_time - g.creation_time - 60) < 0.01, "absolute-expiry-time %s, want creation-time + 60 s" % g.expiry_time)
        expect_eq(g.properties, {"s": "text", "n": 7, "f": 1.5, "b": True}, "application properties")
        expect_eq(bytes(g.body), b"data", "data body")
        expect_eq(got[1].body, {"k": "v", "n": 3}, "amqp-value body")
        expect_eq(got[2].body, ["x", 1], "amqp-sequence body")
    finally:
        conn.close()


@step("AMQP over TLS (amqps) on the same port, trusting the emulator's certificate")
def _(env):
    conn = connect(env, tls=True)
    try:
        send(conn, "tls", ["over tls"])
        rcv = conn.create_receiver("tls")
        got = rcv.receive(timeout=WAIT)
        rcv.accept()
        expect_eq(got.body, "over tls", "body")
    finally:
        conn.close()


def main():
    if len(sys.argv) != 2:
        print("usage: python3 probe.py /path/to/sbemulator", file=sys.stderr)
        return 2
    emu = Emulator(sys.argv[1])
    print("emulator started: %s" % emu.addr, flush=True)
    env = {"addr": emu.addr, "cert": emu.cert}
    passed = failed = 0
    for name, fn in STEPS:
        t0 = time.monotonic()
        try:
            fn(env)
            passed += 1
            print("ok   %s (%d ms)" % (name, (time.monotonic() - t0) * 1000), flush=True)
        except Exception as err:  # reported as the step's failure
            failed += 1
            print("FAIL %s (%d ms): %s" % (name, (time.monotonic() - t0) * 1000, failure_text(err)), flush=True)
            if os.environ.get("CONFORMANCE_TRACE"):
                traceback.print_exc()
    try:
        emu.stop()
        passed += 1
        print("ok   the emulator stops cleanly on SIGTERM")
    except Exception as err:
        failed += 1
        print("FAIL the emulator stops cleanly on SIGTERM: %s" % err)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
