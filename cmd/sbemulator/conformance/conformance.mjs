// Conformance of cmd/sbemulator with the JavaScript Service Bus SDK (@azure/service-bus,
// pinned in package.json). Usage:
//
//	node conformance.mjs /path/to/sbemulator     start the emulator with Config.json, test, stop it
//	SERVICEBUS_CONNECTION_STRING=... node conformance.mjs
//	                                            test a running emulator that has Config.json's entities
//
// Against a running emulator, SBEMULATOR_HTTP_URL (http://HOST:PORT of its plain-HTTP
// port) enables the health check step and SBEMULATOR_ADMIN_CERT_FILE (the file its
// -admin-cert wrote) the admin client step.
//
// Each step runs against its own entity of Config.json. The last line is
// "N passed, M failed"; the exit code is 1 when a step failed.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { readFileSync, rmSync } from "node:fs";
import { ServiceBusClient } from "@azure/service-bus";
import WebSocket from "ws";

const here = dirname(fileURLToPath(import.meta.url));
const stepTimeoutMs = 20000;
const shortWait = { maxWaitTimeInMs: 1000 };

// ---- the emulator process -------------------------------------------------------------

let emulator; // the child process, when this script started it
// -cert: the running emulator's, or the one this script's emulator writes.
const ownCert = !process.env.SBEMULATOR_ADMIN_CERT_FILE;
const certFile = process.env.SBEMULATOR_ADMIN_CERT_FILE || join(tmpdir(), `sbemulator-cert-${process.pid}.pem`);
let httpURL = process.env.SBEMULATOR_HTTP_URL; // the plain-HTTP port, http://HOST:PORT
let emulatorExit; // resolves with the exit code

async function startEmulator(bin) {
  emulator = spawn(bin, ["-addr", "127.0.0.1:0", "-config", join(here, "Config.json"), "-cert", certFile], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  emulator.stderr.on("data", (d) => (stderr += d));
  emulatorExit = new Promise((resolve) => emulator.on("exit", (code, signal) => resolve({ code, signal, stderr })));
  const lines = createInterface({ input: emulator.stdout });
  const first = await Promise.race([
    new Promise((resolve) => lines.once("line", resolve)),
    emulatorExit.then((e) => Promise.reject(new Error(`emulator exited (${e.code}): ${e.stderr}`))),
    sleep(10000).then(() => Promise.reject(new Error("emulator printed no connection string in 10s"))),
  ]);
  // stderr names the plain-HTTP port before the "listening on" line.
  for (let i = 0; i < 100 && !stderr.includes("listening on"); i++) await sleep(100);
  httpURL = stderr.match(/health check on (http:\/\/\S+)/)?.[1];
  return first.trim();
}

async function stopEmulator() {
  if (!emulator) return;
  emulator.kill("SIGTERM");
  const e = await Promise.race([emulatorExit, sleep(10000).then(() => null)]);
  if (e === null) {
    emulator.kill("SIGKILL");
    throw new Error("emulator did not stop within 10s of SIGTERM");
  }
  if (e.code !== 0) throw new Error(`emulator exited with ${e.code ?? e.signal} after SIGTERM: ${e.stderr}`);
}

// ---- a tiny test runner ---------------------------------------------------------------

const steps = [];
function step(name, fn, opts = {}) {
  steps.push({ name, fn, ...opts });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function withTimeout(p, ms, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms))),
  ]);
}

function expect(cond, what) {
  if (!cond) throw new Error(what);
}

function expectEq(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}

// receiveN receives until it has n messages or a receive returns none.
async function receiveN(receiver, n) {
  const out = [];
  while (out.length < n) {
    const got = await receiver.receiveMessages(n - out.length, shortWait);
    if (got.length === 0) break;
    out.push(...got);
  }
  return out;
}

// expectEmpty checks that the entity has nothing left to receive.
async function expectEmpty(client, queue, what) {
  const r = client.createReceiver(queue);
  try {
    const left = await r.peekMessages(10);
    expectEq(left.length, 0, `${what}: messages left in ${queue}`);
  } finally {
    await r.close();
  }
}

