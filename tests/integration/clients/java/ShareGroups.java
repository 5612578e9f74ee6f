// RafkaDriver (Java kafka-clients driver): share groups (KIP-932).
// share-consume runs one member of a share group (KafkaShareConsumer, explicit
// acknowledgement) and prints each record with its delivery count, and which
// acknowledgements the broker confirmed. Contract: ../README.md ("Share groups").
// kafka-clients 3.9 has only KIP-932's early-access share consumer (its first protocol,
// no delivery counts): the 3.9.1 build compiles the same code and exits 3.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class ShareGroups extends RafkaDriver {
    private ShareGroups() {}

    static int shareConsume(String bootstrap, String topic, Map<String, String> o, long timeoutMs)
            throws Exception {
        java.lang.reflect.Method deliveryCount;
        try {
            deliveryCount = ConsumerRecord.class.getMethod("deliveryCount");
        } catch (NoSuchMethodException e) {
            System.err.println("share-consume: this kafka-clients has only the early-access "
                    + "share consumer (KIP-932 needs 4.x)");
            return EXIT_UNSUPPORTED;
        }
        String ackDefault = o.getOrDefault("ack", "accept");
        String commit = o.getOrDefault("commit", "auto");
        if (!List.of("accept", "release", "reject").contains(ackDefault)
                || !List.of("auto", "sync", "async").contains(commit))
            usage("share-consume: --ack accept|release|reject, --commit auto|sync|async");
        Set<Long> release = offsetSet(o.get("release")), reject = offsetSet(o.get("reject"));
        int maxRecords = Integer.parseInt(o.getOrDefault("max-records", "0"));
        boolean hold = flag(o, "hold");
        String group = required(o, "group");
        AtomicBoolean stop = new AtomicBoolean();
        java.util.concurrent.BlockingQueue<String> lines =
                new java.util.concurrent.LinkedBlockingQueue<>();
        Thread stdin = new Thread(() -> { // "stop" or the end stops; other lines end a hold
            try {
                java.io.BufferedReader in = new java.io.BufferedReader(
                        new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
                for (String line; (line = in.readLine()) != null && !line.trim().equals("stop"); )
                    lines.add(line.trim());
            } catch (java.io.IOException e) { /* closed */ }
            stop.set(true);
            lines.add("");
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        Properties p = clientProperties(bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        int records = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        boolean timedOut = false;
        KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p);
        try {
            c.setAcknowledgementCommitCallback((offsets, err) -> offsets.forEach((tip, offs) ->
                    event("acked", "\"partition\":" + tip.partition() + ",\"offsets\":"
                            + json(new TreeSet<>(offs)) + ",\"error\":"
                            + (err == null ? "null" : js(errorName(err))))));
            c.subscribe(List.of(topic));
            event("subscribed", "\"group\":" + js(group));
            while (!stop.get() && !(maxRecords > 0 && records >= maxRecords)) {
                if (System.currentTimeMillis() > deadline) {
                    timedOut = true;
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                Map<ConsumerRecord<byte[], byte[]>, AcknowledgeType> acks =
                        new java.util.LinkedHashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String ack = release.contains(r.offset()) ? "release"
                            : reject.contains(r.offset()) ? "reject" : ackDefault;
                    Optional<?> count = (Optional<?>) deliveryCount.invoke(r);
                    event("record", "\"key\":" + bin(r.key()) + ",\"partition\":" + r.partition()
                            + ",\"offset\":" + r.offset() + ",\"delivery_count\":"
                            + count.map(String::valueOf).orElse("null") + ",\"ack\":" + js(ack));
                    acks.put(r, AcknowledgeType.valueOf(ack.toUpperCase()));
                }
                records += acks.size();
                if (hold) { // the first records stay acquired until stdin says go
                    event("hold", "\"records\":" + records);
                    lines.take();
                    hold = false;
                }
                acks.forEach(c::acknowledge);
                if (commit.equals("sync")) {
                    Map<String, Object> parts = new TreeMap<>();
                    c.commitSync(Duration.ofMillis(timeoutMs)).forEach((tip, err) ->
                            parts.put(String.valueOf(tip.partition()),
                                    err.map(RafkaDriver::errorName).orElse(null)));
                    if (!parts.isEmpty()) event("commit", "\"partitions\":" + json(parts));
                } else if (commit.equals("async")) {
                    c.commitAsync();
                }
            }
        } catch (Exception e) {
            event("error", "\"error\":" + js(errorName(e)) + ",\"message\":"
                    + js(String.valueOf(e.getMessage())) + ",\"fatal\":true");
            throw e;
        } finally {
            c.close(); // commits what is still pending, leaves the group
            event("closed", "\"records\":" + records);
        }
        if (timedOut) {
            printLine("{\"error\":\"TIMEOUT\",\"message\":\"share-consume: still running after "
                    + timeoutMs + " ms\"}");
            return EXIT_FAILED;
        }
        return 0;
    }

    static Set<Long> offsetSet(String spec) {
        Set<Long> out = new TreeSet<>();
        if (spec != null)
            for (String x : spec.split(",")) if (!x.isBlank()) out.add(Long.parseLong(x.trim()));
        return out;
    }
}
