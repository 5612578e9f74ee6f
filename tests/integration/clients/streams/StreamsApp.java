// A stateful Kafka Streams 4.4 application for the tests (test_streams.py): one instance per
// JVM, its state printed as JSON lines on stdout (diagnostics go to stderr through log4j2).
//
//   streams-app.sh --bootstrap B --app-id ID --state-dir DIR [--protocol classic|streams]
//                  [--clicks T] [--users T] [--output T]
//
// Topology: clicks (key: click id, value: user) are re-keyed by user (a repartition topic),
// counted per user (a KTable store with a changelog), and each new count is joined with the
// users table (user -> region; a KStream-KTable join) into the output as "region:count".
// Exactly once (exactly_once_v2), one standby replica per store, no record cache: every
// click makes exactly one output record, so the counts of a user read back with
// read_committed are 1, 2, ... n with no gap and no repeat.
//
// stdout: {"event":"state","state":S} on each state change; {"event":"tasks","active":[..],
// "standby":[..]} whenever this instance's tasks change; {"event":"error","message":M} when
// a stream thread dies (the instance then shuts down). Closing stdin closes the instance.

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsApp {
    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String protocol = opts.getOrDefault("protocol", "classic");
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            // The broker's minimum (group.min.session.timeout.ms): a killed instance's tasks
            // move after 6 s instead of Streams' 45 s default.
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1500);
        }
        Serde<String> str = Serdes.String();
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table(
            opts.getOrDefault("users", "users"), Consumed.with(str, str), Materialized.as("users-store"));
        builder.stream(opts.getOrDefault("clicks", "clicks"), Consumed.with(str, str))
            .groupBy((click, user) -> user, Grouped.with("by-user", str, str))
            .count(Materialized.as("clicks-per-user"))
            .toStream()
            .join(users, (count, region) -> region + ":" + count, Joined.with(str, Serdes.Long(), str))
            .to(opts.getOrDefault("output", "user-counts"), Produced.with(str, str));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            print("{\"event\":\"state\",\"state\":\"" + now + "\"}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            print("{\"event\":\"error\",\"message\":" + quote(String.valueOf(e)) + "}");
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                    // a line from the test: nothing to do, only EOF matters
                }
            } catch (IOException ignored) {
                // EOF either way
            }
            done.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        streams.start();
        String last = "";
        while (!done.await(100, java.util.concurrent.TimeUnit.MILLISECONDS)) {
            String tasks = tasksLine(streams);
            if (!tasks.equals(last)) {
                print(tasks);
                last = tasks;
            }
        }
        streams.close(Duration.ofSeconds(30));
        System.out.flush();
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }

    static String tasksLine(KafkaStreams streams) {
        TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata t : thread.activeTasks()) active.add(t.taskId().toString());
            for (TaskMetadata t : thread.standbyTasks()) standby.add(t.taskId().toString());
        }
        return "{\"event\":\"tasks\",\"active\":" + list(active) + ",\"standby\":" + list(standby) + "}";
    }

    static String list(TreeSet<String> items) {
        List<String> quoted = new ArrayList<>();
        for (String s : items) quoted.add(quote(s));
        return "[" + String.join(",", quoted) + "]";
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