// ---- the steps ------------------------------------------------------------------------

step("send a single message; receive it in peek-lock mode; complete it", async (client) => {
  const s = client.createSender("send");
  await s.sendMessages({ body: "hello", messageId: "m-1" });
  const r = client.createReceiver("send");
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  expectEq(m.body, "hello", "body");
  expectEq(m.messageId, "m-1", "messageId");
  expectEq(m.deliveryCount, 0, "deliveryCount of a first delivery");
  expect(typeof m.lockToken === "string" && m.lockToken.length === 36, `lockToken ${m.lockToken}`);
  await r.completeMessage(m);
  await r.close();
  await s.close();
  await expectEmpty(client, "send", "after complete");
});

step("send a batch; messages arrive in order", async (client) => {
  const s = client.createSender("batch");
  const batch = await s.createMessageBatch();
  for (let i = 0; i < 5; i++) expect(batch.tryAddMessage({ body: `b${i}` }), `tryAddMessage ${i}`);
  await s.sendMessages(batch);
  await s.sendMessages([{ body: "a0" }, { body: "a1" }]); // an array is a batch too
  const r = client.createReceiver("batch", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(r, 7);
  expectEq(got.map((m) => m.body), ["b0", "b1", "b2", "b3", "b4", "a0", "a1"], "bodies");
  const seqs = got.map((m) => m.sequenceNumber.toNumber());
  expect(seqs.every((n, i) => i === 0 || n > seqs[i - 1]), `sequence numbers not increasing: ${seqs}`);
  await r.close();
  await s.close();
});

step("a message sent without messageId gets one; settlement works", async (client) => {
  const s = client.createSender("noid");
  await s.sendMessages({ body: "no id" });
  const r = client.createReceiver("noid");
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  expect(typeof m.messageId === "string" && m.messageId.length > 0, `messageId ${JSON.stringify(m.messageId)}`);
  await r.completeMessage(m);
  await r.close();
  await s.close();
});

step("schedule two messages, cancel one; only the other arrives", async (client) => {
  const s = client.createSender("schedule");
  const soon = new Date(Date.now() + 1000);
  const [keep] = await s.scheduleMessages([{ body: "kept" }], soon);
  const [drop] = await s.scheduleMessages([{ body: "cancelled" }], new Date(Date.now() + 60000));
  expect(keep && drop && !keep.equals(drop), `sequence numbers ${keep} ${drop}`);
  const r = client.createReceiver("schedule");
  const peeked = await r.peekMessages(10);
  expectEq(peeked.map((m) => m.state), ["scheduled", "scheduled"], "states of the peeked scheduled messages");
  await s.cancelScheduledMessages(drop);
  const [m] = await r.receiveMessages(1, { maxWaitTimeInMs: 5000 });
  expect(m, "the scheduled message did not arrive");
  expectEq(m.body, "kept", "body");
  expect(m.enqueuedTimeUtc.getTime() >= soon.getTime() - 1000, `enqueued ${m.enqueuedTimeUtc.toISOString()} before ${soon.toISOString()}`);
  // Service Bus docs, message sequencing: an activated scheduled message gets a new sequence number.
  expect(m.sequenceNumber.greaterThan(drop), `sequence number ${m.sequenceNumber}, want one after the scheduled ${keep} and ${drop}`);
  await r.completeMessage(m);
  const left = await r.peekMessages(10);
  expectEq(left.length, 0, "messages left after the cancel");
  await r.close();
  await s.close();
});

step("receive-and-delete removes the messages", async (client) => {
  const s = client.createSender("rad");
  await s.sendMessages([{ body: 1 }, { body: 2 }]);
  const r = client.createReceiver("rad", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(r, 2);
  expectEq(got.map((m) => m.body), [1, 2], "bodies");
  expect(got.every((m) => m.lockToken === undefined), "receive-and-delete messages carry no lock token");
  await r.close();
  await s.close();
  await expectEmpty(client, "rad", "after receive-and-delete");
});

step("every broker property round-trips", async (client) => {
  const s = client.createSender("props");
  const sent = {
    body: { order: 42, items: ["a", "b"] },
    messageId: "props-1",
    correlationId: "corr-1",
    contentType: "application/json",
    subject: "order-placed",
    to: "shipping",
    replyTo: "replies",
    replyToSessionId: "reply-session",
    partitionKey: "pk-1",
    timeToLive: 120000,
    applicationProperties: { s: "text", n: 7, f: 1.5, b: true, d: new Date("2024-01-02T03:04:05Z") },
  };
  const before = Date.now();
  await s.sendMessages(sent);
  const r = client.createReceiver("props", { skipConvertingDate: true });
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  for (const k of ["body", "messageId", "correlationId", "contentType", "subject", "to", "replyTo", "replyToSessionId", "partitionKey", "timeToLive"]) {
    expectEq(m[k], sent[k], k);
  }
  const ap = m.applicationProperties;
  expectEq([ap.s, ap.n, ap.f, ap.b], ["text", 7, 1.5, true], "application properties");
  expect(ap.d instanceof Date && ap.d.getTime() === sent.applicationProperties.d.getTime(), `date property ${ap.d}`);
  expect(m.sequenceNumber && m.sequenceNumber.toNumber() > 0, `sequenceNumber ${m.sequenceNumber}`);
  expect(m.enqueuedTimeUtc instanceof Date && m.enqueuedTimeUtc.getTime() >= before - 2000, `enqueuedTimeUtc ${m.enqueuedTimeUtc}`);
  expect(m.lockedUntilUtc instanceof Date && m.lockedUntilUtc > m.enqueuedTimeUtc, `lockedUntilUtc ${m.lockedUntilUtc}`);
  expectEq(m.expiresAtUtc.getTime() - m.enqueuedTimeUtc.getTime(), 120000, "expiresAtUtc - enqueuedTimeUtc");
  expectEq(m.state, "active", "state");
  expectEq(m.deliveryCount, 0, "deliveryCount");
  await r.completeMessage(m);
  await r.close();
  await s.close();
});

step("renew the lock", async (client) => {
  const s = client.createSender("renew");
  await s.sendMessages({ body: "renew me" });
  const r = client.createReceiver("renew", { maxAutoLockRenewalDurationInMs: 0 });
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  const first = m.lockedUntilUtc;
  await sleep(1100);
  const until = await r.renewMessageLock(m);
  expect(until instanceof Date && until > first, `renewed until ${until?.toISOString?.()}, was ${first.toISOString()}`);
  expectEq(m.lockedUntilUtc.getTime(), until.getTime(), "message's lockedUntilUtc after the renewal");
  await r.completeMessage(m);
  await r.close();
  await s.close();
});

step("abandon: the message is redelivered with deliveryCount 1", async (client) => {
  const s = client.createSender("abandon");
  await s.sendMessages({ body: "again", messageId: "ab-1" });
  const r = client.createReceiver("abandon");
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  await r.abandonMessage(m, { reason: "retry" });
  const [again] = await receiveN(r, 1);
  expect(again, "not redelivered");
  expectEq(again.messageId, "ab-1", "messageId");
  expectEq(again.deliveryCount, 1, "deliveryCount after an abandon");
  expectEq(again.applicationProperties?.reason, "retry", "property modified by the abandon");
  await r.completeMessage(again);
  await r.close();
  await s.close();
});

step("defer, then receive the deferred message by sequence number", async (client) => {
  const s = client.createSender("defer");
  await s.sendMessages({ body: "later" });
  const r = client.createReceiver("defer");
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  const seq = m.sequenceNumber;
  await r.deferMessage(m);
  const none = await r.receiveMessages(1, { maxWaitTimeInMs: 500 });
  expectEq(none.length, 0, "a deferred message is not received normally");
  const [d] = await r.receiveDeferredMessages(seq);
  expect(d, "receiveDeferredMessages returned nothing");
  expectEq(d.body, "later", "body");
  expectEq(d.state, "deferred", "state");
  await r.completeMessage(d);
  await r.close();
  await s.close();
  await expectEmpty(client, "defer", "after completing the deferred message");
});

step("dead-letter with reason and description; read the dead-letter queue", async (client) => {
  const s = client.createSender("deadletter");
  await s.sendMessages({ body: "poison", messageId: "dl-1" });
  const r = client.createReceiver("deadletter");
  const [m] = await receiveN(r, 1);
  expect(m, "no message received");
  await r.deadLetterMessage(m, { deadLetterReason: "Invalid", deadLetterErrorDescription: "bad payload" });
  await r.close();
  const dlq = client.createReceiver("deadletter", { subQueueType: "deadLetter" });
  const [d] = await receiveN(dlq, 1);
  expect(d, "nothing in the dead-letter queue");
  expectEq([d.messageId, d.body], ["dl-1", "poison"], "messageId and body");
  expectEq(d.deadLetterReason, "Invalid", "deadLetterReason");
  expectEq(d.deadLetterErrorDescription, "bad payload", "deadLetterErrorDescription");
  await dlq.completeMessage(d);
  await dlq.close();
  await s.close();
  await expectEmpty(client, "deadletter", "main queue after dead-lettering");
});

step("peek does not lock, and continues where it stopped", async (client) => {
  const s = client.createSender("peek");
  await s.sendMessages([{ body: "p0" }, { body: "p1" }, { body: "p2" }]);
  const r = client.createReceiver("peek");
  const first = await r.peekMessages(2);
  expectEq(first.map((m) => m.body), ["p0", "p1"], "first peek");
  expect(first.every((m) => m.lockToken === undefined), "peeked messages carry no lock token");
  const next = await r.peekMessages(2);
  expectEq(next.map((m) => m.body), ["p2"], "second peek");
  const from = await r.peekMessages(3, { fromSequenceNumber: first[1].sequenceNumber });
  expectEq(from.map((m) => m.body), ["p1", "p2"], "peek from a sequence number");
  const got = await receiveN(r, 3);
  expectEq(got.map((m) => m.body), ["p0", "p1", "p2"], "peeked messages are still receivable");
  for (const m of got) await r.completeMessage(m);
  await r.close();
  await s.close();
});

step("streaming subscribe receives and auto-completes", async (client) => {
  const s = client.createSender("stream");
  const n = 20;
  await s.sendMessages(Array.from({ length: n }, (_, i) => ({ body: i })));
  const r = client.createReceiver("stream");
  const seen = [];
  let failure;
  await new Promise((resolve, reject) => {
    const sub = r.subscribe(
      {
        processMessage: async (m) => {
          seen.push(m.body);
          if (seen.length === n) sub.close().then(resolve, reject);
        },
        processError: async (args) => {
          failure = args.error;
        },
      },
      { autoCompleteMessages: true, maxConcurrentCalls: 4 },
    );
  });
  expect(!failure, `processError: ${failure}`);
  expectEq(seen.slice().sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i), "bodies");
  await r.close();
  await s.close();
  await sleep(200); // the last completions travel after close resolves
  await expectEmpty(client, "stream", "after subscribe with autoComplete");
});

step("topic: subscriptions get the messages their rules match", async (client) => {
  const s = client.createSender("events");
  await s.sendMessages([
    { body: "c", subject: "created", applicationProperties: { priority: "low" } },
    { body: "d", subject: "deleted", applicationProperties: { priority: "high" } },
  ]);
  const want = { audit: ["c", "d"], billing: ["c"], urgent: ["d"] }; // $Default, Label = created, priority = 'high'
  for (const [sub, bodies] of Object.entries(want)) {
    const r = client.createReceiver("events", sub, { receiveMode: "receiveAndDelete" });
    const got = await receiveN(r, 2);
    expectEq(got.map((m) => m.body), bodies, `subscription ${sub}`);
    if (sub === "urgent") expectEq(got[0].applicationProperties.routed, "urgent", "property set by the rule's action");
    await r.close();
  }
  await s.close();
});

step("duplicate detection drops a repeated messageId", async (client) => {
  const s = client.createSender("dedupe");
  await s.sendMessages({ body: 1, messageId: "same" });
  await s.sendMessages({ body: 2, messageId: "same" });
  const r = client.createReceiver("dedupe", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(r, 2);
  expectEq(got.map((m) => m.body), [1], "bodies");
  await r.close();
  await s.close();
});

step("sessions: accept by id and next, in order, state, renew the session lock", async (client) => {
  const s = client.createSender("sessions");
  await s.sendMessages([
    { body: "a0", sessionId: "a" },
    { body: "b0", sessionId: "b" },
    { body: "a1", sessionId: "a" },
    { body: "a2", sessionId: "a" },
  ]);
  const a = await client.acceptSession("sessions", "a");
  expectEq(a.sessionId, "a", "sessionId of the accepted session");
  const got = await receiveN(a, 3);
  expectEq(got.map((m) => [m.body, m.sessionId]), [["a0", "a"], ["a1", "a"], ["a2", "a"]], "session a in order");
  await a.setSessionState("step-1");
  expectEq(await a.getSessionState(), "step-1", "session state");
  const before = a.sessionLockedUntilUtc;
  await sleep(1100);
  const until = await a.renewSessionLock();
  expect(until > before, `session lock renewed until ${until?.toISOString?.()}, was ${before?.toISOString?.()}`);
  for (const m of got) await a.completeMessage(m);
  await a.close();
  const next = await client.acceptNextSession("sessions");
  expectEq(next.sessionId, "b", "the next session with messages");
  const [b] = await receiveN(next, 1);
  expectEq(b?.body, "b0", "session b's message");
  await next.completeMessage(b);
  await next.close();
  await s.close();
});

step("auto-forwarding passes messages on", async (client) => {
  const s = client.createSender("forward-in");
  await s.sendMessages({ body: "passed on", messageId: "fw-1" });
  const r = client.createReceiver("forward-out", { receiveMode: "receiveAndDelete" });
  const [m] = await receiveN(r, 1);
  expectEq([m?.messageId, m?.body], ["fw-1", "passed on"], "the forwarded message");
  await r.close();
  await s.close();
  await expectEmpty(client, "forward-in", "the forwarding queue");
});

// Microsoft's emulator's health check (its installer's HealthCheckApiSchema.md), which
// its samples wait on before anything else.
step("GET /health on the plain-HTTP port is 200 healthy", async () => {
  const res = await fetch(`${httpURL}/health`);
  const body = await res.json();
  expectEq([res.status, body.status], [200, "healthy"], "the health check's status and body");
}, { needs: () => (httpURL ? null : "the plain-HTTP port's URL (SBEMULATOR_HTTP_URL)") });

// Needs the certificate the emulator wrote.
step("the admin client creates, reads, lists and deletes entities", async (_client, conn) => {
  const child = spawn(process.execPath, [join(here, "admin.mjs")], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: certFile, SERVICEBUS_CONNECTION_STRING: conn },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  expectEq(code, 0, `admin.mjs exit code (${stderr.trim()})`);
}, { needs: () => (emulator || !ownCert ? null : "the emulator's certificate (SBEMULATOR_ADMIN_CERT_FILE)") });

// AMQP over WebSockets: with webSocketOptions the SDK connects to
// wss://HOST:PORT/$servicebus/websocket with the port of the connection string's Endpoint,
// where the emulator serves TLS; ws trusts the emulator's certificate through its ca
// option.
step("AMQP over WebSockets (webSocketOptions, ws): send, receive, abandon, complete", async (_client, conn) => {
  const wsClient = new ServiceBusClient(conn, {
    webSocketOptions: { webSocket: WebSocket, webSocketConstructorOptions: { ca: readFileSync(certFile) } },
    retryOptions: { maxRetries: 1, retryDelayInMs: 200, timeoutInMs: 10000 },
  });
  try {
    const s = wsClient.createSender("websocket");
    const big = "w".repeat(200000); // many AMQP frames, many WebSocket messages
    await s.sendMessages([{ body: "over ws", messageId: "ws-1" }, { body: big }]);
    const r = wsClient.createReceiver("websocket");
    const got = await receiveN(r, 2);
    expectEq(got.map((m) => (m.body.length > 100 ? m.body.length : m.body)), ["over ws", 200000], "bodies");
    await r.abandonMessage(got[0]);
    const [again] = await receiveN(r, 1);
    expectEq([again.messageId, again.deliveryCount], ["ws-1", 1], "the abandoned message's id and delivery count");
    await r.completeMessage(again);
    await r.completeMessage(got[1]);
    await r.close();
    await s.close();
    await expectEmpty(wsClient, "websocket", "after completing over WebSockets");
  } finally {
    await wsClient.close();
  }
}, { needs: () => (emulator || !ownCert ? null : "the emulator's certificate (SBEMULATOR_ADMIN_CERT_FILE)") });

// The runtime REST API ("Service Bus runtime REST API") on the plain-HTTP port, with
// fetch: a message sent over HTTP is received and completed by the SDK over AMQP, and one
// the SDK sent is peek-locked, unlocked, locked again and deleted over HTTP.
step("HTTP data plane: send over HTTP, settle over AMQP, and the reverse", async (client) => {
  const base = `${httpURL}/http/messages`;
  let res = await fetch(base, {
    method: "POST",
    headers: { "Content-Type": "application/json", BrokerProperties: JSON.stringify({ MessageId: "h-1", Label: "from-http" }), Priority: '"High"' },
    body: JSON.stringify({ via: "http" }),
  });
  expectEq(res.status, 201, "Send Message status");
  const r = client.createReceiver("http");
  const [m] = await receiveN(r, 1);
  expect(m, "the message sent over HTTP was not received over AMQP");
  expectEq([m.messageId, m.subject, m.applicationProperties?.Priority, m.body], ["h-1", "from-http", "High", { via: "http" }], "the message sent over HTTP");
  await r.completeMessage(m);

  const s = client.createSender("http");
  await s.sendMessages({ body: "via amqp", messageId: "a-1", applicationProperties: { n: 3 } });
  res = await fetch(`${base}/head?timeout=5`, { method: "POST" });
  expectEq(res.status, 201, "Peek-Lock Message status");
  let bp = JSON.parse(res.headers.get("BrokerProperties"));
  expectEq([bp.MessageId, bp.DeliveryCount, res.headers.get("n")], ["a-1", 1, "3"], "BrokerProperties and custom properties");
  expectEq(await res.text(), JSON.stringify("via amqp"), "the body (the SDK encodes a string as JSON)");
  let loc = res.headers.get("Location");
  expectEq((await fetch(loc, { method: "PUT" })).status, 200, "Unlock Message status");
  res = await fetch(`${base}/head?timeout=5`, { method: "POST" });
  expectEq(res.status, 201, "second Peek-Lock status");
  bp = JSON.parse(res.headers.get("BrokerProperties"));
  expectEq(bp.DeliveryCount, 2, "delivery count after an unlock");
  loc = res.headers.get("Location");
  expectEq((await fetch(loc, { method: "POST" })).status, 200, "Renew-Lock status");
  expectEq((await fetch(loc, { method: "DELETE" })).status, 200, "Delete Message status");
  expectEq((await fetch(loc, { method: "DELETE" })).status, 404, "Delete Message of a settled message");
  expectEq((await fetch(`${base}/head?timeout=0`, { method: "DELETE" })).status, 204, "Receive and Delete of an empty queue");
  expectEq((await fetch(`${httpURL}/no-such-queue/messages`, { method: "POST", body: "x" })).status, 410, "Send Message to a missing queue");
  await r.close();
  await s.close();
}, { needs: () => (httpURL ? null : "the plain-HTTP port's URL (SBEMULATOR_HTTP_URL)") });

// A second emulator, started with -sas-key, checks tokens as the service does.
step("with -sas-key, the right key sends and a wrong key is UnauthorizedAccess", async () => {
  const keyed = spawn(process.argv[2], ["-addr", "127.0.0.1:0", "-http-addr", "off", "-queue", "keyed",
    "-sas-key", "RootManageSharedAccessKey=right-key"], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    const conn = await new Promise((resolve) => createInterface({ input: keyed.stdout }).once("line", resolve));
    const send = async (cs) => {
      const c = new ServiceBusClient(cs, { retryOptions: { maxRetries: 0 } });
      const s = c.createSender("keyed");
      try {
        await s.sendMessages({ body: "x" });
        return "sent";
      } catch (err) {
        return err.code;
      } finally {
        await s.close();
        await c.close();
      }
    };
    expectEq(await send(conn), "sent", "send with the right key");
    expectEq(await send(conn.replace("right-key", "wrong-key")), "UnauthorizedAccess", "send with a wrong key");
  } finally {
    keyed.kill("SIGTERM");
  }
}, { needs: () => (process.argv[2] ? null : "the emulator binary (a running emulator was given)") });

step("a missing entity is MessagingEntityNotFound", async (client) => {
  const s = client.createSender("no-such-queue");
  try {
    await s.sendMessages({ body: "lost" });
    throw new Error("send to a missing queue succeeded");
  } catch (err) {
    expectEq(err.code, "MessagingEntityNotFound", `send error code (${err.message})`);
  } finally {
    await s.close();
  }
  const r = client.createReceiver("no-such-queue");
  try {
    await r.receiveMessages(1, shortWait);
    throw new Error("receive from a missing queue succeeded");
  } catch (err) {
    expectEq(err.code, "MessagingEntityNotFound", `receive error code (${err.message})`);
  } finally {
    await r.close();
  }
});

// ---- main -----------------------------------------------------------------------------

async function main() {
  let passed = 0;
  let failed = 0;
  let conn = process.env.SERVICEBUS_CONNECTION_STRING;
  const started = Date.now();
  if (!conn) {
    const bin = process.argv[2];
    if (!bin) {
      console.error("usage: node conformance.mjs /path/to/sbemulator (or set SERVICEBUS_CONNECTION_STRING)");
      process.exit(2);
    }
    conn = await startEmulator(bin);
    console.log(`emulator started in ${Date.now() - started} ms: ${conn}`);
  }
  const client = new ServiceBusClient(conn, { retryOptions: { maxRetries: 1, retryDelayInMs: 200, timeoutInMs: 10000 } });
  let skipped = 0;
  for (const { name, fn, needs } of steps) {
    const missing = needs?.();
    if (missing) {
      skipped++;
      console.log(`skip ${name} (needs ${missing})`);
      continue;
    }
    const t0 = Date.now();
    try {
      await withTimeout(fn(client, conn), stepTimeoutMs, name);
      passed++;
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${name} (${Date.now() - t0} ms): ${err?.code ? err.code + ": " : ""}${err?.message ?? err}`);
    }
  }
  await withTimeout(client.close(), 10000, "client.close").catch((err) => console.log(`client.close: ${err.message}`));
  try {
    await stopEmulator();
    if (emulator) {
      passed++;
      console.log("ok   the emulator stops cleanly on SIGTERM");
    }
  } catch (err) {
    failed++;
    console.log(`FAIL the emulator stops cleanly on SIGTERM: ${err.message}`);
  }
  if (ownCert) rmSync(certFile, { force: true });
  console.log(`${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
  process.exit(failed === 0 ? 0 : 1);
}

main().catch(async (err) => {
  console.log(`conformance: ${err?.stack ?? err}`);
  if (emulator) emulator.kill("SIGKILL");
  console.log("0 passed, 1 failed");
  process.exit(1);
});
