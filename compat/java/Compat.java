// The Java kafka-clients program of Sluice's client compatibility matrix
// (crates/sluice/tests/compat/matrix.rs; the scenarios are described in compat/README.md).
//
//   java -cp '<kafka libs>/*' Compat.java --bootstrap HOST:PORT --prefix P \
//       [--scram-user U --scram-password W]
//
// Prints one `RESULT <scenario> PASS|FAIL|SKIP <detail>` line per scenario and
// exits 1 if any failed.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Compat {
    static final int PARTITIONS = 3;
    static final int COUNT = 30;
    static final long DEADLINE_MS = 60_000;

    static String bootstrap;
    static String prefix;
    static String scramUser;
    static String scramPassword;

    /** The kafka-clients version, from the properties file its jar carries
     *  (the class that reads it moved between releases). */
    static String clientVersion() {
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties props = new Properties();
            if (in != null) {
                props.load(in);
            }
            return props.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown (" + e + ")";
        }
    }

    public static void main(String[] args) {
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[i + 1];
                case "--prefix" -> prefix = args[i + 1];
                case "--scram-user" -> scramUser = args[i + 1];
                case "--scram-password" -> scramPassword = args[i + 1];
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || prefix == null) {
            throw new IllegalArgumentException("--bootstrap and --prefix are required");
        }
        System.out.println("VERSION " + clientVersion());
        boolean failed = false;
        failed |= run("produce-consume", Compat::produceConsume);
        failed |= run("group-resume", Compat::groupResume);
        failed |= run("admin", Compat::adminScenario);
        failed |= run("transaction", Compat::transaction);
        failed |= run("share-group", Compat::shareGroup);
        System.exit(failed ? 1 : 0);
    }

    interface Scenario {
        String run() throws Exception;
    }

    /** A scenario the brokers cannot run (reported as SKIP). */
    static class Skip extends Exception {
        Skip(String why) {
            super(why);
        }
    }

    static boolean run(String name, Scenario scenario) {
        try {
            String detail = scenario.run();
            System.out.println("RESULT " + name + " PASS " + detail);
            return false;
        } catch (Skip e) {
            System.out.println("RESULT " + name + " SKIP " + e.getMessage());
            return false;
        } catch (Throwable e) {
            String message = e.toString().replace('\n', ' ');
            if (e.getCause() != null) {
                message += " (cause: " + e.getCause().toString().replace('\n', ' ') + ")";
            }
            System.out.println("RESULT " + name + " FAIL " + message);
            e.printStackTrace();
            return true;
        } finally {
            System.out.flush();
        }
    }

    static Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", prefix + "-java");
        if (scramUser != null) {
            p.put("security.protocol", "SASL_PLAINTEXT");
            p.put("sasl.mechanism", "SCRAM-SHA-256");
            p.put("sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                    + scramUser + "\" password=\"" + scramPassword + "\";");
        }
        return p;
    }

    static Admin admin() {
        Properties p = common();
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        return Admin.create(p);
    }

    static KafkaProducer<String, String> producer(String transactionalId) {
        Properties p = common();
        p.put("acks", "all");
        p.put("delivery.timeout.ms", "45000");
        p.put("request.timeout.ms", "20000");
        p.put("linger.ms", "5");
        if (transactionalId != null) {
            p.put("transactional.id", transactionalId);
        }
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String group, String isolation) {
        Properties p = common();
        p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", isolation);
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "1000");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3)))
                .all().get(30, TimeUnit.SECONDS);
        }
    }

    /** Produces `<tag>-<i>` for i in 0..COUNT, record i to partition i % PARTITIONS. */
    static void produce(KafkaProducer<String, String> producer, String topic, String tag)
            throws Exception {
        List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
        for (int i = 0; i < COUNT; i++) {
            sent.add(producer.send(
                new ProducerRecord<>(topic, i % PARTITIONS, "k-" + i, tag + "-" + i)));
        }
        producer.flush();
        for (var f : sent) {
            f.get(45, TimeUnit.SECONDS);
        }
    }

    static Set<String> values(String tag) {
        Set<String> s = new HashSet<>();
        for (int i = 0; i < COUNT; i++) {
            s.add(tag + "-" + i);
        }
        return s;
    }

    /**
     * Polls `consumer` until every value of `wanted` was read; throws if a
     * value matching `forbidden` is read, or at the deadline.
     */
    static void consumeAll(KafkaConsumer<String, String> consumer, Set<String> wanted,
            Predicate<String> forbidden, String what) {
        Set<String> missing = new HashSet<>(wanted);
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (!missing.isEmpty()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(what + ": " + missing.size() + " of "
                    + wanted.size() + " records not consumed within " + DEADLINE_MS + " ms");
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                if (forbidden.test(r.value())) {
                    throw new IllegalStateException(what + ": read " + r.value() + " at "
                        + r.topic() + "-" + r.partition() + "@" + r.offset());
                }
                missing.remove(r.value());
            }
        }
    }

    static String produceConsume() throws Exception {
        String topic = prefix + "-pc";
        createTopic(topic, PARTITIONS);
        try (var producer = producer(null)) {
            produce(producer, topic, "pc");
        }
        try (var consumer = consumer(prefix + "-pc-group", "read_uncommitted")) {
            consumer.subscribe(List.of(topic));
            consumeAll(consumer, values("pc"), v -> !v.startsWith("pc-"), "consume");
        }
        return COUNT + " records over " + PARTITIONS + " partitions";
    }

    static String groupResume() throws Exception {
        String topic = prefix + "-grp";
        String group = prefix + "-grp-group";
        createTopic(topic, PARTITIONS);
        try (var producer = producer(null)) {
            produce(producer, topic, "old");
            try (var consumer = consumer(group, "read_uncommitted")) {
                consumer.subscribe(List.of(topic));
                consumeAll(consumer, values("old"), v -> !v.startsWith("old-"), "first consumer");
                consumer.commitSync(Duration.ofSeconds(30));
            }
            produce(producer, topic, "new");
        }
        try (var consumer = consumer(group, "read_uncommitted")) {
            consumer.subscribe(List.of(topic));
            consumeAll(consumer, values("new"), v -> v.startsWith("old-"),
                "resumed consumer (committed offsets not used)");
        }
        return "second consumer resumed at the committed offsets";
    }

    static String adminScenario() throws Exception {
        String topic = prefix + "-adm";
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 3)))
                .all().get(30, TimeUnit.SECONDS);
            TopicDescription d = null;
            long deadline = System.currentTimeMillis() + 30_000;
            // Metadata reaches every broker shortly after the creation.
            while (true) {
                try {
                    d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(30, TimeUnit.SECONDS).get(topic);
                    if (d.partitions().stream().allMatch(p -> p.leader() != null)) {
                        break;
                    }
                } catch (java.util.concurrent.ExecutionException e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no leaders for " + topic + ": " + d);
                }
                Thread.sleep(200);
            }
            if (d.partitions().size() != 2) {
                throw new IllegalStateException("described " + d.partitions().size()
                    + " partitions, not 2: " + d);
            }
            for (TopicPartitionInfo p : d.partitions()) {
                // Through Sluice, replicas are shown as the Sluice nodes that
                // stand for them: at most one per Sluice node.
                if (p.replicas().isEmpty() || !p.replicas().contains(p.leader())) {
                    throw new IllegalStateException("partition " + p.partition()
                        + ": leader " + p.leader() + " not among replicas " + p.replicas());
                }
            }
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            deadline = System.currentTimeMillis() + 30_000;
            while (admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(topic + " still listed 30 s after deletion");
                }
                Thread.sleep(200);
            }
        }
        return "created, described (2 partitions with leaders), deleted";
    }

    static String transaction() throws Exception {
        String topic = prefix + "-txn";
        createTopic(topic, PARTITIONS);
        try (var producer = producer(prefix + "-txn-id")) {
            producer.initTransactions();
            for (String tag : List.of("c", "a", "d")) {
                producer.beginTransaction();
                produce(producer, topic, tag);
                if (tag.equals("a")) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        Set<String> committed = values("c");
        committed.addAll(values("d"));
        try (var consumer = consumer(prefix + "-txn-group", "read_committed")) {
            consumer.subscribe(List.of(topic));
            consumeAll(consumer, committed, v -> v.startsWith("a-"), "read_committed consumer");
        }
        return "2 committed, 1 aborted; read_committed saw exactly the committed records";
    }

    /**
     * A share group (KIP-932): 30 records, then a KafkaShareConsumer
     * (explicit acknowledgement) acquires and accepts each; skipped on
     * brokers without the share.version feature.
     */
    static String shareGroup() throws Exception {
        String topic = prefix + "-share";
        String group = prefix + "-share-group";
        try (Admin admin = admin()) {
            FeatureMetadata features = admin.describeFeatures().featureMetadata()
                .get(30, TimeUnit.SECONDS);
            FinalizedVersionRange share = features.finalizedFeatures().get("share.version");
            if (share == null || share.maxVersionLevel() < 1) {
                throw new Skip("brokers without share groups");
            }
            admin.incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.GROUP, group),
                List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET)))).all().get(30, TimeUnit.SECONDS);
        }
        createTopic(topic, PARTITIONS);
        try (var producer = producer(null)) {
            produce(producer, topic, "sh");
        }
        Properties p = common();
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", "explicit");
        Set<String> missing = values("sh");
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (var consumer = new KafkaShareConsumer<>(p, new StringDeserializer(),
                new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            while (!missing.isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("share consumer: " + missing.size() + " of "
                        + COUNT + " records not acknowledged within " + DEADLINE_MS + " ms");
                }
                List<String> polled = new ArrayList<>();
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    polled.add(r.value());
                }
                if (polled.isEmpty()) {
                    continue;
                }
                Map<TopicIdPartition, java.util.Optional<KafkaException>> result =
                    consumer.commitSync(Duration.ofSeconds(30));
                for (var e : result.entrySet()) {
                    if (e.getValue().isPresent()) {
                        throw new IllegalStateException("acknowledgement failed for "
                            + e.getKey() + ": " + e.getValue().get());
                    }
                }
                missing.removeAll(polled);
            }
        }
        return COUNT + " records acquired and acknowledged by a share consumer";
    }
}
