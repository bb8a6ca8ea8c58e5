// The Java client 4.9 against a broker: producers, push consumers (concurrent, tag filters, where to
// start, orderly, broadcasting, retries to the dead-letter queue, rebalancing), the pull consumer and the
// lite pull consumer. Usage: ClientCompatCheck NAMESRV_ADDR SECTION... (sections: producer push where
// orderly broadcast retry rebalance pull litepull orderlydlq namespace trace request sql, and acl against a broker
// with aclEnable=true and RocketMQ's stock plain_acl.yml; "all" runs every one but acl; holdN keeps a producer and a consumer
// of topic HoldT online for N seconds, for the admin tools). Prints "FAIL <what>" for every
// failed check and "RESULT <section> bad=<n>" per section; exits 1 when any check failed.
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.*;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.RPCHook;

public class ClientCompatCheck {
    static String ns;
    static String run = Long.toString(System.currentTimeMillis() % 100000000L, 36);
    static int bad;

    static void check(boolean ok, String what) {
        if (!ok) {
            bad++;
            System.out.println("FAIL " + what);
        }
    }

    /** Waits up to {@code ms} for {@code cond}; true when it held. */
    static boolean await(long ms, BooleanSupplier cond) throws InterruptedException {
        long end = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < end) {
            if (cond.getAsBoolean()) return true;
            Thread.sleep(100);
        }
        return cond.getAsBoolean();
    }

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group + run);
        p.setNamesrvAddr(ns);
        p.setInstanceName("p" + group + run);
        p.setSendMsgTimeout(10000);
        p.start();
        return p;
    }

    static DefaultMQPushConsumer push(String group, String instance) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return c;
    }

    static String topic(String base, DefaultMQProducer p) throws Exception {
        String t = base + run;
        p.createTopic("TBW102", t, 4);
        return t;
    }

    static String body(Message m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    // --- producer: sync, async, oneway, selector, batch, big body, properties, auto-creation -----------
    static void producer() throws Exception {
        DefaultMQProducer p = producer("pg_prod");
        String t = "ProdT" + run;  // never created: the first send goes through TBW102
        Map<String, Message> sent = new ConcurrentHashMap<>();
        SendResult first = p.send(msg(t, "TagA", "sync0", "sync-body-0", sent));
        check(first.getSendStatus() == SendStatus.SEND_OK, "auto-created topic first send " + first);
        check(first.getMsgId() != null && first.getOffsetMsgId() != null, "msg ids " + first);
        for (int i = 1; i < 10; i++) {
            SendResult r = p.send(msg(t, "TagA", "sync" + i, "sync-body-" + i, sent));
            check(r.getSendStatus() == SendStatus.SEND_OK, "sync send " + r);
        }
        CountDownLatch async = new CountDownLatch(10);
        AtomicInteger asyncBad = new AtomicInteger();
        for (int i = 0; i < 10; i++) {
            p.send(msg(t, "TagB", "async" + i, "async-body-" + i, sent), new SendCallback() {
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() != SendStatus.SEND_OK) asyncBad.incrementAndGet();
                    async.countDown();
                }

                public void onException(Throwable e) {
                    System.out.println("async send: " + e);
                    asyncBad.incrementAndGet();
                    async.countDown();
                }
            });
        }
        check(async.await(30, TimeUnit.SECONDS) && asyncBad.get() == 0, "async sends: bad=" + asyncBad);
        for (int i = 0; i < 10; i++) p.sendOneway(msg(t, "TagC", "oneway" + i, "oneway-body-" + i, sent));
        MessageQueueSelector byKey = (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size());
        for (int i = 0; i < 12; i++) {
            SendResult r = p.send(msg(t, "TagD", "sel" + i, "sel-body-" + i, sent), byKey, i);
            int n = p.fetchPublishMessageQueues(t).size();
            check(r.getSendStatus() == SendStatus.SEND_OK && r.getMessageQueue().getQueueId() == i % n,
                "selector send " + i + " went to " + r.getMessageQueue());
        }
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 10; i++) batch.add(msg(t, "TagE", "batch" + i, "batch-body-" + i, sent));
        SendResult br = p.send(batch);
        check(br.getSendStatus() == SendStatus.SEND_OK, "batch send " + br);
        check(br.getMsgId() != null && br.getMsgId().split(",").length == 10, "batch msg ids " + br.getMsgId());
        MessageQueue mq2 = new MessageQueue(t, "broker-a", 2);
        SendResult toMq = p.send(msg(t, "TagG", "mq0", "mq-body-0", sent), mq2);
        check(toMq.getSendStatus() == SendStatus.SEND_OK && toMq.getMessageQueue().getQueueId() == 2, "send to a queue " + toMq);
        List<Message> batch2 = new ArrayList<>();
        for (int i = 0; i < 5; i++) batch2.add(msg(t, "TagH", "bmq" + i, "bmq-body-" + i, sent));
        SendResult br2 = p.send(batch2, mq2);
        check(br2.getSendStatus() == SendStatus.SEND_OK && br2.getMessageQueue().getQueueId() == 2
            && br2.getQueueOffset() == toMq.getQueueOffset() + 1, "batch send to a queue " + br2);
        StringBuilder big = new StringBuilder();
        for (int i = 0; big.length() < 20000; i++) big.append("line ").append(i).append(" of a compressible body\n");
        Message bigMsg = msg(t, "TagF", "big0", big.toString(), sent);
        SendResult bigR = p.send(bigMsg);
        check(bigR.getSendStatus() == SendStatus.SEND_OK, "big body send " + bigR);
        // everything sent arrives once, with its tag, keys, properties and body
        Map<String, MessageExt> got = new ConcurrentHashMap<>();
        AtomicInteger dups = new AtomicInteger();
        DefaultMQPushConsumer c = push("cg_prod" + run, "c_prod" + run);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) if (got.put(m.getKeys(), m) != null) dups.incrementAndGet();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        boolean all = await(60000, () -> got.size() >= sent.size());
        check(all, "producer messages consumed: " + got.size() + " of " + sent.size());
        Thread.sleep(1000);
        check(dups.get() == 0, "duplicates consumed: " + dups);
        for (Map.Entry<String, Message> e : sent.entrySet()) {
            MessageExt m = got.get(e.getKey());
            if (m == null) continue;
            Message s = e.getValue();
            check(s.getTags().equals(m.getTags()), "tags of " + e.getKey() + ": " + m.getTags());
            check(Arrays.equals(s.getBody(), m.getBody()), "body of " + e.getKey() + " (" + m.getBody().length + " bytes)");
            check(("v-" + e.getKey()).equals(m.getUserProperty("ukey")), "user property of " + e.getKey() + ": "
                + m.getProperties());
            check("second key".equals(m.getUserProperty("u2")), "second user property of " + e.getKey());
            check(t.equals(m.getTopic()), "topic of " + e.getKey() + ": " + m.getTopic());
            check(m.getStoreTimestamp() > 0 && m.getBornTimestamp() > 0, "timestamps of " + e.getKey());
            check(m.getMsgId() != null && m.getMsgId().length() == 32, "msgId of " + e.getKey() + ": " + m.getMsgId());
        }
        c.shutdown();
        // view by id, query by key
        MessageExt viewed = p.viewMessage(t, first.getMsgId());
        check(viewed != null && "sync0".equals(viewed.getKeys()), "viewMessage by unique id");
        MessageExt viewed2 = p.viewMessage(first.getOffsetMsgId());
        check(viewed2 != null && "sync0".equals(viewed2.getKeys()), "viewMessage by offset id");
        long now = System.currentTimeMillis();
        QueryResult q = p.queryMessage(t, "batch3", 32, now - 3600_000, now + 60_000);
        check(q.getMessageList().size() == 1 && "batch-body-3".equals(body(q.getMessageList().get(0))),
            "queryMessage by key: " + q.getMessageList().size());
        MessageExt big2 = p.viewMessage(t, bigR.getMsgId());
        check(big2 != null && Arrays.equals(big2.getBody(), bigMsg.getBody()), "viewMessage of the big body");
        p.shutdown();
    }

    static Message msg(String topic, String tag, String key, String body, Map<String, Message> sent) {
        Message m = new Message(topic, tag, key, body.getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("ukey", "v-" + key);
        m.putUserProperty("u2", "second key");
        sent.put(key, m);
        return m;
    }

    // --- push consumer: tag expression -------------------------------------------------------------------
    static void pushTags() throws Exception {
        DefaultMQProducer p = producer("pg_push");
        String t = topic("PushT", p);
        for (int i = 0; i < 30; i++) {
            String tag = new String[] {"TagA", "TagB", "TagC"}[i % 3];
            p.send(new Message(t, tag, "k" + i, ("m" + i).getBytes(StandardCharsets.UTF_8)));
        }
        Map<String, String> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = push("cg_tags" + run, "c_tags" + run);
        c.subscribe(t, "TagA || TagB");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) got.put(m.getKeys(), m.getTags());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        check(await(30000, () -> got.size() >= 20), "tag filter: got " + got.size() + " of 20");
        Thread.sleep(1500);
        check(got.size() == 20 && !got.containsValue("TagC"), "tag filter delivered " + got.size() + ": " + got.values());
        // messages sent while it runs arrive too (long polling)
        long t0 = System.currentTimeMillis();
        p.send(new Message(t, "TagB", "late", "late".getBytes(StandardCharsets.UTF_8)));
        check(await(10000, () -> got.containsKey("late")), "message sent while consuming");
        long lat = System.currentTimeMillis() - t0;
        check(lat < 3000, "long polling latency " + lat + " ms");
        c.shutdown();
        p.shutdown();
    }

    // --- SQL92 selectors (MessageSelector.bySql); the broker runs with enablePropertyFilter=true -------------
    static void sql() throws Exception {
        DefaultMQProducer p = producer("pg_sql");
        String t = topic("SqlT", p);
        Set<String> want = new HashSet<>();
        for (int i = 0; i < 20; i++) {
            boolean skip = i % 3 == 0, red = i % 2 == 1;
            Message m = new Message(t, skip ? "skip" : "keep", "k" + i, ("m" + i).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("a", String.valueOf(i));
            if (red) m.putUserProperty("color", "red");
            p.send(m);
            if (i >= 3 && i <= 12 && (!skip || !red) && i != 7) want.add(String.valueOf(i));
        }
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = push("cg_sql" + run, "c_sql" + run);
        c.subscribe(t, MessageSelector.bySql("a BETWEEN 3 AND 12 AND (TAGS <> 'skip' OR color IS NULL) AND a <> 7"));
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) got.add(m.getUserProperty("a"));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        check(await(30000, () -> got.size() >= want.size()), "sql92 filter: got " + got.size() + " of " + want.size());
        Thread.sleep(1500);
        check(got.equals(want), "sql92 filter delivered " + new TreeSet<>(got) + ", wanted " + new TreeSet<>(want));
        c.shutdown();
        // A selector the broker cannot compile: checkClientInBroker fails and the consumer does not start.
        DefaultMQPushConsumer bad = push("cg_sqlbad" + run, "c_sqlbad" + run);
        bad.subscribe(t, MessageSelector.bySql("a = NULL"));
        bad.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        boolean started = false;
        try {
            bad.start();
            started = true;
        } catch (Exception e) {
            // SUBSCRIPTION_PARSE_FAILED; the remark differs (4.9.4 gives the parser's exception)
            check(String.valueOf(e.getMessage()).contains("CODE: 23"), "bad selector refused with: " + e.getMessage());
        } finally {
            bad.shutdown();
        }
        check(!started, "a consumer with a selector the broker cannot compile started");
        p.shutdown();
    }

    // --- acl: the account RocketMQ of 4.9.4's stock plain_acl.yml (topicB and groupB PUB|SUB, topicA DENY) -----
    static String causes(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) sb.append(t.getMessage()).append(" | ");
        return sb.toString();
    }

    static DefaultMQProducer aclProducer(String secret, String instance) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("groupB", new AclClientRPCHook(new SessionCredentials("RocketMQ", secret)));
        p.setNamesrvAddr(ns);
        p.setInstanceName(instance + run);
        p.setSendMsgTimeout(10000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        return p;
    }

    static void acl() throws Exception {
        DefaultMQProducer p = aclProducer("12345678", "p_acl");
        String want = "acl-" + run;
        SendResult r = p.send(new Message("topicB", "acl", want.getBytes(StandardCharsets.UTF_8)));
        check(r.getSendStatus() == SendStatus.SEND_OK, "signed send to topicB: " + r);
        try {
            p.send(new Message("topicA", "acl", "no".getBytes(StandardCharsets.UTF_8)));
            check(false, "a send to topicA (DENY) went through");
        } catch (Exception e) {
            check(causes(e).contains("No default permission for topic:topicA"), "topicA refused with: " + causes(e));
        }
        p.shutdown();
        DefaultMQProducer wrong = aclProducer("wrongsecret", "p_aclwrong");
        try {
            wrong.send(new Message("topicB", "acl", "no".getBytes(StandardCharsets.UTF_8)));
            check(false, "a send signed with a wrong secret went through");
        } catch (Exception e) {
            check(causes(e).contains("Check signature failed"), "wrong secret refused with: " + causes(e));
        }
        wrong.shutdown();
        RPCHook hook = new AclClientRPCHook(new SessionCredentials("RocketMQ", "12345678"));
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("groupB", hook, new AllocateMessageQueueAveragely());
        c.setNamesrvAddr(ns);
        c.setInstanceName("c_acl" + run);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe("topicB", "*");
        Set<String> got = ConcurrentHashMap.newKeySet();
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) got.add(body(m));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        check(await(30000, () -> got.contains(want)), "signed push consumer of groupB got " + got.size() + " messages, not " + want);
        c.shutdown();
    }

    // --- consumeFromWhere FIRST / LAST / TIMESTAMP on a new group -------------------------------------------
    static void where() throws Exception {
        DefaultMQProducer p = producer("pg_where");
        String t = topic("WhereT", p);
        for (int i = 0; i < 8; i++) p.send(new Message(t, "old", "old" + i, "o".getBytes(StandardCharsets.UTF_8)));
        for (ConsumeFromWhere w : new ConsumeFromWhere[] {ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP}) {
            Set<String> got = ConcurrentHashMap.newKeySet();
            DefaultMQPushConsumer c = push("cg_w" + w.ordinal() + run, "c_w" + w.ordinal() + run);
            c.setConsumeFromWhere(w);
            c.setConsumeTimestamp(UtilAllFormat.now());
            c.subscribe(t, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) got.add(m.getKeys());
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            Thread.sleep(3000);
            p.send(new Message(t, "new", "new" + w.ordinal(), "n".getBytes(StandardCharsets.UTF_8)));
            check(await(15000, () -> got.contains("new" + w.ordinal())), w + ": new message not consumed");
            // a new group's first pull on a queue whose messages are all in memory starts at 0 (the broker
            // answers offset 0 to QUERY_CONSUMER_OFFSET), whatever the consumer asked for: as RocketMQ does
            long old = got.stream().filter(k -> k.startsWith("old")).count();
            check(old == 8, w + ": old messages consumed " + old + " (a RocketMQ 4.9 broker gives 8)");
            c.shutdown();
        }
        p.shutdown();
    }

    /** The consume timestamp format (yyyyMMddHHmmss) of a time 30 s ago. */
    static class UtilAllFormat {
        static String now() {
            return new java.text.SimpleDateFormat("yyyyMMddHHmmss").format(new Date(System.currentTimeMillis() - 30000));
        }
    }

    // --- orderly: per-queue locks, per-key order ----------------------------------------------------------
    static void orderly() throws Exception {
        DefaultMQProducer p = producer("pg_order");
        String t = topic("OrderT", p);
        MessageQueueSelector sel = (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size());
        int orders = 8, steps = 10;
        for (int s = 0; s < steps; s++) {
            for (int o = 0; o < orders; o++) {
                Message m = new Message(t, "TagA", "o" + o + "-" + s, (o + ":" + s).getBytes(StandardCharsets.UTF_8));
                p.send(m, sel, o);
            }
        }
        Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        AtomicInteger total = new AtomicInteger();
        AtomicInteger suspends = new AtomicInteger();
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            DefaultMQPushConsumer c = push("cg_order" + run, "c_order" + i + run);
            c.subscribe(t, "*");
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    String[] parts = body(m).split(":");
                    int o = Integer.parseInt(parts[0]);
                    int s = Integer.parseInt(parts[1]);
                    // suspend once to check that the queue is redelivered in order
                    if (o == 3 && s == 5 && suspends.getAndIncrement() == 0) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                    seen.computeIfAbsent(o, k -> Collections.synchronizedList(new ArrayList<>())).add(s);
                    total.incrementAndGet();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            c.start();
            cs.add(c);
        }
        check(await(60000, () -> total.get() >= orders * steps), "orderly consumed " + total + " of " + orders * steps);
        Thread.sleep(1000);
        for (int o = 0; o < orders; o++) {
            List<Integer> l = seen.getOrDefault(o, List.of());
            List<Integer> want = new ArrayList<>();
            for (int s = 0; s < steps; s++) want.add(s);
            check(l.equals(want), "order of key " + o + ": " + l);
        }
        check(suspends.get() >= 2, "suspended message redelivered");
        // the broker holds the locks of the queues the consumers process
        int locked = 0;
        for (DefaultMQPushConsumer c : cs) {
            for (Map.Entry<MessageQueue, org.apache.rocketmq.client.impl.consumer.ProcessQueue> e
                : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().entrySet()) {
                if (e.getKey().getTopic().equals(t) && e.getValue().isLocked()) locked++;
            }
        }
        check(locked == 4, "locked queues " + locked + " of 4");
        for (DefaultMQPushConsumer c : cs) c.shutdown();
        p.shutdown();
    }

    // --- broadcasting: every consumer gets everything ------------------------------------------------------
    static void broadcast() throws Exception {
        DefaultMQProducer p = producer("pg_bc");
        String t = topic("BcT", p);
        List<Set<String>> gots = new ArrayList<>();
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Set<String> got = ConcurrentHashMap.newKeySet();
            gots.add(got);
            DefaultMQPushConsumer c = push("cg_bc" + run, "c_bc" + i + run);
            c.setMessageModel(MessageModel.BROADCASTING);
            c.subscribe(t, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) got.add(m.getKeys());
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            cs.add(c);
        }
        Thread.sleep(2000);
        for (int i = 0; i < 20; i++) p.send(new Message(t, "x", "b" + i, "b".getBytes(StandardCharsets.UTF_8)));
        for (int i = 0; i < 2; i++) {
            Set<String> got = gots.get(i);
            check(await(30000, () -> got.size() >= 20), "broadcast consumer " + i + " got " + got.size() + " of 20");
        }
        for (DefaultMQPushConsumer c : cs) c.shutdown();
        p.shutdown();
    }

    // --- RECONSUME_LATER: retry topic, then the dead-letter queue --------------------------------------------
    static void retry() throws Exception {
        DefaultMQProducer p = producer("pg_retry");
        String t = topic("RetryT", p);
        String group = "cg_retry" + run;
        Map<String, List<Integer>> attempts = new ConcurrentHashMap<>();
        Set<String> retryTopics = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = push(group, "c_retry" + run);
        c.setMaxReconsumeTimes(2);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                attempts.computeIfAbsent(m.getKeys(), k -> Collections.synchronizedList(new ArrayList<>()))
                    .add(m.getReconsumeTimes());
                if (!t.equals(m.getTopic())) retryTopics.add(m.getTopic());
                if (m.getKeys().startsWith("ok")) return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                if (m.getKeys().startsWith("once") && m.getReconsumeTimes() >= 1) {
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                }
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        c.start();
        for (int i = 0; i < 3; i++) {
            p.send(new Message(t, "x", "fail" + i, "f".getBytes(StandardCharsets.UTF_8)));
            p.send(new Message(t, "x", "once" + i, "o".getBytes(StandardCharsets.UTF_8)));
            p.send(new Message(t, "x", "ok" + i, "k".getBytes(StandardCharsets.UTF_8)));
        }
        MessageQueue dlq = new MessageQueue(MixAllNames.DLQ + group, "broker-a", 0);
        boolean done = await(90000, () -> {
            for (int i = 0; i < 3; i++) {
                if (attempts.getOrDefault("fail" + i, List.of()).size() < 3) return false;
                if (attempts.getOrDefault("once" + i, List.of()).size() < 2) return false;
            }
            return true;
        });
        check(done, "retries: " + attempts);
        Thread.sleep(6000);
        for (int i = 0; i < 3; i++) {
            check(List.of(0, 1, 2).equals(attempts.get("fail" + i)), "reconsume times of fail" + i + ": "
                + attempts.get("fail" + i));
            check(List.of(0, 1).equals(attempts.get("once" + i)), "reconsume times of once" + i + ": "
                + attempts.get("once" + i));
            check(List.of(0).equals(attempts.get("ok" + i)), "ok" + i + ": " + attempts.get("ok" + i));
        }
        check(retryTopics.isEmpty(), "retried messages show their own topic, not " + retryTopics);
        long dlqMax = -1;
        for (int i = 0; i < 150 && dlqMax < 3; i++) dlqMax = maxOffsetOrMinus1(p, dlq);
        check(dlqMax == 3, "dead-letter queue " + dlq + " max offset " + dlqMax);
        c.shutdown();
        p.shutdown();
    }

    /** The queue's max offset after a pause of 100 ms, -1 while its topic has no route. */
    static long maxOffsetOrMinus1(DefaultMQProducer p, MessageQueue mq) throws InterruptedException {
        Thread.sleep(100);
        try {
            return p.maxOffset(mq);
        } catch (Exception e) {
            return -1;
        }
    }

    static class MixAllNames {
        static final String DLQ = "%DLQ%";
    }

    // --- two consumers of one group share the queues ----------------------------------------------------------
    static void rebalance() throws Exception {
        DefaultMQProducer p = producer("pg_rb");
        String t = topic("RbT", p);
        String group = "cg_rb" + run;
        Map<String, Set<String>> byConsumer = new ConcurrentHashMap<>();
        AtomicInteger dups = new AtomicInteger();
        Set<String> all = ConcurrentHashMap.newKeySet();
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            String name = "c" + i;
            byConsumer.put(name, ConcurrentHashMap.newKeySet());
            DefaultMQPushConsumer c = push(group, "c_rb" + i + run);
            c.subscribe(t, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    byConsumer.get(name).add(m.getKeys());
                    if (!all.add(m.getKeys())) dups.incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            cs.add(c);
        }
        boolean split = await(40000, () -> owned(cs.get(0), t) == 2 && owned(cs.get(1), t) == 2);
        check(split, "queues split 2/2 between the consumers");
        for (int i = 0; i < 40; i++) p.send(new Message(t, "x", "r" + i, "r".getBytes(StandardCharsets.UTF_8)));
        check(await(30000, () -> all.size() >= 40), "rebalance consumed " + all.size() + " of 40");
        check(!byConsumer.get("c0").isEmpty() && !byConsumer.get("c1").isEmpty(),
            "both consumers consumed: " + byConsumer.get("c0").size() + "/" + byConsumer.get("c1").size());
        check(dups.get() == 0, "rebalance duplicates " + dups);
        cs.get(1).shutdown();
        boolean took = await(40000, () -> owned(cs.get(0), t) == 4);
        check(took, "the remaining consumer takes every queue");
        for (int i = 40; i < 60; i++) p.send(new Message(t, "x", "r" + i, "r".getBytes(StandardCharsets.UTF_8)));
        check(await(30000, () -> all.size() >= 60), "after one left: consumed " + all.size() + " of 60");
        cs.get(0).shutdown();
        p.shutdown();
    }

    /** How many queues of {@code topic} (not of the group's retry topic) the consumer processes. */
    static int owned(DefaultMQPushConsumer c, String topic) {
        int n = 0;
        for (MessageQueue mq : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
            if (mq.getTopic().equals(topic)) n++;
        }
        return n;
    }

    // --- DefaultMQPullConsumer ----------------------------------------------------------------------------------
    @SuppressWarnings("deprecation")
    static void pull() throws Exception {
        DefaultMQProducer p = producer("pg_pull");
        String t = topic("PullT", p);
        long before = System.currentTimeMillis();
        Thread.sleep(20);
        for (int i = 0; i < 40; i++) {
            p.send(new Message(t, i % 2 == 0 ? "even" : "odd", "p" + i, ("pull" + i).getBytes(StandardCharsets.UTF_8)));
        }
        DefaultMQPullConsumer c = new DefaultMQPullConsumer("cg_pull" + run);
        c.setNamesrvAddr(ns);
        c.setInstanceName("c_pull" + run);
        c.start();
        Set<MessageQueue> mqs = c.fetchSubscribeMessageQueues(t);
        check(mqs.size() == 4, "fetchSubscribeMessageQueues " + mqs);
        int total = 0, even = 0;
        long maxSum = 0;
        for (MessageQueue mq : mqs) {
            long min = c.minOffset(mq);
            long max = c.maxOffset(mq);
            maxSum += max;
            check(min == 0, "minOffset " + mq + " = " + min);
            check(c.searchOffset(mq, before) == 0, "searchOffset(before) " + mq + " = " + c.searchOffset(mq, before));
            // a time after the last message gives the last message's offset, as RocketMQ 4.9 answers
            long future = c.searchOffset(mq, System.currentTimeMillis() + 60000);
            check(future == max - 1, "searchOffset(future) " + mq + " = " + future + " max " + max);
            long off = 0;
            while (true) {
                PullResult r = c.pull(mq, "*", off, 7);
                if (r.getPullStatus() == PullStatus.FOUND) {
                    total += r.getMsgFoundList().size();
                    check(r.getNextBeginOffset() == off + r.getMsgFoundList().size(), "next begin offset " + r);
                    for (MessageExt m : r.getMsgFoundList()) {
                        check(m.getQueueOffset() >= off && m.getQueueId() == mq.getQueueId(), "queue offset " + m);
                    }
                    off = r.getNextBeginOffset();
                } else {
                    check(r.getPullStatus() == PullStatus.NO_NEW_MSG && off == max, "pull end " + r + " max " + max);
                    break;
                }
            }
            PullResult tags = c.pull(mq, "even", 0, 32);
            if (tags.getPullStatus() == PullStatus.FOUND) {
                for (MessageExt m : tags.getMsgFoundList()) {
                    check("even".equals(m.getTags()), "tag-filtered pull gave " + m.getTags());
                    even++;
                }
            }
            PullResult ahead = c.pull(mq, "*", max + 5, 32);
            check(ahead.getPullStatus() == PullStatus.OFFSET_ILLEGAL || ahead.getPullStatus() == PullStatus.NO_NEW_MSG,
                "pull beyond max " + ahead);
            c.updateConsumeOffset(mq, off);
        }
        check(total == 40 && maxSum == 40, "pulled " + total + " of 40, max offsets sum " + maxSum);
        check(even == 20, "tag-filtered pulls found " + even + " of 20");
        long earliest = c.earliestMsgStoreTime(mqs.iterator().next());
        check(earliest >= before && earliest <= System.currentTimeMillis(), "earliestMsgStoreTime " + earliest);
        c.getOffsetStore().persistAll(mqs);
        for (MessageQueue mq : mqs) {
            long stored = c.getOffsetStore().readOffset(mq, ReadOffsetType.READ_FROM_STORE);
            check(stored == c.maxOffset(mq), "offset on the broker " + mq + " = " + stored);
            check(c.fetchConsumeOffset(mq, true) == stored, "fetchConsumeOffset " + mq);
        }
        // a held pull is answered when a message arrives
        MessageQueue mq0 = new MessageQueue(t, "broker-a", 0);
        long max0 = c.maxOffset(mq0);
        MessageQueueSelector q0 = (l, m, arg) -> l.get(0);
        Executors.newSingleThreadScheduledExecutor().schedule(() -> {
            try {
                p.send(new Message(t, "x", "held", "h".getBytes(StandardCharsets.UTF_8)), q0, 0);
            } catch (Exception e) {
                System.out.println("held send " + e);
            }
        }, 1500, TimeUnit.MILLISECONDS);
        long t0 = System.currentTimeMillis();
        PullResult held = c.pullBlockIfNotFound(mq0, "*", max0, 32);
        long waited = System.currentTimeMillis() - t0;
        check(held.getPullStatus() == PullStatus.FOUND && "held".equals(held.getMsgFoundList().get(0).getKeys()),
            "held pull " + held);
        check(waited >= 1000 && waited < 6000, "held pull answered after " + waited + " ms");
        // an asynchronous pull
        CompletableFuture<PullResult> f = new CompletableFuture<>();
        c.pull(mq0, "*", 0, 4, new PullCallback() {
            public void onSuccess(PullResult r) {
                f.complete(r);
            }

            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        });
        PullResult ar = f.get(10, TimeUnit.SECONDS);
        check(ar.getPullStatus() == PullStatus.FOUND, "async pull " + ar);
        c.shutdown();
        p.shutdown();
    }

    // --- DefaultLitePullConsumer: subscribe and assign ------------------------------------------------------------
    static void litepull() throws Exception {
        DefaultMQProducer p = producer("pg_lite");
        String t = topic("LiteT", p);
        for (int i = 0; i < 40; i++) p.send(new Message(t, "x", "l" + i, ("lite" + i).getBytes(StandardCharsets.UTF_8)));
        DefaultLitePullConsumer s = new DefaultLitePullConsumer("cg_lites" + run);
        s.setNamesrvAddr(ns);
        s.setInstanceName("c_lites" + run);
        s.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        s.setAutoCommit(false);
        s.subscribe(t, "*");
        s.start();
        Set<String> got = new HashSet<>();
        long end = System.currentTimeMillis() + 30000;
        while (got.size() < 40 && System.currentTimeMillis() < end) {
            for (MessageExt m : s.poll(1000)) got.add(m.getKeys());
        }
        check(got.size() == 40, "lite subscribe polled " + got.size() + " of 40");
        s.commitSync();
        Collection<MessageQueue> mqs = s.fetchMessageQueues(t);
        check(mqs.size() == 4, "lite fetchMessageQueues " + mqs);
        Thread.sleep(500);
        long committed = 0;
        for (MessageQueue mq : mqs) committed += s.committed(mq);
        check(committed == 40, "lite committed offsets sum " + committed);
        s.shutdown();
        // the committed offsets are on the broker: a new consumer of the group has nothing to read
        DefaultLitePullConsumer s2 = new DefaultLitePullConsumer("cg_lites" + run);
        s2.setNamesrvAddr(ns);
        s2.setInstanceName("c_lites2" + run);
        s2.subscribe(t, "*");
        s2.start();
        int again = 0;
        long end2 = System.currentTimeMillis() + 4000;
        while (System.currentTimeMillis() < end2) again += s2.poll(500).size();
        check(again == 0, "after commitSync a new consumer polled " + again);
        s2.shutdown();

        DefaultLitePullConsumer a = new DefaultLitePullConsumer("cg_litea" + run);
        a.setNamesrvAddr(ns);
        a.setInstanceName("c_litea" + run);
        a.setAutoCommit(false);
        a.start();
        List<MessageQueue> list = new ArrayList<>(a.fetchMessageQueues(t));
        a.assign(list);
        for (MessageQueue mq : list) a.seek(mq, 0);
        Set<String> got2 = new HashSet<>();
        end = System.currentTimeMillis() + 30000;
        while (got2.size() < 40 && System.currentTimeMillis() < end) {
            for (MessageExt m : a.poll(1000)) got2.add(m.getKeys());
        }
        check(got2.size() == 40, "lite assign polled " + got2.size() + " of 40");
        MessageQueue mq = list.get(0);
        long max = p.maxOffset(mq);
        a.seek(mq, max - 1);
        List<MessageExt> last = new ArrayList<>();
        end = System.currentTimeMillis() + 10000;
        while (last.isEmpty() && System.currentTimeMillis() < end) last.addAll(a.poll(500));
        check(last.size() == 1 && last.get(0).getQueueOffset() == max - 1, "after seek(max-1) polled " + last.size());
        a.seekToBegin(mq);
        List<MessageExt> first = new ArrayList<>();
        end = System.currentTimeMillis() + 10000;
        while (first.size() < max && System.currentTimeMillis() < end) first.addAll(a.poll(500));
        check(first.size() == max && first.get(0).getQueueOffset() == 0, "after seekToBegin polled " + first.size());
        Long ts = a.offsetForTimestamp(mq, System.currentTimeMillis() + 60000);
        check(ts != null && ts == max - 1, "offsetForTimestamp(future) " + ts + " max " + max);
        a.commitSync();
        Thread.sleep(500);
        check(a.committed(mq) == max, "assign committed " + a.committed(mq) + " max " + max);
        a.shutdown();
        p.shutdown();
    }

    // --- orderly: a message that keeps failing goes to the DLQ after maxReconsumeTimes ------------------------------
    static void orderlyDlq() throws Exception {
        DefaultMQProducer p = producer("pg_odlq");
        String t = topic("ODlqT", p);
        String group = "cg_odlq" + run;
        Map<String, AtomicInteger> tries = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = push(group, "c_odlq" + run);
        c.setMaxReconsumeTimes(2);
        c.setSuspendCurrentQueueTimeMillis(100);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                tries.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                if (m.getKeys().equals("bad")) return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        MessageQueueSelector q0 = (l, m, arg) -> l.get(0);
        p.send(new Message(t, "x", "bad", "b".getBytes(StandardCharsets.UTF_8)), q0, 0);
        p.send(new Message(t, "x", "after", "a".getBytes(StandardCharsets.UTF_8)), q0, 0);
        check(await(30000, () -> tries.containsKey("after")), "orderly queue moved on after the bad message: " + tries);
        check(tries.getOrDefault("bad", new AtomicInteger()).get() == 3, "bad message tried " + tries.get("bad"));
        MessageQueue dlq = new MessageQueue(MixAllNames.DLQ + group, "broker-a", 0);
        long dlqMax = -1;
        for (int i = 0; i < 150 && dlqMax < 1; i++) dlqMax = maxOffsetOrMinus1(p, dlq);
        check(dlqMax == 1, "orderly dead-letter queue max offset " + dlqMax);
        c.shutdown();
        p.shutdown();
    }

    // --- namespaces and batch consumption -------------------------------------------------------------------------------
    static void namespace() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("ns1", "pg_ns" + run);
        p.setNamesrvAddr(ns);
        p.setInstanceName("p_ns" + run);
        p.start();
        String t = "NsT" + run;
        for (int i = 0; i < 20; i++) p.send(new Message(t, "x", "n" + i, ("ns" + i).getBytes(StandardCharsets.UTF_8)));
        Set<String> got = ConcurrentHashMap.newKeySet();
        AtomicInteger biggest = new AtomicInteger();
        Set<String> topics = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("ns1", "cg_ns" + run);
        c.setNamesrvAddr(ns);
        c.setInstanceName("c_ns" + run);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeMessageBatchMaxSize(10);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            biggest.accumulateAndGet(msgs.size(), Math::max);
            for (MessageExt m : msgs) {
                got.add(m.getKeys());
                topics.add(m.getTopic());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        check(await(30000, () -> got.size() >= 20), "namespace consumer got " + got.size() + " of 20");
        check(topics.equals(Set.of(t)), "topics seen without the namespace: " + topics);
        check(biggest.get() > 1, "batch consumption gave at most " + biggest + " messages at once");
        DefaultMQPullConsumer raw = new DefaultMQPullConsumer("cg_nsraw" + run);
        raw.setNamesrvAddr(ns);
        raw.setInstanceName("c_nsraw" + run);
        raw.start();
        check(raw.fetchSubscribeMessageQueues("ns1%" + t).size() > 0, "the topic lives as ns1%" + t);
        raw.shutdown();
        c.shutdown();
        p.shutdown();
    }

    // --- message traces: a producer and a consumer with enableMsgTrace write to RMQ_SYS_TRACE_TOPIC ------------------
    static void trace() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("pg_trace" + run, true);
        p.setNamesrvAddr(ns);
        p.setInstanceName("p_trace" + run);
        p.start();
        String t = "TraceT" + run;
        SendResult r = p.send(new Message(t, "x", "tk", "traced".getBytes(StandardCharsets.UTF_8)));
        AtomicInteger n = new AtomicInteger();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_trace" + run, true);
        c.setNamesrvAddr(ns);
        c.setInstanceName("c_trace" + run);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            n.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        check(await(30000, () -> n.get() >= 1), "traced message consumed");
        Thread.sleep(3000);  // the trace dispatchers send in batches
        c.shutdown();
        p.shutdown();
        System.out.println("TRACED " + r.getMsgId());
    }

    // --- request-reply: DefaultMQProducer.request with a callback, MessageUtil.createReplyMessage -----------
    // The 4.9.4 client's own request() has two bugs (apache/rocketmq#4841, fixed after 4.9.4): the synchronous
    // one returns the request message itself once the send succeeds, and the callback one first calls
    // onSuccess(null) at that moment; the reply comes in a second onSuccess. So the replies are collected from
    // the callbacks, nulls skipped, and no synchronous request is made.
    static void request() throws Exception {
        DefaultMQProducer responder = producer("pg_responder");
        String t = topic("RequestT", responder);
        DefaultMQPushConsumer c = push("cg_responder" + run, "c_responder" + run);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = org.apache.rocketmq.client.utils.MessageUtil.createReplyMessage(m,
                        ("re: " + body(m)).getBytes(StandardCharsets.UTF_8));
                    reply.putUserProperty("servedBy", "java");
                    responder.send(reply);
                } catch (Exception e) {
                    System.out.println("FAIL reply send threw " + e);
                    bad++;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer requester = producer("pg_requester");
        Map<String, Message> replies = new ConcurrentHashMap<>();
        for (int i = 0; i < 6; i++) {
            final String q = "q" + i;
            requester.request(new Message(t, "Q", "req-" + i, q.getBytes(StandardCharsets.UTF_8)), new RequestCallback() {
                public void onSuccess(Message m) { if (m != null) replies.put(q, m); }
                public void onException(Throwable e) { System.out.println("request " + q + ": " + e); }
            }, 15000);
        }
        check(await(30000, () -> replies.size() == 6), "request replies: " + replies.keySet());
        for (int i = 0; i < 6; i++) {
            Message m = replies.get("q" + i);
            check(m != null && body(m).equals("re: q" + i), "reply to q" + i + ": " + (m == null ? null : body(m)));
            check(m != null && m.getTopic().endsWith("_REPLY_TOPIC") && "java".equals(m.getUserProperty("servedBy"))
                && "reply".equals(m.getProperty(MessageConst.PROPERTY_MESSAGE_TYPE)), "reply message " + m);
        }
        requester.shutdown();
        c.shutdown();
        responder.shutdown();
    }

    // --- hold: a live producer and push consumer for the admin tools (topic HoldT, groups pg_hold, cg_hold) ---
    static void hold(int seconds) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("pg_hold");
        p.setNamesrvAddr(ns);
        p.start();
        for (int i = 0; i < 10; i++) {
            p.send(new Message("HoldT", "TagH", "hold" + i, ("hold" + i).getBytes(StandardCharsets.UTF_8)));
        }
        AtomicInteger n = new AtomicInteger();
        DefaultMQPushConsumer c = push("cg_hold", "c_hold");
        c.subscribe("HoldT", "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            n.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        check(await(30000, () -> n.get() >= 10), "hold consumer got " + n);
        System.out.println("HOLDING");
        Thread.sleep(seconds * 1000L);
        c.shutdown();
        p.shutdown();
    }

    // Master/slave (run against a SYNC_MASTER with a slave, then, with the master stopped, against the slave alone):
    // "hasend" sends HA_COUNT messages, each answered SEND_OK only once the slave holds it; "haread" pulls them all
    // back through the route that names only the slave (DefaultMQPullConsumer falls back to it).
    static final String HA_TOPIC = "HaJavaT";
    static final int HA_COUNT = 60;

    static void haSend() throws Exception {
        DefaultMQProducer p = producer("pg_ha");
        p.setRetryAnotherBrokerWhenNotStoreOK(false);
        for (int i = 0; i < HA_COUNT; i++) {
            SendResult r = p.send(new Message(HA_TOPIC, "TagH", "ha" + i, ("ha-body-" + i).getBytes(StandardCharsets.UTF_8)));
            check(r.getSendStatus() == SendStatus.SEND_OK, "SYNC_MASTER send with a slave " + r);
        }
        p.shutdown();
    }

    static void haRead() throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer("cg_ha" + run);
        c.setNamesrvAddr(ns);
        c.setInstanceName("c_ha" + run);
        c.start();
        Set<String> bodies = new HashSet<>();
        for (MessageQueue mq : c.fetchSubscribeMessageQueues(HA_TOPIC)) {
            long off = 0;
            while (true) {
                PullResult r = c.pull(mq, "*", off, 16);
                if (r.getPullStatus() != PullStatus.FOUND) break;
                for (MessageExt m : r.getMsgFoundList()) bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                off = r.getNextBeginOffset();
            }
        }
        check(bodies.size() == HA_COUNT, "read back from the slave: " + bodies.size() + " of " + HA_COUNT);
        c.shutdown();
    }

    public static void main(String[] args) throws Exception {
        ns = args[0];
        List<String> sections = new ArrayList<>(Arrays.asList(args).subList(1, args.length));
        if (sections.isEmpty() || sections.contains("all")) {
            sections = List.of("producer", "push", "where", "orderly", "broadcast", "retry", "rebalance", "pull",
                "litepull", "orderlydlq", "namespace", "trace", "request", "sql");
        }
        int total = 0;
        for (String s : sections) {
            bad = 0;
            long t0 = System.currentTimeMillis();
            try {
                switch (s) {
                    case "producer": producer(); break;
                    case "push": pushTags(); break;
                    case "where": where(); break;
                    case "orderly": orderly(); break;
                    case "broadcast": broadcast(); break;
                    case "retry": retry(); break;
                    case "rebalance": rebalance(); break;
                    case "pull": pull(); break;
                    case "litepull": litepull(); break;
                    case "orderlydlq": orderlyDlq(); break;
                    case "namespace": namespace(); break;
                    case "trace": trace(); break;
                    case "request": request(); break;
                    case "sql": sql(); break;
                    case "acl": acl(); break;
                    case "hasend": haSend(); break;
                    case "haread": haRead(); break;
                    default:
                        if (s.startsWith("hold")) {
                            hold(Integer.parseInt(s.substring(4)));
                            break;
                        }
                        check(false, "unknown section " + s);
                }
            } catch (Throwable e) {
                check(false, s + " threw " + e);
                e.printStackTrace(System.out);
            }
            System.out.println("RESULT " + s + " bad=" + bad + " in " + (System.currentTimeMillis() - t0) + " ms");
            total += bad;
        }
        System.out.println("TOTAL bad=" + total);
        System.exit(total == 0 ? 0 : 1);
    }
}
