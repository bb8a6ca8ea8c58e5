// Java client 4.9 against a rocketq broker: TransactionMQProducer (commit, rollback, unknown then
// check-back commit) and delayed sends (levels 1-3), consumed by a DefaultMQPushConsumer.
// Usage: TxDelayCheck NAMESRV_ADDR. Exit 0 when every committed message arrives once, no rolled-back
// one arrives, every delayed message arrives on time and the broker asked for check-backs.
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.client.consumer.*;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

public class TxDelayCheck {
    public static void main(String[] args) throws Exception {
        String ns = args[0];
        String topic = "TxT" + System.currentTimeMillis();
        String dtopic = "DlT" + System.currentTimeMillis();
        Map<String, Long> received = new ConcurrentHashMap<>();
        Map<String, Long> delayRecv = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_tx");
        c.setNamesrvAddr(ns);
        c.subscribe(topic, "*");
        c.subscribe(dtopic, "*");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String k = m.getKeys();
                if (m.getTopic().equals(dtopic)) delayRecv.put(k, System.currentTimeMillis());
                else received.merge(k, 1L, Long::sum);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        TransactionMQProducer p = new TransactionMQProducer("pg_tx");
        p.setNamesrvAddr(ns);
        AtomicInteger checks = new AtomicInteger();
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String k = msg.getKeys();
                int i = Integer.parseInt(k.substring(1));
                if (i % 3 == 0) return LocalTransactionState.COMMIT_MESSAGE;
                if (i % 3 == 1) return LocalTransactionState.ROLLBACK_MESSAGE;
                return LocalTransactionState.UNKNOW;
            }
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.incrementAndGet();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        // create topics through a normal send first
        DefaultMQProducer plain = new DefaultMQProducer("pg_plain");
        plain.setNamesrvAddr(ns);
        plain.start();
        plain.send(new Message(topic, "warm", "w0", "x".getBytes()));
        plain.send(new Message(dtopic, "warm", "w0", "x".getBytes()));
        c.start();
        int n = 30;
        for (int i = 0; i < n; i++) {
            Message m = new Message(topic, "t", "k" + i, ("tx" + i).getBytes());
            TransactionSendResult r = p.sendMessageInTransaction(m, null);
            if (r.getSendStatus() != SendStatus.SEND_OK) throw new RuntimeException("send " + r);
        }
        Map<String, Long> sentAt = new HashMap<>();
        int[] levels = {1, 2, 3};
        for (int i = 0; i < 9; i++) {
            Message m = new Message(dtopic, "d", "d" + i, ("delay" + i).getBytes());
            m.setDelayTimeLevel(levels[i % 3]);
            SendResult r = plain.send(m);
            sentAt.put("d" + i, System.currentTimeMillis());
        }
        long deadline = System.currentTimeMillis() + 120_000;
        while (System.currentTimeMillis() < deadline) {
            long commitKeys = received.keySet().stream().filter(k -> k.startsWith("k")).count();
            if (commitKeys >= 20 && delayRecv.size() >= 9) break;
            Thread.sleep(500);
        }
        Thread.sleep(3000);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            Long cnt = received.get("k" + i);
            boolean want = i % 3 != 1;
            if (want && (cnt == null || cnt != 1)) { System.out.println("MISSING/DUP k" + i + " " + cnt); bad++; }
            if (!want && cnt != null) { System.out.println("ROLLED BACK BUT DELIVERED k" + i); bad++; }
        }
        long[] want = {1000, 5000, 10000};
        for (int i = 0; i < 9; i++) {
            Long at = delayRecv.get("d" + i);
            if (at == null) { System.out.println("DELAY MISSING d" + i); bad++; continue; }
            long d = at - sentAt.get("d" + i);
            System.out.println("d" + i + " level " + levels[i % 3] + " delay ms " + d);
            if (d < want[i % 3] - 50 || d > want[i % 3] + 3000) { System.out.println("DELAY WRONG d" + i); bad++; }
        }
        System.out.println("checks=" + checks.get() + " bad=" + bad);
        p.shutdown(); plain.shutdown(); c.shutdown();
        System.exit(bad == 0 && checks.get() >= 10 ? 0 : 1);
    }
}
