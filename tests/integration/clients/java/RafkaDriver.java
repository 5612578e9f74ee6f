// Driver for the Java kafka-clients library (compiled against 4.3.0 and 3.9.1; the same
// source must build with both). Command-line contract: ../README.md.
// stdout carries only JSON lines; diagnostics go to stderr (log4j2, level $RAFKA_CLIENT_LOG).
// Security settings come from $RAFKA_CLIENT_SECURITY (README "Security"): clientProperties().

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class RafkaDriver {
    static final int EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3, EXIT_TOPIC_EXISTS = 4;
    static final String FILLER = "abcdefghijklmnopqrstuvwxyz0123456789";

    public static void main(String[] argv) {
        try {
            int rc = run(argv);
            System.out.flush();
            System.exit(rc);
        } catch (Exception e) {
            // The contract's error line (group-consume has reported it as an event).
            if (!(argv.length > 0 && argv[0].equals("group-consume"))) errorLine(e);
            System.out.flush();
            // One line per cause; the stack trace only when asked for.
            StringBuilder sb = new StringBuilder("error: ").append(e);
            for (Throwable c = e.getCause(); c != null; c = c.getCause())
                sb.append("\n  caused by: ").append(c);
            System.err.println(sb);
            if ("DEBUG".equalsIgnoreCase(System.getenv("RAFKA_CLIENT_LOG"))) e.printStackTrace();
            System.exit(EXIT_FAILED);
        }
    }

    static int run(String[] argv) throws Exception {
        if (argv.length < 1) usage("missing command");
        if (argv[0].equals("admin")) return admin(argv);
        Map<String, String> o = parseOptions(argv);
        String bootstrap = required(o, "bootstrap");
        String topic = argv[0].equals("describe-group") ? o.get("topic") : required(o, "topic");
        long timeoutMs = (long) (Double.parseDouble(o.getOrDefault("timeout", "60")) * 1000);
        int rc;
        switch (argv[0]) {
            case "create-topic":
                rc = createTopic(bootstrap, topic, Integer.parseInt(required(o, "partitions")),
                        o.containsKey("replication-factor")
                                ? Optional.of(Short.parseShort(o.get("replication-factor")))
                                : Optional.empty(),
                        timeoutMs);
                break;
            case "produce":
                if (!List.of("none", "gzip", "snappy", "lz4", "zstd")
                        .contains(o.getOrDefault("compression", "none"))
                        || !List.of("-1", "0", "1").contains(o.getOrDefault("acks", "-1")))
                    usage("bad --compression or --acks");
                rc = produce(bootstrap, topic, Integer.parseInt(required(o, "count")),
                        o.getOrDefault("compression", "none"), o.getOrDefault("acks", "-1"),
                        o.containsKey("start-ts") ? Long.parseLong(o.get("start-ts"))
                                : System.currentTimeMillis(),
                        timeoutMs);
                break;
            case "consume":
                rc = consume(bootstrap, topic, Integer.parseInt(required(o, "expect")),
                        (long) (Double.parseDouble(o.getOrDefault("timeout", "30")) * 1000),
                        o.get("isolation-level"));
                break;
            case "txn-produce":
                rc = txnProduce(bootstrap, topic, o, timeoutMs);
                break;
            case "txn-copy":
                rc = txnCopy(bootstrap, topic, o, timeoutMs);
                break;
            case "txn-fence":
                rc = txnFence(bootstrap, topic, o, timeoutMs);
                break;
            case "produce-stream":
                rc = produceStream(bootstrap, topic, o);
                break;
            case "offsets-for-times":
                rc = offsetsForTimes(bootstrap, topic, Long.parseLong(required(o, "timestamp")),
                        timeoutMs);
                break;
            case "group-consume":
                try {
                    rc = new GroupMember(bootstrap, topic, o).run();
                } catch (Exception e) { // reported as an event too, then as any failure
                    Throwable root = e;
                    while (root.getCause() != null) root = root.getCause();
                    event("error", "\"error\":" + js(errorName(root)) + ",\"message\":"
                            + js(String.valueOf(root.getMessage())) + ",\"fatal\":true");
                    throw e;
                }
                break;
            case "describe-group":
                rc = describeGroup(bootstrap, required(o, "group"), timeoutMs);
                break;
            case "committed":
                rc = committed(bootstrap, topic, required(o, "group"), timeoutMs);
                break;
            case "commit":
                rc = commit(bootstrap, topic, o, timeoutMs);
                break;
            case "share-consume":
                rc = shareConsume(bootstrap, topic, o, timeoutMs);
                break;
            default:
                usage("unknown command " + argv[0]);
                return EXIT_USAGE;
        }
        return rc;
    }

    // ---- commands -------------------------------------------------------------------

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

    // ---- consumer groups ------------------------------------------------------------
    // group-consume runs one member of a consumer group (subscribe) and prints what happens to
    // it as JSON events; describe-group, committed and commit look at / write a group's offsets
    // from outside. Contract: ../README.md ("Consumer groups").

    static long nowMs() {
        return System.currentTimeMillis();
    }

    static int ms(Map<String, String> o, String name) {
        return (int) Math.round(Double.parseDouble(o.get(name)) * 1000);
    }

    static Map<Integer, Long> parsePairs(String spec) {
        Map<Integer, Long> out = new TreeMap<>();
        if (spec == null) return out;
        for (String item : spec.split(",")) {
            if (item.isBlank()) continue;
            String[] po = item.split(":");
            out.put(Integer.parseInt(po[0].trim()), Long.parseLong(po[1].trim()));
        }
        return out;
    }

    /** "P:O[@A],...": partition -> {O, A} (A = -1: at the partition's first record). */
    static Map<Integer, long[]> parseSeeks(String spec) {
        Map<Integer, long[]> out = new TreeMap<>();
        if (spec == null) return out;
        for (String item : spec.split(",")) {
            if (item.isBlank()) continue;
            String[] po = item.split(":");
            String[] oa = po[1].split("@");
            long at = oa.length > 1 ? Long.parseLong(oa[1].trim()) : -1;
            out.put(Integer.parseInt(po[0].trim()), new long[] {Long.parseLong(oa[0].trim()), at});
        }
        return out;
    }

    static String ints(Collection<Integer> xs) {
        StringBuilder sb = new StringBuilder("[");
        for (int x : new TreeSet<>(xs)) {
            if (sb.length() > 1) sb.append(',');
            sb.append(x);
        }
        return sb.append(']').toString();
    }

    static String offsetsJson(Map<Integer, Long> offsets) {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<Integer, Long> e : new TreeMap<>(offsets).entrySet()) {
            if (sb.length() > 1) sb.append(',');
            sb.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        return sb.append('}').toString();
    }

    /** An exception as Kafka's protocol error name when it maps to one, else its class name. */
    static String errorName(Throwable e) {
        while (e instanceof ExecutionException && e.getCause() != null) e = e.getCause();
        if (e instanceof ApiException && !(e instanceof CommitFailedException)) {
            Errors err = Errors.forException(e);
            if (err != Errors.UNKNOWN_SERVER_ERROR) return err.name();
        }
        return e.getClass().getSimpleName();
    }

    static void event(String kind, String fields) {
        printLine("{\"event\":" + js(kind) + (fields.isEmpty() ? "" : "," + fields) + ",\"t\":"
                + nowMs() + "}");
    }

    static final class GroupMember implements ConsumerRebalanceListener {
        final String topic, commit;
        final Map<String, String> o;
        final KafkaConsumer<byte[], byte[]> c;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicBoolean resumeAsked = new AtomicBoolean(); // a "resume" line on stdin
        final long started = System.nanoTime();
        final int maxRecords, commitEvery;
        final double durationS, processMs, stallMs;
        final int stallAt;
        final Map<Integer, long[]> seeks; // partition -> {offset, at which record (-1: first)}
        final Set<Integer> pause = new TreeSet<>();
        final Map<Integer, Long> next = new TreeMap<>(); // partition -> after last processed
        Set<Integer> owned = new TreeSet<>();
        List<Integer> paused = new ArrayList<>();
        String pauseState;
        int records;

        GroupMember(String bootstrap, String topic, Map<String, String> o) {
            this.topic = topic;
            this.o = o;
            commit = o.getOrDefault("commit", "auto");
            if (!List.of("auto", "sync", "async", "offsets", "none").contains(commit))
                usage("bad --commit " + commit);
            maxRecords = Integer.parseInt(o.getOrDefault("max-records", "0"));
            commitEvery = Integer.parseInt(o.getOrDefault("commit-every", "1"));
            durationS = Double.parseDouble(o.getOrDefault("duration", "0"));
            processMs = Double.parseDouble(o.getOrDefault("process-ms", "0"));
            stallAt = Integer.parseInt(o.getOrDefault("stall-at", "0"));
            stallMs = Double.parseDouble(o.getOrDefault("stall-ms", "0"));
            seeks = parseSeeks(o.get("seek"));
            for (String x : o.getOrDefault("pause", "").split(","))
                if (!x.isBlank()) pause.add(Integer.parseInt(x.trim()));
            pauseState = pause.isEmpty() ? "done" : "pending";

            Properties p = clientProperties(bootstrap);
            p.put("group.id", required(o, "group"));
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            p.put("auto.offset.reset", o.getOrDefault("offset-reset", "earliest"));
            p.put("enable.auto.commit", String.valueOf(commit.equals("auto")));
            p.put("allow.auto.create.topics", "false");
            if (o.containsKey("auto-commit-interval"))
                p.put("auto.commit.interval.ms", ms(o, "auto-commit-interval"));
            if (o.containsKey("instance-id")) p.put("group.instance.id", o.get("instance-id"));
            String assignor = o.get("assignor");
            if (o.getOrDefault("protocol", "classic").equals("consumer")) {
                // KIP-848: the broker assigns; session/heartbeat timeouts are broker settings
                // (the client refuses session.timeout.ms and partition.assignment.strategy).
                p.put("group.protocol", "consumer");
                if (assignor != null) p.put("group.remote.assignor", assignor);
            } else {
                if (o.containsKey("session-timeout"))
                    p.put("session.timeout.ms", ms(o, "session-timeout"));
                if (o.containsKey("heartbeat-interval"))
                    p.put("heartbeat.interval.ms", ms(o, "heartbeat-interval"));
                if (assignor != null) {
                    Map<String, String> classes = Map.of(
                            "range", "org.apache.kafka.clients.consumer.RangeAssignor",
                            "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                            "sticky", "org.apache.kafka.clients.consumer.StickyAssignor",
                            "cooperative-sticky",
                            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
                    if (!classes.containsKey(assignor)) usage("unknown --assignor " + assignor);
                    p.put("partition.assignment.strategy", classes.get(assignor));
                }
            }
            if (o.containsKey("max-poll-interval"))
                p.put("max.poll.interval.ms", ms(o, "max-poll-interval"));
            c = new KafkaConsumer<>(p);
        }

        boolean done() {
            return stop.get() || (maxRecords > 0 && records >= maxRecords)
                    || (durationS > 0 && (System.nanoTime() - started) / 1e9 >= durationS);
        }

        TopicPartition tp(int partition) {
            return new TopicPartition(topic, partition);
        }

        List<TopicPartition> tps(Collection<Integer> parts) {
            List<TopicPartition> out = new ArrayList<>();
            for (int x : parts) out.add(tp(x));
            return out;
        }

        Set<Integer> partitionsOf(Collection<TopicPartition> tps) {
            Set<Integer> out = new TreeSet<>();
            for (TopicPartition x : tps) if (x.topic().equals(topic)) out.add(x.partition());
            return out;
        }

        Map<Integer, Long> toCommit(Collection<Integer> parts) {
            Map<Integer, Long> out = new TreeMap<>();
            for (int x : parts) if (next.containsKey(x)) out.put(x, next.get(x));
            return out;
        }

        void commitEvent(String via, Map<Integer, Long> offsets, String error) {
            event("commit", "\"via\":" + js(via) + ",\"offsets\":" + offsetsJson(offsets)
                    + ",\"error\":" + (error == null ? "null" : js(error))
                    + ",\"partition_errors\":{}");
        }

        Map<TopicPartition, OffsetAndMetadata> oam(Map<Integer, Long> offsets) {
            Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
            offsets.forEach((part, off) -> out.put(tp(part), new OffsetAndMetadata(off)));
            return out;
        }

        void commitSync(Map<Integer, Long> offsets, String via) {
            if (offsets.isEmpty()) return;
            try {
                c.commitSync(oam(offsets));
                commitEvent(via, offsets, null);
            } catch (RuntimeException e) {
                commitEvent(via, offsets, errorName(e));
                System.err.println("commit (" + via + ") failed: " + e);
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            owned = partitionsOf(c.assignment());
            ConsumerGroupMetadata md = c.groupMetadata();
            Set<Integer> got = partitionsOf(parts);
            event("assigned", "\"partitions\":" + ints(got) + ",\"owned\":" + ints(owned)
                    + ",\"generation\":" + md.generationId() + ",\"member_id\":"
                    + js(md.memberId()));
            Set<Integer> hit = new TreeSet<>(pause);
            hit.retainAll(got);
            if (pauseState.equals("pending") && !hit.isEmpty()) {
                pauseState = "paused";
                paused = new ArrayList<>(hit);
                c.pause(tps(paused));
                event("paused", "\"partitions\":" + ints(paused));
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            Set<Integer> gone = partitionsOf(parts);
            if (gone.isEmpty()) return;
            if (commit.equals("sync") || commit.equals("async")) commitSync(toCommit(gone), "revoke");
            revoked("revoked", gone);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            Set<Integer> gone = partitionsOf(parts);
            if (!gone.isEmpty()) revoked("lost", gone);
        }

        void revoked(String kind, Set<Integer> gone) {
            owned = partitionsOf(c.assignment());
            owned.removeAll(gone);
            for (int x : gone) next.remove(x);
            event(kind, "\"partitions\":" + ints(gone) + ",\"owned\":" + ints(owned));
        }

        int run() throws Exception {
            if (Boolean.parseBoolean(o.getOrDefault("stop-on-eof", "false"))) {
                Thread t = new Thread(() -> {
                    try {
                        java.io.BufferedReader in = new java.io.BufferedReader(
                                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
                        for (String line; (line = in.readLine()) != null; ) {
                            if (line.trim().equals("stop")) break;
                            if (line.trim().equals("resume")) resumeAsked.set(true);
                        }
                    } catch (java.io.IOException e) { /* closed */ }
                    stop.set(true);
                }, "stdin-eof");
                t.setDaemon(true);
                t.start();
            }
            c.subscribe(List.of(topic), this);
            while (!done()) {
                if (pauseState.equals("paused") && resumeAsked.get()) {
                    pauseState = "done";
                    c.resume(tps(paused));
                    event("resumed", "\"partitions\":" + ints(paused));
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                boolean any = false;
                for (TopicPartition part : recs.partitions()) {
                    for (ConsumerRecord<byte[], byte[]> r : recs.records(part)) {
                        if (done()) { // unprocessed: auto-commit and the new owner start here
                            c.seek(part, r.offset());
                            break;
                        }
                        long[] seek = seeks.get(part.partition());
                        if (seek != null && (seek[1] < 0 || seek[1] == r.offset())) {
                            seeks.remove(part.partition());
                            event("seek", "\"partition\":" + part.partition() + ",\"offset\":"
                                    + seek[0] + ",\"at\":" + r.offset());
                            if (seek[0] != r.offset()) {
                                c.seek(part, seek[0]);
                                break; // the rest of this batch is from before the seek
                            }
                        }
                        double work = processMs + (records + 1 == stallAt ? stallMs : 0);
                        if (work > 0) Thread.sleep((long) work);
                        records++;
                        any = true;
                        next.put(part.partition(), r.offset() + 1);
                        event("record", "\"partition\":" + part.partition() + ",\"offset\":"
                                + r.offset() + ",\"key\":" + bin(r.key()));
                        if (commit.equals("offsets") && records % commitEvery == 0)
                            commitSync(Map.of(part.partition(), r.offset() + 1), "offsets");
                    }
                }
                if (any && commit.equals("sync")) {
                    commitSync(toCommit(owned), "sync");
                } else if (any && commit.equals("async")) {
                    c.commitAsync(oam(toCommit(owned)), (offsets, err) -> {
                        Map<Integer, Long> got = new TreeMap<>();
                        offsets.forEach((k, v) -> got.put(k.partition(), v.offset()));
                        commitEvent("callback", got, err == null ? null : errorName(err));
                    });
                }
            }
            if (commit.equals("sync") || commit.equals("async")) commitSync(toCommit(owned), "close");
            c.close(); // dynamic members leave the group; auto-commit commits positions first
            event("closed", "\"records\":" + records);
            return 0;
        }
    }

    // ---- share groups (KIP-932) ------------------------------------------------------------
    // share-consume runs one member of a share group (KafkaShareConsumer, explicit
    // acknowledgement) and prints each record with its delivery count, and which
    // acknowledgements the broker confirmed. Contract: ../README.md ("Share groups").
    // kafka-clients 3.9 has only KIP-932's early-access share consumer (its first protocol,
    // no delivery counts): the 3.9.1 build compiles the same code and exits 3.

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

    static Admin admin(String bootstrap, long timeoutMs) {
        Properties p = clientProperties(bootstrap);
        p.put("default.api.timeout.ms", (int) timeoutMs);
        p.put("request.timeout.ms", (int) Math.min(30_000, timeoutMs));
        return Admin.create(p);
    }

    @SuppressWarnings("deprecation") // state(): groupState() exists only from 4.0
    static int describeGroup(String bootstrap, String group, long timeoutMs) throws Exception {
        try (Admin admin = admin(bootstrap, timeoutMs)) {
            ConsumerGroupDescription d;
            try {
                d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                        .get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                printLine("{\"group\":" + js(group) + ",\"error\":" + js(errorName(e)) + "}");
                return 0;
            }
            StringBuilder members = new StringBuilder("[");
            for (MemberDescription m : d.members()) {
                if (members.length() > 1) members.append(',');
                List<TopicPartition> tps = new ArrayList<>(m.assignment().topicPartitions());
                tps.sort((a, b) -> a.topic().equals(b.topic())
                        ? Integer.compare(a.partition(), b.partition())
                        : a.topic().compareTo(b.topic()));
                StringBuilder parts = new StringBuilder("[");
                for (TopicPartition x : tps) {
                    if (parts.length() > 1) parts.append(',');
                    parts.append('[').append(js(x.topic())).append(',').append(x.partition())
                            .append(']');
                }
                members.append("{\"member_id\":").append(js(m.consumerId()))
                        .append(",\"instance_id\":")
                        .append(m.groupInstanceId().map(RafkaDriver::js).orElse("null"))
                        .append(",\"client_id\":").append(js(m.clientId()))
                        .append(",\"host\":").append(js(m.host()))
                        .append(",\"partitions\":").append(parts).append("]}");
            }
            members.append(']');
            printLine("{\"group\":" + js(d.groupId()) + ",\"error\":null,\"state\":"
                    + js(d.state().toString()) + ",\"type\":" + js(d.type().name())
                    + ",\"protocol\":" + js(d.partitionAssignor()) + ",\"coordinator\":"
                    + (d.coordinator() == null ? "null" : d.coordinator().id())
                    + ",\"members\":" + members + "}");
        }
        return 0;
    }

    static int committed(String bootstrap, String topic, String group, long timeoutMs)
            throws Exception {
        long deadline = nowMs() + timeoutMs;
        List<TopicPartition> tps;
        try (KafkaConsumer<byte[], byte[]> c = newConsumer(bootstrap, timeoutMs)) {
            tps = partitions(c, topic, deadline);
        }
        try (Admin admin = admin(bootstrap, timeoutMs)) {
            Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(timeoutMs, TimeUnit.MILLISECONDS);
            Map<Integer, Long> out = new TreeMap<>();
            for (TopicPartition x : tps) {
                OffsetAndMetadata om = got.get(x);
                out.put(x.partition(), om == null ? -1L : om.offset());
            }
            printLine(offsetsJson(out));
        }
        return 0;
    }

    /** commit: the Admin's alterConsumerGroupOffsets (generation -1, no member id). */
    static int commit(String bootstrap, String topic, Map<String, String> o, long timeoutMs)
            throws Exception {
        if (o.containsKey("member-id") || o.containsKey("generation")) {
            System.err.println("java: no public API commits with a chosen member id/generation");
            return EXIT_UNSUPPORTED;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        parsePairs(required(o, "offsets")).forEach(
                (part, off) -> offsets.put(new TopicPartition(topic, part), new OffsetAndMetadata(off)));
        String error = null;
        StringBuilder parts = new StringBuilder("{");
        try (Admin admin = admin(bootstrap, timeoutMs)) {
            var res = admin.alterConsumerGroupOffsets(required(o, "group"), offsets);
            List<TopicPartition> sorted = new ArrayList<>(offsets.keySet());
            sorted.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            for (TopicPartition x : sorted) {
                String e = null;
                try {
                    res.partitionResult(x).get(timeoutMs, TimeUnit.MILLISECONDS);
                } catch (ExecutionException ex) {
                    e = errorName(ex);
                    if (error == null) error = e;
                }
                if (parts.length() > 1) parts.append(',');
                parts.append('"').append(x.partition()).append("\":")
                        .append(e == null ? "null" : js(e));
            }
        }
        printLine("{\"error\":" + (error == null ? "null" : js(error)) + ",\"partitions\":"
                + parts.append('}') + "}");
        return 0;
    }

    // ---- transactions ---------------------------------------------------------------
    // txn-produce, txn-copy and txn-fence: contract in ../README.md ("Transactions").

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
        try (KafkaProducer<byte[], byte[]> p =
                     txnProducer(bootstrap, required(o, "transactional-id"), timeoutMs)) {
            p.initTransactions();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int k = 0; k < batches; k++) {
                int first = (int) ((long) k * count / batches);
                int end = (int) ((long) (k + 1) * count / batches);
                p.beginTransaction();
                for (int i = first; i < end; i++) sent.add(p.send(reference(topic, i, startTs)));
                flushAll(p, sent);
                hold.await(k);
                String how = ends[k % ends.length];
                if (how.equals("commit")) p.commitTransaction();
                else p.abortTransaction();
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

    // ---- admin ------------------------------------------------------------------------
    // `admin <action>`: one Admin call per run, its outcome as client-neutral JSON (README.md,
    // "Admin"). Per-resource broker errors are printed (Kafka's names) with exit 0; a failure of
    // the whole call ends with the contract's error line and exit 1.

    static final List<String> ADMIN_LISTS = List.of("set", "delete", "append", "subtract");

    static int admin(String[] argv) throws Exception {
        if (argv.length < 2) usage("admin: missing action");
        String action = argv[1];
        Map<String, String> o = new HashMap<>();
        Map<String, List<String>> many = new HashMap<>();
        for (int i = 2; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) usage("bad option " + argv[i]);
            String name = argv[i].substring(2);
            if (ADMIN_LISTS.contains(name))
                many.computeIfAbsent(name, k -> new ArrayList<>()).add(argv[i + 1]);
            else o.put(name, argv[i + 1]);
        }
        long timeoutMs = (long) (Double.parseDouble(o.getOrDefault("timeout", "60")) * 1000);
        Properties p = clientProperties(required(o, "bootstrap"));
        p.put("default.api.timeout.ms", (int) timeoutMs);
        p.put("request.timeout.ms", (int) Math.min(30_000, timeoutMs));
        try (Admin admin = Admin.create(p)) {
            switch (action) {
                case "describe-cluster": return describeCluster(admin);
                case "describe-topics": return describeTopics(admin, o);
                case "list-offsets": return listOffsets(admin, required(o, "topic"));
                case "create-partitions": return createPartitions(admin, o);
                case "delete-records": return deleteRecords(admin, o);
                case "describe-configs": return describeConfigs(admin, o);
                case "alter-configs": return alterConfigs(admin, o, many);
                case "elect-leaders": return electLeaders(admin, o);
                case "reassign": return reassign(admin, o);
                case "list-reassignments": return listReassignments(admin, o);
                case "describe-log-dirs": return describeLogDirs(admin, o);
                case "alter-log-dir": return alterLogDir(admin, o);
                case "describe-features": return describeFeatures(admin);
                case "update-features": return updateFeatures(admin, o);
                case "describe-client-quotas": return describeClientQuotas(admin, o);
                case "alter-client-quotas": return alterClientQuotas(admin, o, many);
                default:
                    usage("unknown admin action " + action);
                    return EXIT_USAGE;
            }
        }
    }

    /** A JSON value from maps, lists, strings, numbers, booleans and nulls. */
    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof String) return js((String) v);
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        StringBuilder sb = new StringBuilder();
        if (v instanceof Map) {
            sb.append('{');
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (sb.length() > 1) sb.append(',');
                sb.append(js(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        sb.append('[');
        for (Object x : (Collection<?>) v) {
            if (sb.length() > 1) sb.append(',');
            sb.append(json(x));
        }
        return sb.append(']').toString();
    }

    /** An ordered JSON object: obj("a", 1, "b", "x"). */
    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    /** The outcome of a future: null when it succeeded, else Kafka's error name. */
    static String outcome(org.apache.kafka.common.KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
            return null;
        } catch (ExecutionException e) {
            System.err.println("admin: " + e.getCause());
            return errorName(e.getCause());
        }
    }

    static List<Integer> intList(String spec) {
        List<Integer> out = new ArrayList<>();
        for (String x : spec.split(",")) if (!x.isBlank()) out.add(Integer.parseInt(x.trim()));
        return out;
    }

    static int describeCluster(Admin admin) throws Exception {
        org.apache.kafka.clients.admin.DescribeClusterResult r = admin.describeCluster();
        List<Object> brokers = new ArrayList<>();
        List<org.apache.kafka.common.Node> nodes = new ArrayList<>(r.nodes().get());
        nodes.sort((a, b) -> Integer.compare(a.id(), b.id()));
        for (org.apache.kafka.common.Node n : nodes)
            brokers.add(obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
        org.apache.kafka.common.Node controller = r.controller().get();
        printLine(json(obj("cluster_id", r.clusterId().get(), "controller",
                controller == null || controller.isEmpty() ? null : controller.id(),
                "brokers", brokers)));
        return 0;
    }

    static Map<String, Object> partitionJson(org.apache.kafka.common.TopicPartitionInfo pi) {
        List<Integer> replicas = new ArrayList<>(), isr = new ArrayList<>();
        for (org.apache.kafka.common.Node n : pi.replicas()) replicas.add(n.id());
        for (org.apache.kafka.common.Node n : pi.isr()) isr.add(n.id());
        return obj("partition", pi.partition(), "leader",
                pi.leader() == null || pi.leader().isEmpty() ? null : pi.leader().id(),
                "replicas", replicas, "isr", isr);
    }

    /** describeTopics: DescribeTopicPartitions where the broker has it (with --page-size: that
     *  many partitions per response, so the client follows the cursor), else Metadata. */
    static int describeTopics(Admin admin, Map<String, String> o) throws Exception {
        org.apache.kafka.clients.admin.DescribeTopicsOptions opts =
                new org.apache.kafka.clients.admin.DescribeTopicsOptions();
        if (o.containsKey("page-size"))
            opts.partitionSizeLimitPerResponse(Integer.parseInt(o.get("page-size")));
        List<String> topics = List.of(required(o, "topic").split(","));
        Map<String, org.apache.kafka.common.KafkaFuture<org.apache.kafka.clients.admin.TopicDescription>>
                futures = admin.describeTopics(topics, opts).topicNameValues();
        for (String t : topics) {
            try {
                org.apache.kafka.clients.admin.TopicDescription d = futures.get(t).get();
                List<Object> parts = new ArrayList<>();
                for (org.apache.kafka.common.TopicPartitionInfo pi : d.partitions())
                    parts.add(partitionJson(pi));
                printLine(json(obj("topic", t, "error", null, "topic_id",
                        d.topicId() == null ? null : d.topicId().toString(),
                        "internal", d.isInternal(), "partitions", parts)));
            } catch (ExecutionException e) {
                printLine(json(obj("topic", t, "error", errorName(e.getCause()))));
            }
        }
        return 0;
    }

    static List<TopicPartition> topicPartitions(Admin admin, String topic) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (org.apache.kafka.common.TopicPartitionInfo pi : admin.describeTopics(List.of(topic))
                .allTopicNames().get().get(topic).partitions())
            tps.add(new TopicPartition(topic, pi.partition()));
        return tps;
    }

    static int listOffsets(Admin admin, String topic) throws Exception {
        Map<String, Object> parts = new TreeMap<>();
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> earliest = new HashMap<>(),
                latest = new HashMap<>();
        for (TopicPartition tp : topicPartitions(admin, topic)) {
            earliest.put(tp, org.apache.kafka.clients.admin.OffsetSpec.earliest());
            latest.put(tp, org.apache.kafka.clients.admin.OffsetSpec.latest());
        }
        var e = admin.listOffsets(earliest).all().get();
        var l = admin.listOffsets(latest).all().get();
        for (TopicPartition tp : earliest.keySet())
            parts.put(String.valueOf(tp.partition()),
                    obj("earliest", e.get(tp).offset(), "latest", l.get(tp).offset()));
        printLine(json(obj("topic", topic, "partitions", parts)));
        return 0;
    }

    /** "1,2;2,3": the replicas of each new partition. */
    static List<List<Integer>> assignments(String spec) {
        List<List<Integer>> out = new ArrayList<>();
        for (String part : spec.split(";")) out.add(intList(part));
        return out;
    }

    static boolean flag(Map<String, String> o, String name) {
        return Boolean.parseBoolean(o.getOrDefault(name, "false"));
    }

    static int createPartitions(Admin admin, Map<String, String> o) throws Exception {
        String topic = required(o, "topic");
        int count = Integer.parseInt(required(o, "count"));
        org.apache.kafka.clients.admin.NewPartitions np = o.containsKey("assignments")
                ? org.apache.kafka.clients.admin.NewPartitions.increaseTo(count,
                        assignments(o.get("assignments")))
                : org.apache.kafka.clients.admin.NewPartitions.increaseTo(count);
        var opts = new org.apache.kafka.clients.admin.CreatePartitionsOptions()
                .validateOnly(flag(o, "validate-only"));
        var r = admin.createPartitions(Map.of(topic, np), opts).values().get(topic);
        printLine(json(obj("topic", topic, "error", outcome(r))));
        return 0;
    }

    static int deleteRecords(Admin admin, Map<String, String> o) throws Exception {
        String topic = required(o, "topic");
        Map<TopicPartition, org.apache.kafka.clients.admin.RecordsToDelete> req = new TreeMap<>(
                (a, b) -> Integer.compare(a.partition(), b.partition()));
        parsePairs(required(o, "offsets")).forEach((part, off) -> req.put(
                new TopicPartition(topic, part),
                org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(off)));
        var res = admin.deleteRecords(req).lowWatermarks();
        for (TopicPartition tp : req.keySet()) {
            Long low = null;
            String err = null;
            try {
                low = res.get(tp).get().lowWatermark();
            } catch (ExecutionException e) {
                System.err.println("admin: " + e.getCause());
                err = errorName(e.getCause());
            }
            printLine(json(obj("topic", topic, "partition", tp.partition(), "error", err,
                    "low_watermark", low)));
        }
        return 0;
    }

    static final Map<String, org.apache.kafka.common.config.ConfigResource.Type> RESOURCE_TYPES =
            Map.of("topic", org.apache.kafka.common.config.ConfigResource.Type.TOPIC,
                    "broker", org.apache.kafka.common.config.ConfigResource.Type.BROKER,
                    "broker-logger", org.apache.kafka.common.config.ConfigResource.Type.BROKER_LOGGER);

    /** --topic T | --broker ID ("" = the cluster-wide default) | --broker-logger ID | --group G
     *  (GROUP, by name: kafka-clients 3.x has no such type and exits 3). */
    static org.apache.kafka.common.config.ConfigResource resource(Map<String, String> o) {
        if (o.containsKey("client-metrics")) { // KIP-714 subscription (kafka-clients 3.7+)
            try {
                return new org.apache.kafka.common.config.ConfigResource(
                        org.apache.kafka.common.config.ConfigResource.Type.valueOf("CLIENT_METRICS"),
                        o.get("client-metrics"));
            } catch (IllegalArgumentException e) {
                System.err.println("admin: this kafka-clients has no CLIENT_METRICS config resource");
                System.exit(EXIT_UNSUPPORTED);
            }
        }
        if (o.containsKey("group")) {
            try {
                return new org.apache.kafka.common.config.ConfigResource(
                        org.apache.kafka.common.config.ConfigResource.Type.valueOf("GROUP"),
                        o.get("group"));
            } catch (IllegalArgumentException e) {
                System.err.println("admin: this kafka-clients has no GROUP config resource");
                System.exit(EXIT_UNSUPPORTED);
            }
        }
        for (String kind : List.of("topic", "broker", "broker-logger"))
            if (o.containsKey(kind))
                return new org.apache.kafka.common.config.ConfigResource(RESOURCE_TYPES.get(kind),
                        o.get(kind));
        usage("admin: needs --topic, --broker, --broker-logger, --group or --client-metrics");
        return null;
    }

    static String resourceKind(org.apache.kafka.common.config.ConfigResource r) {
        return r.type().name().toLowerCase().replace('_', '-');
    }

    static int describeConfigs(Admin admin, Map<String, String> o) throws Exception {
        var res = resource(o);
        var opts = new org.apache.kafka.clients.admin.DescribeConfigsOptions()
                .includeSynonyms(true).includeDocumentation(true);
        try {
            org.apache.kafka.clients.admin.Config config =
                    admin.describeConfigs(List.of(res), opts).values().get(res).get();
            Map<String, Object> configs = new TreeMap<>();
            for (org.apache.kafka.clients.admin.ConfigEntry e : config.entries()) {
                List<Object> synonyms = new ArrayList<>();
                for (var s : e.synonyms())
                    synonyms.add(List.of(s.name(), String.valueOf(s.value()), s.source().name()));
                configs.put(e.name(), obj("value", e.value(), "source", e.source().name(),
                        "read_only", e.isReadOnly(), "sensitive", e.isSensitive(),
                        "synonyms", synonyms, "type", e.type().name(),
                        "documentation", e.documentation()));
            }
            printLine(json(obj("resource", resourceKind(res), "name", res.name(), "error", null,
                    "configs", configs)));
        } catch (ExecutionException e) {
            printLine(json(obj("resource", resourceKind(res), "name", res.name(), "error",
                    errorName(e.getCause()))));
        }
        return 0;
    }

    /** k=v -> {k, v}; a value may hold '='. */
    static String[] keyValue(String spec) {
        int eq = spec.indexOf('=');
        if (eq < 0) usage("admin: expected k=v, got " + spec);
        return new String[] {spec.substring(0, eq), spec.substring(eq + 1)};
    }

    /** IncrementalAlterConfigs (SET/DELETE/APPEND/SUBTRACT), or with --legacy true the old
     *  AlterConfigs, whose --set entries replace every dynamic config of the resource (only
     *  kafka-clients 3.x has it: 4.0 removed Admin.alterConfigs). */
    static int alterConfigs(Admin admin, Map<String, String> o, Map<String, List<String>> many)
            throws Exception {
        var res = resource(o);
        boolean validateOnly = flag(o, "validate-only");
        org.apache.kafka.common.KafkaFuture<Void> f;
        if (flag(o, "legacy")) {
            if (many.containsKey("delete") || many.containsKey("append")
                    || many.containsKey("subtract"))
                usage("admin alter-configs --legacy true takes --set only");
            List<org.apache.kafka.clients.admin.ConfigEntry> entries = new ArrayList<>();
            for (String kv : many.getOrDefault("set", List.of())) {
                String[] x = keyValue(kv);
                entries.add(new org.apache.kafka.clients.admin.ConfigEntry(x[0], x[1]));
            }
            java.lang.reflect.Method m;
            try {
                m = Admin.class.getMethod("alterConfigs", Map.class,
                        org.apache.kafka.clients.admin.AlterConfigsOptions.class);
            } catch (NoSuchMethodException e) {
                System.err.println("admin: this kafka-clients has no legacy alterConfigs");
                return EXIT_UNSUPPORTED;
            }
            var result = (org.apache.kafka.clients.admin.AlterConfigsResult) m.invoke(admin,
                    Map.of(res, new org.apache.kafka.clients.admin.Config(entries)),
                    new org.apache.kafka.clients.admin.AlterConfigsOptions()
                            .validateOnly(validateOnly));
            f = result.values().get(res);
        } else {
            List<org.apache.kafka.clients.admin.AlterConfigOp> ops = new ArrayList<>();
            Map<String, org.apache.kafka.clients.admin.AlterConfigOp.OpType> types = Map.of(
                    "set", org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET,
                    "append", org.apache.kafka.clients.admin.AlterConfigOp.OpType.APPEND,
                    "subtract", org.apache.kafka.clients.admin.AlterConfigOp.OpType.SUBTRACT);
            for (String kind : List.of("set", "append", "subtract"))
                for (String kv : many.getOrDefault(kind, List.of())) {
                    String[] x = keyValue(kv);
                    ops.add(new org.apache.kafka.clients.admin.AlterConfigOp(
                            new org.apache.kafka.clients.admin.ConfigEntry(x[0], x[1]),
                            types.get(kind)));
                }
            for (String k : many.getOrDefault("delete", List.of()))
                ops.add(new org.apache.kafka.clients.admin.AlterConfigOp(
                        new org.apache.kafka.clients.admin.ConfigEntry(k, null),
                        org.apache.kafka.clients.admin.AlterConfigOp.OpType.DELETE));
            f = admin.incrementalAlterConfigs(Map.of(res, ops),
                    new org.apache.kafka.clients.admin.AlterConfigsOptions()
                            .validateOnly(validateOnly)).values().get(res);
        }
        printLine(json(obj("resource", resourceKind(res), "name", res.name(), "error",
                outcome(f))));
        return 0;
    }

    /** --topic T --partitions P,..: those partitions; without: every partition (the broker
     *  answers only for the partitions whose leader it changed or could not change). */
    static Set<TopicPartition> partitionSet(Map<String, String> o) {
        if (!o.containsKey("topic")) return null;
        Set<TopicPartition> out = new java.util.LinkedHashSet<>();
        for (int part : intList(required(o, "partitions")))
            out.add(new TopicPartition(o.get("topic"), part));
        return out;
    }

    static List<Object> partitionErrors(Map<TopicPartition, Optional<Throwable>> res) {
        List<Object> out = new ArrayList<>();
        List<TopicPartition> tps = new ArrayList<>(res.keySet());
        tps.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(),
                b.partition()) : a.topic().compareTo(b.topic()));
        for (TopicPartition tp : tps)
            out.add(obj("topic", tp.topic(), "partition", tp.partition(), "error",
                    res.get(tp).map(RafkaDriver::errorName).orElse(null)));
        return out;
    }

    static int electLeaders(Admin admin, Map<String, String> o) throws Exception {
        String kind = o.getOrDefault("election", "preferred");
        if (!List.of("preferred", "unclean").contains(kind)) usage("bad --election " + kind);
        var type = kind.equals("preferred") ? org.apache.kafka.common.ElectionType.PREFERRED
                : org.apache.kafka.common.ElectionType.UNCLEAN;
        try {
            var res = admin.electLeaders(type, partitionSet(o)).partitions().get();
            printLine(json(obj("error", null, "partitions", partitionErrors(res))));
        } catch (ExecutionException e) {
            printLine(json(obj("error", errorName(e.getCause()), "partitions", List.of())));
        }
        return 0;
    }

    /** --replicas 1,2,3, or --cancel true. */
    static int reassign(Admin admin, Map<String, String> o) throws Exception {
        TopicPartition tp = new TopicPartition(required(o, "topic"),
                Integer.parseInt(required(o, "partition")));
        Optional<org.apache.kafka.clients.admin.NewPartitionReassignment> target =
                flag(o, "cancel") ? Optional.empty()
                        : Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(
                                intList(required(o, "replicas"))));
        var f = admin.alterPartitionReassignments(Map.of(tp, target)).values().get(tp);
        printLine(json(obj("topic", tp.topic(), "partition", tp.partition(), "error",
                outcome(f))));
        return 0;
    }

    static int listReassignments(Admin admin, Map<String, String> o) throws Exception {
        Set<TopicPartition> which = partitionSet(o);
        var r = which == null ? admin.listPartitionReassignments()
                : admin.listPartitionReassignments(which);
        try {
            var res = r.reassignments().get();
            List<TopicPartition> tps = new ArrayList<>(res.keySet());
            tps.sort((a, b) -> (a.topic() + "\0" + a.partition()).compareTo(
                    b.topic() + "\0" + b.partition()));
            List<Object> out = new ArrayList<>();
            for (TopicPartition tp : tps) {
                var x = res.get(tp);
                out.add(obj("topic", tp.topic(), "partition", tp.partition(), "replicas",
                        x.replicas(), "adding", x.addingReplicas(), "removing",
                        x.removingReplicas()));
            }
            printLine(json(obj("error", null, "reassignments", out)));
        } catch (ExecutionException e) {
            printLine(json(obj("error", errorName(e.getCause()), "reassignments", List.of())));
        }
        return 0;
    }

    static int describeLogDirs(Admin admin, Map<String, String> o) throws Exception {
        List<Integer> ids = new ArrayList<>();
        if (o.containsKey("brokers")) ids = intList(o.get("brokers"));
        else for (org.apache.kafka.common.Node n : admin.describeCluster().nodes().get())
            ids.add(n.id());
        Map<String, Object> brokers = new TreeMap<>();
        var all = admin.describeLogDirs(ids).descriptions();
        for (int id : ids) {
            try {
                List<Object> dirs = new ArrayList<>();
                for (var d : new TreeMap<>(all.get(id).get()).entrySet()) {
                    var desc = d.getValue();
                    List<Object> replicas = new ArrayList<>();
                    for (var ri : desc.replicaInfos().entrySet())
                        replicas.add(obj("topic", ri.getKey().topic(), "partition",
                                ri.getKey().partition(), "size", ri.getValue().size(),
                                "offset_lag", ri.getValue().offsetLag(), "future",
                                ri.getValue().isFuture()));
                    dirs.add(obj("path", d.getKey(), "error",
                            desc.error() == null ? null : errorName(desc.error()),
                            "total_bytes", desc.totalBytes().isPresent()
                                    ? desc.totalBytes().getAsLong() : null,
                            "usable_bytes", desc.usableBytes().isPresent()
                                    ? desc.usableBytes().getAsLong() : null,
                            "replicas", replicas));
                }
                brokers.put(String.valueOf(id), dirs);
            } catch (ExecutionException e) {
                brokers.put(String.valueOf(id), obj("error", errorName(e.getCause())));
            }
        }
        printLine(json(obj("error", null, "brokers", brokers)));
        return 0;
    }

    static int alterLogDir(Admin admin, Map<String, String> o) throws Exception {
        var replica = new org.apache.kafka.common.TopicPartitionReplica(required(o, "topic"),
                Integer.parseInt(required(o, "partition")),
                Integer.parseInt(required(o, "broker")));
        var f = admin.alterReplicaLogDirs(Map.of(replica, required(o, "dir"))).values()
                .get(replica);
        printLine(json(obj("topic", replica.topic(), "partition", replica.partition(), "broker",
                replica.brokerId(), "error", outcome(f))));
        return 0;
    }

    static int describeFeatures(Admin admin) throws Exception {
        var md = admin.describeFeatures().featureMetadata().get();
        Map<String, Object> finalized = new TreeMap<>(), supported = new TreeMap<>();
        md.finalizedFeatures().forEach((k, v) -> finalized.put(k,
                obj("min", v.minVersionLevel(), "max", v.maxVersionLevel())));
        md.supportedFeatures().forEach((k, v) -> supported.put(k,
                obj("min", v.minVersion(), "max", v.maxVersion())));
        printLine(json(obj("error", null, "epoch", md.finalizedFeaturesEpoch().orElse(null),
                "finalized", finalized, "supported", supported)));
        return 0;
    }

    /** --feature name=level[,name=level] [--upgrade-type upgrade|safe-downgrade|unsafe-downgrade]. */
    static int updateFeatures(Admin admin, Map<String, String> o) throws Exception {
        var kinds = Map.of(
                "upgrade", org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.UPGRADE,
                "safe-downgrade",
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.SAFE_DOWNGRADE,
                "unsafe-downgrade",
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.UNSAFE_DOWNGRADE);
        var kind = kinds.get(o.getOrDefault("upgrade-type", "upgrade"));
        if (kind == null) usage("bad --upgrade-type");
        Map<String, org.apache.kafka.clients.admin.FeatureUpdate> updates = new TreeMap<>();
        for (String kv : required(o, "feature").split(",")) {
            String[] x = keyValue(kv);
            updates.put(x[0], new org.apache.kafka.clients.admin.FeatureUpdate(
                    Short.parseShort(x[1]), kind));
        }
        var res = admin.updateFeatures(updates,
                new org.apache.kafka.clients.admin.UpdateFeaturesOptions()
                        .validateOnly(flag(o, "validate-only"))).values();
        Map<String, Object> out = new TreeMap<>();
        for (String name : updates.keySet()) out.put(name, outcome(res.get(name)));
        printLine(json(obj("error", null, "features", out)));
        return 0;
    }

    /** The quota entity of --user / --client-id / --ip ("<default>": the default entity). */
    static Map<String, String> quotaEntity(Map<String, String> o) {
        Map<String, String> entity = new TreeMap<>();
        for (String type : List.of("user", "client-id", "ip")) {
            String name = o.get(type);
            if (name != null) entity.put(type, name.equals("<default>") ? null : name);
        }
        return entity;
    }

    /** Admin.describeClientQuotas of the entity named (none: every entity), --strict true. */
    static int describeClientQuotas(Admin admin, Map<String, String> o) throws Exception {
        var components = new ArrayList<org.apache.kafka.common.quota.ClientQuotaFilterComponent>();
        quotaEntity(o).forEach((type, name) -> components.add(name == null
                ? org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofDefaultEntity(type)
                : org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(type, name)));
        var filter = flag(o, "strict")
                ? org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(components)
                : org.apache.kafka.common.quota.ClientQuotaFilter.contains(components);
        var entities = admin.describeClientQuotas(filter).entities().get();
        List<Object> entries = new ArrayList<>();
        entities.forEach((entity, values) -> entries.add(obj(
                "entity", new TreeMap<>(entity.entries()), "values", new TreeMap<>(values))));
        printLine(json(obj("error", null, "entries", entries)));
        return 0;
    }

    /** Admin.alterClientQuotas of one entity: --set k=v and --delete k (repeatable). */
    static int alterClientQuotas(Admin admin, Map<String, String> o, Map<String, List<String>> many)
            throws Exception {
        var ops = new ArrayList<org.apache.kafka.common.quota.ClientQuotaAlteration.Op>();
        for (String kv : many.getOrDefault("set", List.of())) {
            String[] x = keyValue(kv);
            ops.add(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(
                    x[0], Double.parseDouble(x[1])));
        }
        for (String key : many.getOrDefault("delete", List.of()))
            ops.add(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(key, null));
        var entity = new org.apache.kafka.common.quota.ClientQuotaEntity(quotaEntity(o));
        var res = admin.alterClientQuotas(
                List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, ops)),
                new org.apache.kafka.clients.admin.AlterClientQuotasOptions()
                        .validateOnly(flag(o, "validate-only"))).values();
        printLine(json(obj("error", outcome(res.get(entity)))));
        return 0;
    }

    // ---- helpers --------------------------------------------------------------------

    /** The contract's error line: Kafka's error name (or the class) and the message. */
    static void errorLine(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && !(root instanceof ApiException)) root = root.getCause();
        printLine("{\"error\":" + js(errorName(root)) + ",\"message\":"
                + js(String.valueOf(root.getMessage())) + "}");
    }

    /** bootstrap.servers plus the security settings of $RAFKA_CLIENT_SECURITY. */
    static Properties clientProperties(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        String raw = System.getenv("RAFKA_CLIENT_SECURITY");
        if (raw == null || raw.isBlank()) return p;
        Map<String, String> sec = flatJson(raw);
        String protocol = sec.getOrDefault("protocol", "PLAINTEXT");
        p.put("security.protocol", protocol);
        try {
            if (sec.containsKey("ca")) {
                p.put("ssl.truststore.type", "PEM");
                p.put("ssl.truststore.location", sec.get("ca"));
            }
            if (sec.containsKey("cert")) { // PEM keystore: chain and unencrypted PKCS#8 key
                p.put("ssl.keystore.type", "PEM");
                p.put("ssl.keystore.certificate.chain", Files.readString(Path.of(sec.get("cert"))));
                p.put("ssl.keystore.key", Files.readString(Path.of(sec.get("key"))));
            }
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("RAFKA_CLIENT_SECURITY: " + e, e);
        }
        String mechanism = sec.get("mechanism");
        if (mechanism == null) return p;
        p.put("sasl.mechanism", mechanism);
        switch (mechanism) {
            case "PLAIN":
                p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule"
                        + " required username=" + jaas(sec.get("username")) + " password="
                        + jaas(sec.get("password")) + ";");
                break;
            case "OAUTHBEARER": // the JWT as given, through StaticToken below
                p.put("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer."
                        + "OAuthBearerLoginModule required token=" + jaas(sec.get("token")) + ";");
                p.put("sasl.login.callback.handler.class", StaticToken.class.getName());
                break;
            default: // SCRAM-SHA-256/512; tokenauth: a delegation token (id, HMAC)
                p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule"
                        + " required username=" + jaas(sec.get("username")) + " password="
                        + jaas(sec.get("password"))
                        + ("true".equals(sec.get("tokenauth")) ? " tokenauth=\"true\"" : "") + ";");
        }
        return p;
    }

    static String jaas(String v) {
        return "\"" + v.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** A flat JSON object of strings, booleans and numbers (values as strings). */
    static Map<String, String> flatJson(String text) {
        Map<String, String> out = new HashMap<>();
        Matcher m = Pattern.compile("\"([^\"]+)\"\\s*:\\s*(\"((?:[^\"\\\\]|\\\\.)*)\"|[^,}\\s]+)")
                .matcher(text);
        while (m.find()) {
            String v = m.group(3) != null ? unescape(m.group(3)) : m.group(2);
            if (!v.equals("null")) out.put(m.group(1), v);
        }
        return out;
    }

    static String unescape(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\' || i + 1 == s.length()) {
                sb.append(c);
                continue;
            }
            char n = s.charAt(++i);
            if (n == 'u') {
                sb.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                i += 4;
            } else sb.append(n == 'n' ? '\n' : n == 't' ? '\t' : n);
        }
        return sb.toString();
    }

    /**
     * OAUTHBEARER login callback handler giving the client the JWT of the JAAS option "token"
     * as is. Its lifetime is said to be an hour whatever its exp claim says, so the client sends
     * even an expired token and the broker judges it.
     */
    public static final class StaticToken implements AuthenticateCallbackHandler {
        private String token;

        @Override
        public void configure(Map<String, ?> configs, String mechanism,
                               List<AppConfigurationEntry> entries) {
            token = (String) entries.get(0).getOptions().get("token");
        }

        @Override
        public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
            for (Callback cb : callbacks) {
                if (!(cb instanceof OAuthBearerTokenCallback)) throw new UnsupportedCallbackException(cb);
                long now = System.currentTimeMillis();
                String value = token;
                ((OAuthBearerTokenCallback) cb).token(new OAuthBearerToken() {
                    public String value() { return value; }
                    public Set<String> scope() { return Set.of(); }
                    public long lifetimeMs() { return now + 3_600_000L; }
                    public String principalName() { return "jwt"; }
                    public Long startTimeMs() { return now; }
                });
            }
        }

        @Override
        public void close() {}
    }

    static KafkaConsumer<byte[], byte[]> newConsumer(String bootstrap, long timeoutMs) {
        return newConsumer(bootstrap, timeoutMs, null);
    }

    /** A group-less consumer; isolation null: the client's default (read_uncommitted). */
    static KafkaConsumer<byte[], byte[]> newConsumer(String bootstrap, long timeoutMs,
                                                     String isolation) {
        Properties p = clientProperties(bootstrap);
        if (isolation != null) {
            if (!List.of("read_committed", "read_uncommitted").contains(isolation))
                usage("bad --isolation-level " + isolation);
            p.put("isolation.level", isolation);
        }
        p.put("enable.auto.commit", "false"); // no group.id: nothing to commit to
        p.put("allow.auto.create.topics", "false"); // reading must not create the topic
        p.put("auto.offset.reset", "earliest");
        p.put("default.api.timeout.ms", (int) timeoutMs);
        p.put("request.timeout.ms", (int) Math.min(30_000, timeoutMs)); // must be <= the above
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Partitions from metadata; polls until the topic is known or the deadline passes. */
    static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic, long deadline)
            throws InterruptedException {
        for (;; Thread.sleep(100)) { // an unknown topic gives an empty list at once: pace polls
            List<PartitionInfo> infos = c.partitionsFor(topic,
                    Duration.ofMillis(Math.max(1, deadline - System.currentTimeMillis())));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : infos) tps.add(new TopicPartition(topic, pi.partition()));
                return tps;
            }
            if (System.currentTimeMillis() >= deadline)
                throw new IllegalStateException("topic " + topic + " has no partitions in metadata");
        }
    }

    /** Reference record i (README "produce"); partition null: the murmur2 partitioner. */
    static ProducerRecord<byte[], byte[]> reference(String topic, int i, long startTs) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("h1", ("v-" + i).getBytes(StandardCharsets.UTF_8));
        headers.add("h2", new byte[] {0x00, (byte) 0xff, (byte) (i % 256)});
        return new ProducerRecord<>(topic, null, startTs + i,
                ("key-" + i).getBytes(StandardCharsets.UTF_8), value(i), headers);
    }

    static byte[] value(int i) {
        StringBuilder sb = new StringBuilder("value-").append(i).append('-');
        for (int j = 0; j < (i * 37) % 200; j++) sb.append(FILLER.charAt((i + j) % FILLER.length()));
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static synchronized void printLine(String s) {
        System.out.println(s);
    }

    /** Binary field as a JSON string of latin-1 characters (one char per byte), or null. */
    static String bin(byte[] b) {
        return b == null ? "null" : js(new String(b, StandardCharsets.ISO_8859_1));
    }

    static String js(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
            else if (ch < 0x20 || ch > 0x7e) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
        }
        return sb.append('"').toString();
    }

    static Map<String, String> parseOptions(String[] argv) {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) usage("bad option " + argv[i]);
            o.put(argv[i].substring(2), argv[++i]);
        }
        return o;
    }

    static String required(Map<String, String> o, String name) {
        String v = o.get(name);
        if (v == null) usage("missing --" + name);
        return v;
    }

    static void usage(String why) {
        System.err.println("usage: java-driver.sh <4.3.0|3.9.1> <create-topic|produce|consume|"
                + "offsets-for-times|produce-stream|group-consume|describe-group|committed|commit|"
                + "txn-produce|txn-copy|txn-fence|share-consume|admin <action>>"
                + " --bootstrap B --topic T ...  (" + why + ")");
        System.exit(EXIT_USAGE);
    }
}
