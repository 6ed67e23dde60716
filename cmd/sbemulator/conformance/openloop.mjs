// Latency of the JavaScript SDK's processor (@azure/service-bus ServiceBusReceiver.subscribe)
// at a fixed offered load on cmd/sbemulator, the counterpart of sbkit's
// BenchmarkWireOpenLoop (bench_openloop_test.go), so that the two are compared on the
// same emulator. Usage:
//
//	node openloop.mjs /path/to/sbemulator     start the emulator with a queue "work" and a
//	                                          7 ms round trip (-latency 7ms -store-time 1ms;
//	                                          -stats: the queue's counters, released messages
//	                                          included, on stderr when it stops),
//	                                          measure, stop it
//	SERVICEBUS_CONNECTION_STRING=... node openloop.mjs
//	                                          measure against a running emulator that has a
//	                                          queue "work" (then its -latency is the round trip)
//
// Environment: RATES (offered loads in msgs/s, default 100,500,1000), N (messages per
// load, default 2000), CONCURRENCY (maxConcurrentCalls, default 32), HANDLER_MS (each
// handler's sleep, default 5), LATENCY (the emulator's -latency, default 7ms), TIMEOUT_S
// (how long a load may take beyond its sending time before the run fails, default 60: a
// message whose completion was refused is never counted as settled).
//
// A sender of its own (another connection, each send started at its slot, not awaited
// before the next) offers 1 KiB messages at each rate; the processor's handler sleeps,
// then completes the message (autoCompleteMessages off). Latency runs from the broker's
// enqueuedTimeUtc to the handler's start and to the answer to completeMessage; the first
// fifth of each load's messages is the warm-up, left out. One line per load.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { ServiceBusClient } from "@azure/service-bus";

const rates = (process.env.RATES || "100,500,1000").split(",").map(Number);
const perRate = Number(process.env.N || 2000);
const concurrency = Number(process.env.CONCURRENCY || 32);
const handlerMs = Number(process.env.HANDLER_MS || 5);
const latency = process.env.LATENCY || "7ms";
const timeoutS = Number(process.env.TIMEOUT_S || 60);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// now is the wall clock in milliseconds with sub-millisecond resolution.
const now = () => performance.timeOrigin + performance.now();

let emulator;

async function startEmulator(bin) {
  emulator = spawn(bin, ["-addr", "127.0.0.1:0", "-queue", "work", "-latency", latency, "-store-time", "1ms", "-stats"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: emulator.stdout });
  const first = await Promise.race([
    new Promise((resolve) => lines.once("line", resolve)),
    sleep(10000).then(() => Promise.reject(new Error("emulator printed no connection string in 10s"))),
  ]);
  return first.trim();
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// measure offers n messages at rate msgs/s and returns the latencies of the last four
// fifths and the rate achieved.
async function measure(client, rate, n) {
  const sender = client.sender;
  const receiver = client.receiver;
  const start = [];
  const settled = [];
  let done;
  const allDone = new Promise((resolve) => (done = resolve));
  const sub = receiver.subscribe(
    {
      processMessage: async (m) => {
        const enq = m.enqueuedTimeUtc.getTime();
        start.push(now() - enq);
        await sleep(handlerMs);
        await receiver.completeMessage(m);
        settled.push(now() - enq);
        if (settled.length === n) done();
      },
      processError: async (args) => console.error(`openloop: ${args.errorSource}: ${args.error.message}`),
    },
    { maxConcurrentCalls: concurrency, autoCompleteMessages: false },
  );
  const body = Buffer.alloc(1024);
  const every = 1000 / rate;
  const sends = [];
  const begin = now();
  for (let i = 0; i < n; i++) {
    const wait = begin + i * every - now();
    if (wait > 0) await sleep(wait);
    sends.push(sender.sendMessages({ body }));
  }
  await Promise.all(sends);
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`openloop: ${settled.length} of ${n} messages settled at ${rate} msgs/s, ${timeoutS} s after the sending time`)),
      (n / rate + timeoutS) * 1000 - (now() - begin),
    );
  });
  let elapsed;
  try {
    await Promise.race([allDone, timeout]);
    elapsed = (now() - begin) / 1000;
  } finally {
    clearTimeout(timer);
    await sub.close();
  }
  const skip = Math.floor(n / 5);
  const stats = (xs) => {
    const s = xs.slice(skip).sort((a, b) => a - b);
    return [50, 99, 99.9].map((p) => percentile(s, p).toFixed(1));
  };
  return { achieved: n / elapsed, start: stats(start), settled: stats(settled) };
}

async function main() {
  let conn = process.env.SERVICEBUS_CONNECTION_STRING;
  if (!conn) {
    if (!process.argv[2]) throw new Error("usage: node openloop.mjs /path/to/sbemulator (or set SERVICEBUS_CONNECTION_STRING)");
    conn = await startEmulator(process.argv[2]);
  }
  const sendClient = new ServiceBusClient(conn);
  const recvClient = new ServiceBusClient(conn);
  const client = { sender: sendClient.createSender("work"), receiver: recvClient.createReceiver("work") };
  // Warm-up: one message through both links.
  await client.sender.sendMessages({ body: "warm-up" });
  const [w] = await client.receiver.receiveMessages(1, { maxWaitTimeInMs: 5000 });
  if (!w) throw new Error("warm-up message not received");
  await client.receiver.completeMessage(w);
  console.log(`@azure/service-bus subscribe, ${concurrency} handlers of ${handlerMs} ms, ${perRate} messages per load; ms from enqueue`);
  for (const rate of rates) {
    const r = await measure(client, rate, perRate);
    console.log(
      `rate=${rate} achieved=${r.achieved.toFixed(0)} msgs/s  start p50/p99/p99.9 ${r.start.join(" / ")}  settled p50/p99/p99.9 ${r.settled.join(" / ")}`,
    );
  }
  await client.sender.close();
  await client.receiver.close();
  await sendClient.close();
  await recvClient.close();
}

try {
  await main();
} finally {
  if (emulator) emulator.kill("SIGTERM");
}
