// RafkaDriver (Java kafka-clients driver): consumer groups.
// group-consume runs one member of a consumer group (subscribe) and prints what happens to
// it as JSON events; describe-group, committed and commit look at / write a group's offsets
// from outside. Contract: ../README.md ("Consumer groups").

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class Groups extends RafkaDriver {
    private Groups() {}

    static int ms(Map<String, String> o, String name) {
        return (int) Math.round(Double.parseDouble(o.get(name)) * 1000);
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
}
