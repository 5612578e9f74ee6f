// RafkaDriver (Java kafka-clients driver): create-topic, produce, produce-stream, consume and
// offsets-for-times. Command-line contract: ../README.md.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class ProduceConsume extends RafkaDriver {
    private ProduceConsume() {}

    static int createTopic(String bootstrap, String topic, int partitions,
                           Optional<Short> replication, long timeoutMs) throws Exception {
        Properties p = clientProperties(bootstrap);
        p.put("default.api.timeout.ms", (int) timeoutMs);
        p.put("request.timeout.ms", (int) Math.min(30_000, timeoutMs)); // must be <= the above
        try (Admin admin = Admin.create(p)) {
            // Optional.empty() replication => the broker's default (sent as -1).
            NewTopic nt = new NewTopic(topic, Optional.of(partitions), replication);
            admin.createTopics(List.of(nt)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof TopicExistsException) {
                System.err.println("create-topic: topic already exists: " + e.getCause().getMessage());
                return EXIT_TOPIC_EXISTS;
            }
            System.err.println("create-topic failed: " + e.getCause());
            return EXIT_FAILED;
        } catch (java.util.concurrent.TimeoutException e) {
            System.err.println("create-topic: no answer within " + timeoutMs + " ms");
            return EXIT_FAILED;
        }
        System.out.println("{\"topic\":" + js(topic) + ",\"partitions\":" + partitions + "}");
        return 0;
    }

    static int produce(String bootstrap, String topic, int count, String compression,
                       String acks, long startTs, long timeoutMs) throws Exception {
        Properties p = clientProperties(bootstrap);
        p.put("acks", acks);
        p.put("compression.type", compression);
        // Idempotence is on by default since 3.0; the broker gets InitProducerId and
        // sequence numbers in a later issue. Turn this back on (remove the line) then.
        p.put("enable.idempotence", "false");
        p.put("delivery.timeout.ms", (int) timeoutMs);
        p.put("request.timeout.ms", (int) Math.min(30_000, timeoutMs / 2));
        p.put("linger.ms", 5);
        p.put("max.block.ms", timeoutMs);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());

        AtomicInteger failures = new AtomicInteger();
        java.util.concurrent.atomic.AtomicReference<Exception> first =
                new java.util.concurrent.atomic.AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count && failures.get() == 0; i++) {
                String key = "key-" + i;
                producer.send(reference(topic, i, startTs), (md, err) -> {
                    if (err != null) {
                        failures.incrementAndGet();
                        first.compareAndSet(null, err);
                        System.err.println("delivery failed for " + key + ": " + err);
                        return;
                    }
                    // acks=0: offset is -1 (hasOffset() false), timestamp is what we sent.
                    printLine("{\"key\":" + js(key) + ",\"partition\":" + md.partition()
                            + ",\"offset\":" + (md.hasOffset() ? md.offset() : -1)
                            + ",\"timestamp\":" + md.timestamp() + "}");
                });
            }
            producer.flush();
        }
        if (failures.get() > 0) {
            System.err.println("produce: " + failures.get() + " of " + count
                    + " records failed (sending stops at the first failure)");
            errorLine(first.get());
            return EXIT_FAILED;
        }
        return 0;
    }

    /**
     * produce-stream: records "<id> <seq>" (key "<id>-<seq>") at a steady rate for a while, with
     * the client's default producer settings unless an option overrides one; one JSON line per
     * send, acknowledgement and failure, so a caller can keep a history (tests/integration/chaos).
     */
    static int produceStream(String bootstrap, String topic, Map<String, String> o)
            throws Exception {
        double durationS = Double.parseDouble(required(o, "duration"));
        double rate = Double.parseDouble(o.getOrDefault("rate", "100"));
        String id = o.getOrDefault("producer-id", "java");
        long drainMs = (long) (Double.parseDouble(o.getOrDefault("drain", "30")) * 1000);
        if (rate <= 0 || durationS < 0 || drainMs < 0) usage("bad --rate, --duration or --drain");
        Properties p = clientProperties(bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        // Only what is asked for: everything else keeps the client's defaults (acks=all and
        // enable.idempotence=true since 3.0, delivery.timeout.ms 120 s, request.timeout.ms 30 s).
        if (o.containsKey("acks")) p.put(ProducerConfig.ACKS_CONFIG, o.get("acks"));
        if (o.containsKey("idempotence"))
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, o.get("idempotence"));
        if (o.containsKey("delivery-timeout"))
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG,
                    (int) (Double.parseDouble(o.get("delivery-timeout")) * 1000));
        if (o.containsKey("request-timeout"))
            p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG,
                    (int) (Double.parseDouble(o.get("request-timeout")) * 1000));
        if (o.containsKey("max-block"))
            p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG,
                    (long) (Double.parseDouble(o.get("max-block")) * 1000));

        // --stop-on-eof true: also stop sending when stdin closes (a caller's early stop).
        AtomicBoolean stop = new AtomicBoolean();
        if (Boolean.parseBoolean(o.getOrDefault("stop-on-eof", "false"))) {
            Thread eof = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) { /* discard */ }
                } catch (java.io.IOException e) { /* closed */ }
                stop.set(true);
            }, "stdin-eof");
            eof.setDaemon(true);
            eof.start();
        }
        AtomicLong acked = new AtomicLong(), failed = new AtomicLong();
        long sent = 0;
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        try {
            long start = System.nanoTime(), end = start + (long) (durationS * 1e9);
            long gapNs = (long) (1e9 / rate), next = start;
            for (long seq = 0; System.nanoTime() < end && !stop.get(); seq++) {
                long wait = next - System.nanoTime();
                if (wait > 0) TimeUnit.NANOSECONDS.sleep(wait);
                // Behind by more than a second (send() blocked): drop the backlog, no burst.
                next = Math.max(next + gapNs, System.nanoTime() - 1_000_000_000L);
                String key = id + "-" + seq, val = id + " " + seq;
                String ids = "\"key\":" + js(key) + ",\"value\":" + js(val);
                // send() may both call back and throw (a producer in a fatal state): report once.
                AtomicBoolean reported = new AtomicBoolean();
                printLine("{\"event\":\"send\"," + ids + ",\"t\":" + System.currentTimeMillis()
                        + "}");
                sent++;
                try {
                    producer.send(new ProducerRecord<>(topic, key.getBytes(StandardCharsets.UTF_8),
                            val.getBytes(StandardCharsets.UTF_8)), (md, err) -> {
                        long now = System.currentTimeMillis();
                        if (reported.getAndSet(true)) return;
                        if (err == null) {
                            acked.incrementAndGet();
                            printLine("{\"event\":\"ack\"," + ids + ",\"partition\":"
                                    + md.partition() + ",\"offset\":"
                                    + (md.hasOffset() ? md.offset() : -1) + ",\"t\":" + now + "}");
                        } else {
                            failed.incrementAndGet();
                            printLine(failLine(ids, err, false, now));
                        }
                    });
                } catch (RuntimeException e) {
                    // send() threw: the record never reached the producer's buffer.
                    if (!reported.getAndSet(true)) {
                        failed.incrementAndGet();
                        printLine(failLine(ids, e, true, System.currentTimeMillis()));
                    }
                }
            }
        } finally {
            // Waits up to --drain for what is in flight; then fails the rest (callbacks run).
            producer.close(Duration.ofMillis(drainMs));
        }
        printLine("{\"event\":\"done\",\"sent\":" + sent + ",\"acked\":" + acked.get()
                + ",\"failed\":" + failed.get() + ",\"t\":" + System.currentTimeMillis() + "}");
        return 0;
    }

    /** A failed record; `unsent` true: send() threw, so it never reached a broker. */
    static String failLine(String ids, Throwable err, boolean unsent, long now) {
        Throwable root = err;
        while (root.getCause() != null && root instanceof ExecutionException)
            root = root.getCause();
        return "{\"event\":\"fail\"," + ids + ",\"error\":" + js(root.getClass().getName())
                + ",\"message\":" + js(String.valueOf(root.getMessage())) + ",\"unsent\":"
                + unsent + ",\"retriable\":"
                + (root instanceof org.apache.kafka.common.errors.RetriableException)
                + ",\"t\":" + now + "}";
    }

    static int consume(String bootstrap, String topic, int expect, long timeoutMs,
                       String isolation) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> c = newConsumer(bootstrap, timeoutMs, isolation)) {
            // No group: assign every partition from metadata and start at the log start.
            List<TopicPartition> tps = partitions(c, topic, deadline);
            c.assign(tps);
            c.seekToBeginning(tps);
            while (seen < expect && System.currentTimeMillis() < deadline) {
                long left = Math.max(1, Math.min(500, deadline - System.currentTimeMillis()));
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(left))) {
                    if (seen == expect) break;
                    seen++;
                    StringBuilder hs = new StringBuilder("[");
                    for (Header h : r.headers()) {
                        if (hs.length() > 1) hs.append(',');
                        hs.append('[').append(js(h.key())).append(',').append(bin(h.value())).append(']');
                    }
                    hs.append(']');
                    printLine("{\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                            + ",\"key\":" + bin(r.key()) + ",\"value\":" + bin(r.value())
                            + ",\"headers\":" + hs + ",\"timestamp\":" + r.timestamp()
                            + ",\"timestamp_type\":" + js(r.timestampType().toString()) + "}");
                }
            }
        }
        if (seen < expect) {
            System.err.println("consume: timed out with " + seen + " of " + expect + " records");
            return EXIT_FAILED;
        }
        return 0;
    }

    static int offsetsForTimes(String bootstrap, String topic, long ts, long timeoutMs)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> c = newConsumer(bootstrap, timeoutMs)) {
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : partitions(c, topic, deadline)) query.put(tp, ts);
            // Sends ListOffsets with the timestamp; null = no record at or after ts.
            Map<TopicPartition, OffsetAndTimestamp> res =
                    c.offsetsForTimes(query, Duration.ofMillis(timeoutMs));
            TreeMap<Integer, Long> out = new TreeMap<>();
            res.forEach((tp, ot) -> out.put(tp.partition(), ot == null ? -1L : ot.offset()));
            StringBuilder sb = new StringBuilder("{");
            out.forEach((part, off) -> {
                if (sb.length() > 1) sb.append(',');
                sb.append('"').append(part).append("\":").append(off);
            });
            printLine(sb.append('}').toString());
        }
        return 0;
    }
}
