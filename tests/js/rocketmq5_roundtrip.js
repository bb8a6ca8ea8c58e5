// The official RocketMQ 5 Node.js client (rocketmq-client-nodejs, gRPC) against a rocketq broker's gRPC endpoint,
// for tests/test_grpc_proxy.py: `node rocketmq5_roundtrip.js HOST:PORT TOPIC GROUP COUNT WANT`. Sends COUNT
// messages (tag TagN, one key each, a user property), then receives with a simple consumer (tag TagN) until WANT
// messages came or 20 s passed, acknowledging each; prints one JSON object.
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

async function main() {
  const [endpoints, topic, group, count, want] = process.argv.slice(2);
  const out = { sent: [], received: [] };
  const producer = new Producer({ endpoints, topics: [topic] });
  await producer.startup();
  for (let i = 0; i < Number(count); i++) {
    const receipt = await producer.send({
      topic, tag: 'TagN', keys: [`node-${i}`], properties: new Map([['lang', 'js']]), body: Buffer.from(`node ${i}`),
    });
    out.sent.push({ messageId: receipt.messageId, offset: Number(receipt.offset) });
  }
  await producer.shutdown();
  const consumer = new SimpleConsumer({
    consumerGroup: group, endpoints, subscriptions: new Map().set(topic, 'TagN'), awaitDuration: 3000,
  });
  await consumer.startup();
  const deadline = Date.now() + 20000;
  while (out.received.length < Number(want) && Date.now() < deadline) {
    for (const message of await consumer.receive(16, 15000)) {
      out.received.push({
        body: message.body.toString(), tag: message.tag, keys: message.keys,
        props: Object.fromEntries(message.properties), attempt: message.deliveryAttempt, messageId: message.messageId,
      });
      await consumer.ack(message);
    }
  }
  await consumer.shutdown();
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
