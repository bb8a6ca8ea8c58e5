// The Java client 4.9 against a cluster of two brokers (broker-a, broker-b) behind one name server, driven by
// tests/test_java_cluster_reference.py. Usage: ClusterCheck NAMESRV_ADDR SECTION TOPIC GROUP [COUNT]
//   spread    two push consumer members of GROUP own 4 queues each, then a producer sends COUNT messages:
//             prints "SENT <broker> <queue>" per send and "CONSUMED unique=.. dup=.. ..." once all are in
//   orderly   the same with orderly consumers and a selector: 16 order keys over the topic's queues, the
//             sequence of every key and the queue offsets of every queue must come in order
//   failover  a producer sends without pause and two push consumer members consume, until "stop" on stdin;
//             commands on stdin: "stats" (prints a STATS line), "suspend", "resume", "mark", "stop"
// Prints "FAIL <what>" for every failed check and "RESULT <section> bad=<n>"; exits 1 when any check failed.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;

public class ClusterCheck {
    static String ns;
    static String topic;
    static String group;
    static int bad;

    static void check(boolean ok, String what) {
        if (!ok) {
            bad++;
            System.out.println("FAIL " + what);
        }
    }

    static boolean await(long ms, BooleanSupplier cond) throws InterruptedException {
        long end = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < end) {
            if (cond.getAsBoolean()) return true;
            Thread.sleep(100);
        }
        return cond.getAsBoolean();
    }

    /** Client timings shortened so that route changes reach the clients in about a second. */
    static void quick(org.apache.rocketmq.client.ClientConfig c) {
        c.setNamesrvAddr(ns);
        c.setPollNameServerInterval(1000);
        c.setHeartbeatBrokerInterval(1000);
        c.setPersistConsumerOffsetInterval(1000);
    }

    static DefaultMQProducer producer(String name) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("pg_" + group);
        quick(p);
        p.setInstanceName(name);
        p.setSendMsgTimeout(3000);
        p.start();
        return p;
    }

    static DefaultMQPushConsumer consumer(String instance) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        quick(c);
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        return c;
    }

    /** The queues of the topic (not of the group's retry topic) a member currently owns. */
    static int owned(DefaultMQPushConsumer c) {
        int n = 0;
        for (Map.Entry<MessageQueue, ProcessQueue> e
            : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().entrySet()) {
            if (e.getKey().getTopic().equals(topic) && !e.getValue().isDropped()) n++;
        }
        return n;
    }

    static boolean balanced(List<DefaultMQPushConsumer> members, int queues) {
        int total = 0;
        for (DefaultMQPushConsumer c : members) {
            int n = owned(c);
            if (n != queues / members.size()) return false;
            total += n;
        }
        return total == queues;
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    // --- spread: round robin over both brokers, a group of two consumes each message once -------------
    static void spread(int count) throws Exception {
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> perBroker = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> perMember = new ConcurrentHashMap<>();
        List<DefaultMQPushConsumer> members = new ArrayList<>();
        for (String name : List.of("m1", "m2")) {
            DefaultMQPushConsumer c = consumer(name);
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    seen.computeIfAbsent(body(m), k -> new AtomicInteger()).incrementAndGet();
                    perBroker.computeIfAbsent(ctx.getMessageQueue().getBrokerName(), k -> new AtomicInteger()).incrementAndGet();
                    perMember.computeIfAbsent(name, k -> new AtomicInteger()).incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            members.add(c);
        }
        DefaultMQProducer p = producer("p_spread");
        int queues = p.fetchPublishMessageQueues(topic).size();
        check(queues == 8, "publish queues of both brokers: " + queues);
        check(await(60000, () -> balanced(members, queues)), "members own " + owned(members.get(0)) + " and "
            + owned(members.get(1)) + " of " + queues + " queues");
        for (int i = 0; i < count; i++) {
            SendResult r = p.send(new Message(topic, "TagS", "spread" + i, ("spread-" + i).getBytes(StandardCharsets.UTF_8)));
            check(r.getSendStatus() == SendStatus.SEND_OK, "send " + r);
            System.out.println("SENT " + r.getMessageQueue().getBrokerName() + " " + r.getMessageQueue().getQueueId());
        }
        check(await(60000, () -> seen.size() == count), "consumed " + seen.size() + " of " + count);
        Thread.sleep(3000);  // time for a duplicate to show
        int dup = 0;
        for (AtomicInteger n : seen.values()) dup += n.get() - 1;
        System.out.println("CONSUMED unique=" + seen.size() + " dup=" + dup + " brokers=" + new TreeMap<>(perBroker)
            + " members=" + new TreeMap<>(perMember));
        check(dup == 0, "duplicates: " + dup);
        p.shutdown();
        for (DefaultMQPushConsumer c : members) c.shutdown();  // persists the offsets on both brokers
    }

    // --- orderly: per-key and per-queue order over both brokers ---------------------------------------
    static void orderly(int count) throws Exception {
        int keys = 16;
        Map<Integer, Integer> next = new ConcurrentHashMap<>();
        Map<String, Long> lastOffset = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> perBroker = new ConcurrentHashMap<>();
        AtomicInteger consumed = new AtomicInteger();
        AtomicInteger disorder = new AtomicInteger();
        List<DefaultMQPushConsumer> members = new ArrayList<>();
        for (String name : List.of("o1", "o2")) {
            DefaultMQPushConsumer c = consumer(name);
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    String[] kv = body(m).split(":");
                    int key = Integer.parseInt(kv[0]);
                    int seq = Integer.parseInt(kv[1]);
                    int want = next.getOrDefault(key, 0);
                    if (seq != want) {
                        disorder.incrementAndGet();
                        System.out.println("FAIL key " + key + " got " + seq + " expected " + want);
                    }
                    next.put(key, seq + 1);
                    MessageQueue mq = ctx.getMessageQueue();
                    String q = mq.getBrokerName() + "/" + mq.getQueueId();
                    Long last = lastOffset.put(q, m.getQueueOffset());
                    if (last != null && m.getQueueOffset() <= last) {
                        disorder.incrementAndGet();
                        System.out.println("FAIL queue " + q + " offset " + m.getQueueOffset() + " after " + last);
                    }
                    perBroker.computeIfAbsent(mq.getBrokerName(), k -> new AtomicInteger()).incrementAndGet();
                    consumed.incrementAndGet();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            c.start();
            members.add(c);
        }
        DefaultMQProducer p = producer("p_orderly");
        int queues = p.fetchPublishMessageQueues(topic).size();
        check(queues == 8, "publish queues of both brokers: " + queues);
        check(await(60000, () -> balanced(members, queues)), "orderly members own " + owned(members.get(0))
            + " and " + owned(members.get(1)) + " of " + queues + " queues");
        MessageQueueSelector byKey = (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size());
        int[] seq = new int[keys];
        for (int i = 0; i < count; i++) {
            int key = i % keys;
            Message m = new Message(topic, "TagO", "ord" + i, (key + ":" + seq[key]++).getBytes(StandardCharsets.UTF_8));
            SendResult r = p.send(m, byKey, key);
            check(r.getSendStatus() == SendStatus.SEND_OK, "orderly send " + r);
            System.out.println("SENT " + r.getMessageQueue().getBrokerName() + " " + r.getMessageQueue().getQueueId());
        }
        check(await(60000, () -> consumed.get() >= count), "orderly consumed " + consumed + " of " + count);
        Thread.sleep(2000);
        System.out.println("CONSUMED total=" + consumed + " disorder=" + disorder + " brokers=" + new TreeMap<>(perBroker));
        check(consumed.get() == count && disorder.get() == 0, "orderly: consumed " + consumed + " disorder " + disorder);
        p.shutdown();
        for (DefaultMQPushConsumer c : members) c.shutdown();
    }

    // --- failover: sends and consumption go on while a broker stops and comes back --------------------
    static void failover() throws Exception {
        Map<String, String> ackedBy = new ConcurrentHashMap<>();  // body -> broker that acknowledged it
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        Map<String, AtomicLong> sentPer = new ConcurrentHashMap<>();
        Map<String, AtomicLong> consumedPer = new ConcurrentHashMap<>();
        AtomicLong failures = new AtomicLong();
        AtomicLong run = new AtomicLong();
        AtomicLong maxRun = new AtomicLong();
        List<String> failureLog = Collections.synchronizedList(new ArrayList<>());
        List<DefaultMQPushConsumer> members = new ArrayList<>();
        for (String name : List.of("f1", "f2")) {
            DefaultMQPushConsumer c = consumer(name);
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    seen.computeIfAbsent(body(m), k -> new AtomicInteger()).incrementAndGet();
                    consumedPer.computeIfAbsent(ctx.getMessageQueue().getBrokerName(), k -> new AtomicLong()).incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            members.add(c);
        }
        DefaultMQProducer p = producer("p_failover");
        int queues = p.fetchPublishMessageQueues(topic).size();
        check(queues == 8, "publish queues of both brokers: " + queues);
        check(await(60000, () -> balanced(members, queues)), "failover members own " + owned(members.get(0))
            + " and " + owned(members.get(1)) + " of " + queues + " queues");
        AtomicBoolean sending = new AtomicBoolean(true);
        Thread sender = new Thread(() -> {
            long i = 0;
            while (sending.get()) {
                String b = "fo-" + i++;
                try {
                    SendResult r = p.send(new Message(topic, "TagF", b, b.getBytes(StandardCharsets.UTF_8)));
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        ackedBy.put(b, r.getMessageQueue().getBrokerName());
                        sentPer.computeIfAbsent(r.getMessageQueue().getBrokerName(), k -> new AtomicLong()).incrementAndGet();
                        run.set(0);
                    } else {
                        failureLog.add(b + " " + r.getSendStatus());
                        failures.incrementAndGet();
                        maxRun.accumulateAndGet(run.incrementAndGet(), Math::max);
                    }
                } catch (Exception e) {
                    failureLog.add(b + " " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).split("\n")[0]);
                    failures.incrementAndGet();
                    maxRun.accumulateAndGet(run.incrementAndGet(), Math::max);
                }
                try {
                    Thread.sleep(10);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        sender.start();
        System.out.println("STARTED");
        Set<String> marked = new HashSet<>();  // acknowledged by broker-b and not consumed at the last "mark"
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("stats")) {
                System.out.println("STATS acked=" + ackedBy.size() + " failures=" + failures + " maxRun=" + maxRun
                    + " sentA=" + sentPer.getOrDefault("broker-a", new AtomicLong())
                    + " sentB=" + sentPer.getOrDefault("broker-b", new AtomicLong())
                    + " consumedA=" + consumedPer.getOrDefault("broker-a", new AtomicLong())
                    + " consumedB=" + consumedPer.getOrDefault("broker-b", new AtomicLong())
                    + " unique=" + seen.size());
            } else if (line.equals("suspend")) {
                for (DefaultMQPushConsumer c : members) c.suspend();
                System.out.println("SUSPENDED");
            } else if (line.equals("resume")) {
                for (DefaultMQPushConsumer c : members) c.resume();
                System.out.println("RESUMED");
            } else if (line.equals("mark")) {
                marked.clear();
                for (Map.Entry<String, String> e : new HashMap<>(ackedBy).entrySet()) {
                    if (e.getValue().equals("broker-b") && !seen.containsKey(e.getKey())) marked.add(e.getKey());
                }
                System.out.println("MARKED pendingB=" + marked.size());
            } else if (line.equals("stop")) {
                break;
            }
        }
        sending.set(false);
        sender.join(10000);
        boolean all = await(90000, () -> seen.keySet().containsAll(ackedBy.keySet()));
        List<String> missing = new ArrayList<>();
        for (String b : ackedBy.keySet()) if (!seen.containsKey(b)) missing.add(b + "@" + ackedBy.get(b));
        int markedLeft = 0;
        for (String b : marked) if (!seen.containsKey(b)) markedLeft++;
        int dup = 0;
        for (AtomicInteger n : seen.values()) dup += n.get() - 1;
        System.out.println("FINAL acked=" + ackedBy.size() + " failures=" + failures + " maxRun=" + maxRun
            + " missing=" + missing.size() + " dup=" + dup + " markedB=" + marked.size() + " markedLeft=" + markedLeft
            + " sent=" + new TreeMap<>(sentPer) + " consumed=" + new TreeMap<>(consumedPer));
        for (String f : failureLog.subList(0, Math.min(20, failureLog.size()))) System.out.println("SEND-FAILURE " + f);
        check(all && missing.isEmpty(), "acknowledged and never consumed: " + missing.subList(0, Math.min(20, missing.size())));
        check(markedLeft == 0, "unconsumed on the stopped broker and lost: " + markedLeft);
        p.shutdown();
        for (DefaultMQPushConsumer c : members) c.shutdown();
    }

    public static void main(String[] args) throws Exception {
        ns = args[0];
        String section = args[1];
        topic = args[2];
        group = args[3];
        int count = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        long t0 = System.currentTimeMillis();
        try {
            switch (section) {
                case "spread": spread(count); break;
                case "orderly": orderly(count); break;
                case "failover": failover(); break;
                default: check(false, "unknown section " + section);
            }
        } catch (Throwable e) {
            check(false, section + " threw " + e);
            e.printStackTrace(System.out);
        }
        System.out.println("RESULT " + section + " bad=" + bad + " in " + (System.currentTimeMillis() - t0) + " ms");
        System.exit(bad == 0 ? 0 : 1);
    }
}
