// RafkaDriver (Java kafka-clients driver): transactions.
// txn-produce, txn-copy and txn-fence: contract in ../README.md ("Transactions").

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class Transactions extends RafkaDriver {
    private Transactions() {}

    static KafkaProducer<byte[], byte[]> txnProducer(String bootstrap, String transactionalId,
                                                     long timeoutMs) {
        Properties p = clientProperties(bootstrap);
        p.put("transactional.id", transactionalId);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("delivery.timeout.ms", (int) timeoutMs);
        p.put("request.timeout.ms", (int) Math.min(30_000, timeoutMs / 2));
        p.put("max.block.ms", timeoutMs);
        p.put("linger.ms", 5);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    /** --end commit|abort[,...]: how each transaction ends, cycled. */
    static String[] ends(Map<String, String> o) {
        String[] ends = o.getOrDefault("end", "commit").split(",");
        for (String e : ends)
            if (!e.equals("commit") && !e.equals("abort")) usage("bad --end " + o.get("end"));
        return ends;
    }

    /** Waits for every send (flush), then raises the first failure. */
    static void flushAll(KafkaProducer<byte[], byte[]> p, List<Future<RecordMetadata>> sent)
            throws Exception {
        p.flush();
        for (Future<RecordMetadata> f : sent) f.get();
        sent.clear();
    }

    /** --hold true: a transaction waits for a line on stdin before it ends (EOF: no more). */
    static final class Hold {
        boolean on;
        final java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));

        Hold(Map<String, String> o) {
            on = Boolean.parseBoolean(o.getOrDefault("hold", "false"));
        }

        void await(int txn) throws java.io.IOException {
            if (!on) return;
            event("hold", "\"txn\":" + txn);
            on = in.readLine() != null;
        }
    }

    static int txnProduce(String bootstrap, String topic, Map<String, String> o, long timeoutMs)
            throws Exception {
        int count = Integer.parseInt(required(o, "count"));
        int batches = Integer.parseInt(o.getOrDefault("batches", "1"));
        long startTs = o.containsKey("start-ts") ? Long.parseLong(o.get("start-ts"))
                : System.currentTimeMillis();
        String[] ends = ends(o);
        Hold hold = new Hold(o);
        boolean flush = Boolean.parseBoolean(o.getOrDefault("flush", "true"));
        try (KafkaProducer<byte[], byte[]> p =
                     txnProducer(bootstrap, required(o, "transactional-id"), timeoutMs)) {
            p.initTransactions();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int k = 0; k < batches; k++) {
                int first = (int) ((long) k * count / batches);
                int end = (int) ((long) (k + 1) * count / batches);
                p.beginTransaction();
                for (int i = first; i < end; i++) sent.add(p.send(reference(topic, i, startTs)));
                if (flush) flushAll(p, sent);
                hold.await(k);
                String how = ends[k % ends.length];
                // --flush false: commit flushes the sends itself (and fails if one did); abort
                // drops those not sent yet
                if (how.equals("commit")) p.commitTransaction();
                else p.abortTransaction();
                sent.clear();
                event(how, "\"txn\":" + k + ",\"first\":" + first + ",\"count\":" + (end - first));
            }
        }
        return 0;
    }

    /** Consume-transform-produce: each poll's records are copied and committed in a txn. */
    static int txnCopy(String bootstrap, String topic, Map<String, String> o, long timeoutMs)
            throws Exception {
        String output = required(o, "output");
        int count = Integer.parseInt(o.getOrDefault("count", "0"));
        int batch = Integer.parseInt(o.getOrDefault("batch", "10"));
        int maxBatches = Integer.parseInt(o.getOrDefault("max-batches", "0"));
        long idleMs = (long) (Double.parseDouble(o.getOrDefault("idle", "0")) * 1000);
        String[] ends = ends(o);
        Hold hold = new Hold(o);
        Properties cp = clientProperties(bootstrap);
        cp.put("group.id", required(o, "group"));
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("allow.auto.create.topics", "false");
        cp.put("max.poll.records", batch);
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int committed = 0, aborted = 0, txn = 0;
        boolean timedOut = false;
        long last = nowMs(), deadline = last + timeoutMs;
        try (KafkaProducer<byte[], byte[]> p =
                     txnProducer(bootstrap, required(o, "transactional-id"), timeoutMs);
             KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            p.initTransactions();
            c.subscribe(List.of(topic));
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            while (!(count > 0 && committed >= count) && !(maxBatches > 0 && txn >= maxBatches)) {
                long now = nowMs();
                if (idleMs > 0 && now - last >= idleMs) break;
                if (now >= deadline) {
                    timedOut = true;
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs =
                        c.poll(Duration.ofMillis(Math.min(500, deadline - now)));
                if (recs.isEmpty()) continue;
                last = nowMs();
                Map<TopicPartition, Long> first = new HashMap<>();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Map<Integer, Long> offsets = new TreeMap<>();
                StringBuilder keys = new StringBuilder("[");
                p.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    first.putIfAbsent(tp, r.offset());
                    next.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    offsets.put(r.partition(), r.offset() + 1);
                    RecordHeaders hs = new RecordHeaders();
                    String src = r.partition() + ":" + r.offset();
                    hs.add("src", src.getBytes(StandardCharsets.UTF_8));
                    sent.add(p.send(
                            new ProducerRecord<>(output, null, null, r.key(), r.value(), hs)));
                    keys.append(keys.length() > 1 ? "," : "").append(bin(r.key()));
                }
                flushAll(p, sent);
                p.sendOffsetsToTransaction(next, c.groupMetadata());
                hold.await(txn);
                String how = ends[txn % ends.length];
                if (how.equals("commit")) {
                    p.commitTransaction();
                    committed += recs.count();
                } else {
                    p.abortTransaction();
                    aborted += recs.count();
                    first.forEach(c::seek); // read them again in a later transaction
                }
                event(how, "\"txn\":" + txn + ",\"records\":" + recs.count() + ",\"offsets\":"
                        + offsetsJson(offsets) + ",\"keys\":" + keys.append(']'));
                txn++;
            }
        }
        event("closed", "\"committed\":" + committed + ",\"aborted\":" + aborted);
        if (timedOut) {
            String msg = "txn-copy: " + committed + " of " + count + " records committed in "
                    + timeoutMs + " ms";
            System.err.println(msg);
            printLine("{\"error\":\"TIMEOUT\",\"message\":" + js(msg) + "}");
            return EXIT_FAILED;
        }
        return 0;
    }

    /** Two producers with one transactional.id: the second fences the first (the zombie). */
    static int txnFence(String bootstrap, String topic, Map<String, String> o, long timeoutMs)
            throws Exception {
        String id = required(o, "transactional-id");
        long startTs = System.currentTimeMillis();
        KafkaProducer<byte[], byte[]> zombie = txnProducer(bootstrap, id, timeoutMs);
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            event("begin", "\"producer\":\"A\"");
            zombie.send(reference(topic, 0, startTs)).get();
            event("sent", "\"producer\":\"A\",\"key\":\"key-0\"");
            try (KafkaProducer<byte[], byte[]> b = txnProducer(bootstrap, id, timeoutMs)) {
                b.initTransactions(); // bumps the epoch: A is fenced, its transaction aborted
                event("init", "\"producer\":\"B\"");
                b.beginTransaction();
                b.send(reference(topic, 1, startTs)).get();
                b.commitTransaction();
                event("commit", "\"producer\":\"B\",\"key\":\"key-1\"");
            }
            String stage = "send";
            try {
                zombie.send(reference(topic, 2, startTs)).get();
                stage = "commit";
                zombie.commitTransaction();
            } catch (Exception e) {
                Throwable api = e;
                while (!(api instanceof ApiException) && api.getCause() != null) api = api.getCause();
                System.err.println("txn-fence: A failed at " + stage + ": " + e);
                event("fenced", "\"producer\":\"A\",\"stage\":" + js(stage) + ",\"error\":"
                        + js(errorName(api)));
                return 0;
            }
            event("not-fenced", "\"producer\":\"A\"");
            printLine("{\"error\":\"NOT_FENCED\",\"message\":\"the first producer committed"
                    + " after the second one initialized\"}");
            return EXIT_FAILED;
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
    }
}
