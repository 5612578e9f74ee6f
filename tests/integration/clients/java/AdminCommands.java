// RafkaDriver (Java kafka-clients driver): admin.
// `admin <action>`: one Admin call per run, its outcome as client-neutral JSON (README.md,
// "Admin"). Per-resource broker errors are printed (Kafka's names) with exit 0; a failure of
// the whole call ends with the contract's error line and exit 1.

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.TopicPartition;

final class AdminCommands extends RafkaDriver {
    private AdminCommands() {}

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
        if (o.containsKey("client-metrics")) // KIP-714 subscription (kafka-clients 3.7+)
            return newerResource("CLIENT_METRICS", o.get("client-metrics"));
        if (o.containsKey("group"))
            return newerResource("GROUP", o.get("group"));
        for (String kind : List.of("topic", "broker", "broker-logger"))
            if (o.containsKey(kind))
                return new org.apache.kafka.common.config.ConfigResource(RESOURCE_TYPES.get(kind),
                        o.get(kind));
        usage("admin: needs --topic, --broker, --broker-logger, --group or --client-metrics");
        return null;
    }

    /** A resource of a type older kafka-clients lack (looked up by name): exits 3 there. */
    static org.apache.kafka.common.config.ConfigResource newerResource(String type, String name) {
        try {
            return new org.apache.kafka.common.config.ConfigResource(
                    org.apache.kafka.common.config.ConfigResource.Type.valueOf(type), name);
        } catch (IllegalArgumentException e) {
            System.err.println("admin: this kafka-clients has no " + type + " config resource");
            System.exit(EXIT_UNSUPPORTED);
            return null;
        }
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
}
