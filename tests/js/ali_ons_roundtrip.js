'use strict';
// A real ali-ons producer and push consumer against a rocketq name server (driven by tests/test_real_clients.py).
//
// usage: node ali_ons_roundtrip.js '{"nameSrv": "127.0.0.1:9876", "topic": "T", "group": "CG", "count": 20,
//                                     "retrySeq": 1, "timeoutMs": 40000}'
//
// Sends `count` messages, half before the consumer starts and half after: message i has tag TagA/TagB
// (every fifth one TagC, which the consumer's 'TagA || TagB' subscription filters out), keys
// ["k-<i>", "shared"], user properties seq and color, a text body (one of 8 KiB, which ali-ons compresses).
// The handler asks for a retry of message `retrySeq` the first time it sees it (CONSUMER_SEND_MSG_BACK),
// then accepts it again from the retry topic. Prints one JSON line per event on stdout
// ({"event": "sent" | "received" | "error" | "done", ...}) and exits when every expected delivery came or
// at timeoutMs, closing both clients. With "accessKey" and "secretKey" in the JSON both clients sign their
// requests (a broker with aclEnable=true).

const { Producer, Consumer, Message } = require('ali-ons');

const cfg = JSON.parse(process.argv[2]);
const quiet = { info() {}, debug() {}, warn(...a) { console.error('[warn]', ...a); }, error(...a) { console.error('[error]', ...a); } };
const common = { httpclient: {}, nameSrv: cfg.nameSrv, clientIP: '127.0.0.1', logger: quiet };
if (cfg.accessKey) {  // ali-ons signs every request itself (its channel.js; OnsChannel is signed too)
  Object.assign(common, { accessKey: cfg.accessKey, secretKey: cfg.secretKey });
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function tagOf(i) {
  if (i % 5 === 4) return 'TagC';
  return i % 2 === 0 ? 'TagA' : 'TagB';
}

function bodyOf(i) {
  return i === 3 ? 'big-' + 'x'.repeat(8192) : `body-${i}`;
}

async function sendRange(producer, from, to) {
  for (let i = from; i < to; i++) {
    const msg = new Message(cfg.topic, tagOf(i), bodyOf(i));
    msg.keys = [ `k-${i}`, 'shared' ];
    msg.properties.seq = String(i);
    msg.properties.color = i % 3 === 0 ? 'red' : 'blue';
    const r = await producer.send(msg);
    emit({ event: 'sent', seq: i, status: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue.queueId,
      queueOffset: r.queueOffset });
  }
}

async function main() {
  const deadline = Date.now() + (cfg.timeoutMs || 40000);
  const producer = new Producer(Object.assign({ producerGroup: cfg.group + '_PG', instanceName: 'rq-prod' }, common));
  producer.on('error', err => emit({ event: 'error', where: 'producer', message: String(err && err.message) }));
  const consumer = new Consumer(Object.assign({ consumerGroup: cfg.group, instanceName: 'rq-cons',
    persistConsumerOffsetInterval: 500, rebalanceInterval: 1000, pollNameServerInteval: 1000 }, common));
  consumer.on('error', err => emit({ event: 'error', where: 'consumer', message: String(err && err.message) }));
  const expected = new Set();
  for (let i = 0; i < cfg.count; i++) if (tagOf(i) !== 'TagC') expected.add(`${i}/0`);
  expected.add(`${cfg.retrySeq}/1`);
  const got = new Set();
  let finish;
  const allIn = new Promise(resolve => { finish = resolve; });
  try {
    await producer.ready();
    const half = Math.floor(cfg.count / 2);
    await sendRange(producer, 0, half);
    consumer.subscribe(cfg.topic, 'TagA || TagB', async msg => {
      const seq = Number(msg.properties.seq);
      emit({ event: 'received', seq, topic: msg.topic, tags: msg.tags, keys: msg.keys, color: msg.properties.color,
        body: msg.body.toString(), bodyLength: msg.body.length, reconsumeTimes: msg.reconsumeTimes,
        queueId: msg.queueId, msgId: msg.msgId, uniqKey: msg.properties.UNIQ_KEY });
      got.add(`${seq}/${msg.reconsumeTimes}`);
      if ([ ...expected ].every(k => got.has(k))) finish();
      if (seq === cfg.retrySeq && msg.reconsumeTimes === 0) return Consumer.ACTION_RETRY;
    });
    await consumer.ready();
    await sendRange(producer, half, cfg.count);
    const left = Math.max(0, deadline - Date.now());
    await Promise.race([ allIn, new Promise(resolve => setTimeout(resolve, left)) ]);
    // Let the consumer commit its offsets (UPDATE_CONSUMER_OFFSET) before it goes.
    await new Promise(resolve => setTimeout(resolve, 1200));
  } catch (err) {
    emit({ event: 'error', where: 'main', message: String(err && err.stack) });
  } finally {
    await Promise.race([ Promise.allSettled([ consumer.close(), producer.close() ]),
      new Promise(resolve => setTimeout(resolve, 5000)) ]);
    emit({ event: 'done', complete: [ ...expected ].every(k => got.has(k)) });
    process.exit(0);
  }
}

main();
