// The JavaScript admin client against cmd/sbemulator's admin API. conformance.mjs runs
// this file in a child process with NODE_EXTRA_CA_CERTS naming the certificate the
// emulator wrote (-cert) and SERVICEBUS_CONNECTION_STRING; it creates a queue,
// reads it back with its runtime properties, uses it, and deletes it. Exit code 0 on
// success; the error on stderr otherwise.
import { ServiceBusAdministrationClient, ServiceBusClient } from "@azure/service-bus";

const conn = process.env.SERVICEBUS_CONNECTION_STRING;
const admin = new ServiceBusAdministrationClient(conn);
const client = new ServiceBusClient(conn);

function check(cond, what) {
  if (!cond) throw new Error(what);
}

try {
  const created = await admin.createQueue("made-by-admin", { maxDeliveryCount: 4, lockDuration: "PT45S" });
  check(created.name === "made-by-admin" && created.maxDeliveryCount === 4, `created ${JSON.stringify(created)}`);
  check(await admin.queueExists("made-by-admin"), "queueExists after create");
  const got = await admin.getQueue("made-by-admin");
  check(got.lockDuration === "PT45S", `lockDuration ${got.lockDuration}`);
  const s = client.createSender("made-by-admin");
  await s.sendMessages([{ body: 1 }, { body: 2 }]);
  await s.close();
  const rt = await admin.getQueueRuntimeProperties("made-by-admin");
  check(rt.activeMessageCount === 2 && rt.totalMessageCount === 2, `runtime counts ${rt.activeMessageCount}/${rt.totalMessageCount}`);
  const names = [];
  for await (const q of admin.listQueues()) names.push(q.name);
  check(names.includes("made-by-admin") && names.includes("send"), `listQueues ${names}`);
  await admin.createSubscription("events", "made-by-admin");
  await admin.createRule("events", "made-by-admin", "only-x", { sqlExpression: "kind = 'x'" });
  const rules = [];
  for await (const r of admin.listRules("events", "made-by-admin")) rules.push(r.name);
  check(rules.join() === "$Default,only-x", `rules ${rules}`);
  await admin.deleteSubscription("events", "made-by-admin");
  await admin.deleteQueue("made-by-admin");
  check(!(await admin.queueExists("made-by-admin")), "queueExists after delete");
  await client.close();
} catch (err) {
  console.error(`${err?.code ?? ""} ${err?.message ?? err}`);
  process.exit(1);
}
