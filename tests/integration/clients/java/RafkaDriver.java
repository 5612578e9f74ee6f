// Driver for the Java kafka-clients library (compiled against 4.3.0 and 3.9.1; the same
// source must build with both). Command-line contract: ../README.md.
// stdout carries only JSON lines; diagnostics go to stderr (log4j2, level $RAFKA_CLIENT_LOG).
// Security settings come from $RAFKA_CLIENT_SECURITY (README "Security"): clientProperties().
//
// One class per concern, all in this folder (setup.sh compiles java/*.java):
//   RafkaDriver     main, command dispatch, and the helpers every command shares (options,
//                   JSON output, error names, client settings, the reference records)
//   ProduceConsume  create-topic, produce, produce-stream, consume, offsets-for-times
//   Groups          group-consume, describe-group, committed, commit
//   ShareGroups     share-consume (KIP-932)
//   Transactions    txn-produce, txn-copy, txn-fence
//   AdminCommands   admin <action>
// The command classes extend RafkaDriver only to call its static helpers unqualified (the
// default package has no static imports); none is ever instantiated.

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
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class RafkaDriver {
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
        if (argv[0].equals("admin")) return AdminCommands.admin(argv);
        Map<String, String> o = parseOptions(argv);
        String bootstrap = required(o, "bootstrap");
        String topic = argv[0].equals("describe-group") ? o.get("topic") : required(o, "topic");
        long timeoutMs = (long) (Double.parseDouble(o.getOrDefault("timeout", "60")) * 1000);
        int rc;
        switch (argv[0]) {
            case "create-topic":
                rc = ProduceConsume.createTopic(bootstrap, topic,
                        Integer.parseInt(required(o, "partitions")),
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
                rc = ProduceConsume.produce(bootstrap, topic,
                        Integer.parseInt(required(o, "count")),
                        o.getOrDefault("compression", "none"), o.getOrDefault("acks", "-1"),
                        o.containsKey("start-ts") ? Long.parseLong(o.get("start-ts"))
                                : System.currentTimeMillis(),
                        timeoutMs);
                break;
            case "consume":
                rc = ProduceConsume.consume(bootstrap, topic,
                        Integer.parseInt(required(o, "expect")),
                        (long) (Double.parseDouble(o.getOrDefault("timeout", "30")) * 1000),
                        o.get("isolation-level"));
                break;
            case "txn-produce":
                rc = Transactions.txnProduce(bootstrap, topic, o, timeoutMs);
                break;
            case "txn-copy":
                rc = Transactions.txnCopy(bootstrap, topic, o, timeoutMs);
                break;
            case "txn-fence":
                rc = Transactions.txnFence(bootstrap, topic, o, timeoutMs);
                break;
            case "produce-stream":
                rc = ProduceConsume.produceStream(bootstrap, topic, o);
                break;
            case "offsets-for-times":
                rc = ProduceConsume.offsetsForTimes(bootstrap, topic,
                        Long.parseLong(required(o, "timestamp")), timeoutMs);
                break;
            case "group-consume":
                try {
                    rc = new Groups.GroupMember(bootstrap, topic, o).run();
                } catch (Exception e) { // reported as an event too, then as any failure
                    Throwable root = e;
                    while (root.getCause() != null) root = root.getCause();
                    event("error", "\"error\":" + js(errorName(root)) + ",\"message\":"
                            + js(String.valueOf(root.getMessage())) + ",\"fatal\":true");
                    throw e;
                }
                break;
            case "describe-group":
                rc = Groups.describeGroup(bootstrap, required(o, "group"), timeoutMs);
                break;
            case "committed":
                rc = Groups.committed(bootstrap, topic, required(o, "group"), timeoutMs);
                break;
            case "commit":
                rc = Groups.commit(bootstrap, topic, o, timeoutMs);
                break;
            case "share-consume":
                rc = ShareGroups.shareConsume(bootstrap, topic, o, timeoutMs);
                break;
            default:
                usage("unknown command " + argv[0]);
                return EXIT_USAGE;
        }
        return rc;
    }

    // ---- helpers --------------------------------------------------------------------

    static long nowMs() {
        return System.currentTimeMillis();
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

    static boolean flag(Map<String, String> o, String name) {
        return Boolean.parseBoolean(o.getOrDefault(name, "false"));
    }

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
