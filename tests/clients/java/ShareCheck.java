// Share groups (KIP-932) with Kafka's Java KafkaShareConsumer, run by
// Sluice's integration tests (crates/sluice/tests/it/cluster_share.rs and
// lifecycle/share.rs) as a single-file program (`java -cp '<kafka libs>/*'
// ShareCheck.java ...`: the JDK compiles it on the fly).
//
// Setup (on --setup-bootstrap, the brokers themselves): the group's configs
// share.auto.offset.reset=earliest and share.record.lock.duration.ms (15 s,
// the brokers' minimum), so that records produced before a member joined are
// delivered and a lost acquisition lock frees them within the test's time.
// Everything else goes through --bootstrap. Modes:
//
//   deliver    a producer sends --records records (keys spread them over
//              the partitions) while --consumers share consumers (explicit
//              acknowledgement) acknowledge each record they get with ACCEPT
//              and commitSync (after --process-ms of "processing" per
//              poll, 0 by default); consumer 0 leaves (close) once it acknowledged
//              --leave-after records. Done when every produced record was
//              acknowledged successfully at least once; then the group's
//              offsets (DescribeShareGroupOffsets, through --bootstrap) must
//              show no lag. Writes the count acknowledged to --progress-file
//              every 200 ms (the test kills a broker meanwhile).
//   redeliver  one consumer; record i is released (i % 3 == 1, its first
//              delivery), rejected (i % 3 == 2) or accepted. Every released
//              record must come back (delivery count 2) and be accepted, no
//              rejected or accepted one may come back (watched for 5 s
//              after the rest is done).
//   renew      consumer A holds the records of its first poll for 24 s, past
//              their 15 s acquisition lock, renewing them (AcknowledgeType
//              RENEW, KIP-1222, with commitSync) every 4 s and polling after
//              each renewal (which takes them back in flight; what else it
//              brings is accepted), then accepts them; consumer B
//              polls all the while. B must never get a held record, and A's
//              renewals and acceptances must all succeed.
//   ack-after-move
//              one consumer; --records records are produced to partition
//              --partition only. The consumer polls until it holds some,
//              accepts them without committing, writes "held" to
//              --progress-file and waits for --go-file to exist (the test
//              kills the partition's leader meanwhile). Then commitSync,
//              timed: prints "COMMIT_AFTER_MOVE_MS <ms> FAILED <n>". Then
//              it consumes on until every record was acknowledged (the held
//              ones, if their commit failed, are delivered again).
//
// Prints `RESULT PASS|FAIL <detail>` and exits 0 on PASS, 1 otherwise.
//
//   ShareCheck --mode M --bootstrap HOST:PORT --setup-bootstrap HOST:PORT
//              --topic T --group G [--records N] [--consumers C]
//              [--leave-after N] [--process-ms MS] [--progress-file F]
//              [--timeout-ms MS] [--partition P] [--go-file F]

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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareCheck {
    static final Map<String, String> ARGS = new HashMap<>();
    static final long LOCK_MS = 15_000;

    static String arg(String name, String dflt) {
        String v = ARGS.get(name);
        if (v == null && dflt == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v == null ? dflt : v;
    }

    public static void main(String[] argv) throws Exception {
        for (int i = 0; i + 1 < argv.length; i += 2) {
            ARGS.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String mode = arg("mode", null);
        String failure;
        try {
            setup();
            switch (mode) {
                case "deliver": failure = deliver(); break;
                case "redeliver": failure = redeliver(); break;
                case "renew": failure = renew(); break;
                case "ack-after-move": failure = ackAfterMove(); break;
                default: throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Exception e) {
            e.printStackTrace();
            failure = "the run failed: " + e;
        }
        if (failure == null) {
            System.out.println("RESULT PASS " + mode);
            System.exit(0);
        }
        System.out.println("RESULT FAIL " + mode + ": " + failure);
        System.exit(1);
    }

    static void setup() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("setup-bootstrap", null));
        try (Admin admin = Admin.create(p)) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, arg("group", null));
            List<AlterConfigOp> ops = List.of(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", Long.toString(LOCK_MS)), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(group, ops)).all().get();
        }
    }

    static KafkaShareConsumer<String, String> consumer(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("bootstrap", null));
        p.put("group.id", arg("group", null));
        p.put("client.id", clientId);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(arg("topic", null)));
        return c;
    }

    /** Sends records 0..n-1 ("v-i", key i); returns the values acknowledged by the brokers. */
    static Set<String> produce(int n, long pauseEveryMs) throws Exception {
        return produce(n, pauseEveryMs, null);
    }

    /** As above; all to `partition` when it is not null. */
    static Set<String> produce(int n, long pauseEveryMs, Integer partition) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("bootstrap", null));
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", "120000");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        Set<String> sent = ConcurrentHashMap.newKeySet();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                String value = "v-" + i;
                producer.send(new ProducerRecord<>(arg("topic", null), partition, Integer.toString(i), value), (md, e) -> {
                    if (e == null) {
                        sent.add(value);
                    } else {
                        System.out.println("produce failed for " + value + ": " + e);
                    }
                });
                if (pauseEveryMs > 0 && i % 50 == 49) {
                    producer.flush();
                    Thread.sleep(pauseEveryMs);
                }
            }
            producer.flush();
        }
        return sent;
    }

    /** commitSync's failures, by exception name, counted in `errors`; the partitions that failed. */
    static Set<TopicIdPartition> commit(KafkaShareConsumer<String, String> c, Map<String, Integer> errors) {
        Set<TopicIdPartition> failed = new java.util.HashSet<>();
        try {
            Map<TopicIdPartition, Optional<KafkaException>> result = c.commitSync(Duration.ofSeconds(30));
            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
                if (e.getValue().isPresent()) {
                    failed.add(e.getKey());
                    synchronized (errors) {
                        errors.merge(e.getValue().get().getClass().getSimpleName(), 1, Integer::sum);
                    }
                }
            }
        } catch (KafkaException e) {
            synchronized (errors) {
                errors.merge("commitSync:" + e.getClass().getSimpleName(), 1, Integer::sum);
            }
            failed.add(null);
        }
        return failed;
    }

    static String deliver() throws Exception {
        int records = Integer.parseInt(arg("records", "6000"));
        int consumers = Integer.parseInt(arg("consumers", "3"));
        int leaveAfter = Integer.parseInt(arg("leave-after", Integer.toString(records / 4)));
        long processMs = Long.parseLong(arg("process-ms", "0"));
        long deadline = System.currentTimeMillis() + Long.parseLong(arg("timeout-ms", "240000"));
        Path progress = Path.of(arg("progress-file", "/dev/null"));
        Set<String> acked = ConcurrentHashMap.newKeySet();
        Map<String, Integer> deliveries = new ConcurrentHashMap<>();
        Map<String, Integer> errors = new TreeMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger left = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            final int me = i;
            Thread t = new Thread(() -> {
                KafkaShareConsumer<String, String> c = consumer("share-check-" + me);
                int mine = 0;
                try {
                    while (!stop.get()) {
                        ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(500));
                        for (ConsumerRecord<String, String> r : polled) {
                            deliveries.merge(r.value(), 1, Integer::sum);
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        if (polled.isEmpty()) {
                            continue;
                        }
                        if (processMs > 0) {
                            Thread.sleep(processMs);
                        }
                        Set<TopicIdPartition> failed = commit(c, errors);
                        for (ConsumerRecord<String, String> r : polled) {
                            boolean ok = !failed.contains(null) && failed.stream().noneMatch(
                                tip -> tip.topic().equals(r.topic()) && tip.partition() == r.partition());
                            if (ok && acked.add(r.value())) {
                                mine++;
                            }
                        }
                        if (me == 0 && consumers > 1 && mine >= leaveAfter) {
                            System.out.println("consumer 0 leaves after acknowledging " + mine);
                            left.incrementAndGet();
                            break;
                        }
                    }
                } catch (Exception e) {
                    System.out.println("consumer " + me + " failed: " + e);
                    synchronized (errors) {
                        errors.merge("consumer:" + e.getClass().getSimpleName(), 1, Integer::sum);
                    }
                } finally {
                    c.close(Duration.ofSeconds(30));
                }
            });
            t.start();
            threads.add(t);
        }
        Set<String> sent = produce(records, 20);
        System.out.println("produced " + sent.size() + " of " + records);
        while (System.currentTimeMillis() < deadline && !acked.containsAll(sent)) {
            Files.writeString(progress, Integer.toString(acked.size()));
            Thread.sleep(200);
        }
        Files.writeString(progress, Integer.toString(acked.size()));
        stop.set(true);
        for (Thread t : threads) {
            t.join(60_000);
        }
        long redelivered = deliveries.values().stream().filter(n -> n > 1).count();
        System.out.println("acknowledged " + acked.size() + " distinct of " + sent.size()
            + ", redelivered " + redelivered + ", acknowledgement errors " + errors
            + ", consumers left " + left.get());
        if (sent.size() != records) {
            return "only " + sent.size() + " of " + records + " records were produced";
        }
        if (!acked.containsAll(sent)) {
            List<String> missing = new ArrayList<>();
            for (String v : sent) {
                if (!acked.contains(v) && missing.size() < 10) {
                    missing.add(v + " (delivered " + deliveries.getOrDefault(v, 0) + "x)");
                }
            }
            return (sent.size() - acked.size()) + " records never acknowledged, e.g. " + missing;
        }
        if (consumers > 1 && left.get() != 1) {
            return "consumer 0 did not leave mid-run";
        }
        return checkOffsets(deadline);
    }

    /** The group's offsets, through --bootstrap: no partition may lag. */
    static String checkOffsets(long deadline) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("bootstrap", null));
        String group = arg("group", null);
        String last = "";
        try (Admin admin = Admin.create(p)) {
            while (System.currentTimeMillis() < deadline + 30_000) {
                Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get();
                long lag = 0;
                for (SharePartitionOffsetInfo info : offsets.values()) {
                    lag += info == null ? 1 : info.lag().orElse(1L);
                }
                last = offsets.toString();
                if (!offsets.isEmpty() && lag == 0) {
                    System.out.println("offsets " + last);
                    return null;
                }
                Thread.sleep(500);
            }
        }
        return "the group still lags: " + last;
    }

    static int index(String value) {
        return Integer.parseInt(value.substring(2));
    }

    static String redeliver() throws Exception {
        int records = Integer.parseInt(arg("records", "300"));
        long deadline = System.currentTimeMillis() + Long.parseLong(arg("timeout-ms", "120000"));
        Set<String> sent = produce(records, 0);
        Map<String, List<Integer>> counts = new HashMap<>();
        Map<String, Integer> errors = new TreeMap<>();
        Set<String> accepted = new java.util.HashSet<>();
        long doneAt = 0;
        try (KafkaShareConsumer<String, String> c = consumer("share-check-redeliver")) {
            while (System.currentTimeMillis() < deadline) {
                if (doneAt == 0) {
                    boolean done = true;
                    for (String v : sent) {
                        if (index(v) % 3 != 2 && !accepted.contains(v)) {
                            done = false;
                            break;
                        }
                    }
                    if (done) {
                        doneAt = System.currentTimeMillis();
                    }
                } else if (System.currentTimeMillis() - doneAt > 5_000) {
                    break;
                }
                ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(500));
                List<String> acceptedNow = new ArrayList<>();
                for (ConsumerRecord<String, String> r : polled) {
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    counts.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(count);
                    int i = index(r.value());
                    AcknowledgeType type = i % 3 == 2 ? AcknowledgeType.REJECT
                        : (i % 3 == 1 && count == 1) ? AcknowledgeType.RELEASE
                        : AcknowledgeType.ACCEPT;
                    c.acknowledge(r, type);
                    if (type == AcknowledgeType.ACCEPT) {
                        acceptedNow.add(r.value());
                    }
                }
                if (!polled.isEmpty()) {
                    if (commit(c, errors).isEmpty()) {
                        accepted.addAll(acceptedNow);
                    }
                }
            }
        }
        System.out.println("deliveries of " + counts.size() + " records, acknowledgement errors " + errors);
        if (sent.size() != records) {
            return "only " + sent.size() + " of " + records + " records were produced";
        }
        if (doneAt == 0) {
            return "not every released or accepted record was accepted in time (" + accepted.size() + ")";
        }
        if (!errors.isEmpty()) {
            return "acknowledgements failed: " + errors;
        }
        for (String v : sent) {
            List<Integer> seen = counts.getOrDefault(v, List.of());
            List<Integer> want = index(v) % 3 == 1 ? List.of(1, 2) : List.of(1);
            if (!seen.equals(want)) {
                return v + " delivered with delivery counts " + seen + ", expected " + want;
            }
        }
        return null;
    }

    static String renew() throws Exception {
        int records = Integer.parseInt(arg("records", "60"));
        Set<String> sent = produce(records, 0);
        Map<String, Integer> errors = new TreeMap<>();
        Set<String> held = new java.util.HashSet<>();
        Set<String> toB = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean();
        try (KafkaShareConsumer<String, String> a = consumer("share-check-renew-a")) {
            List<ConsumerRecord<String, String>> kept = new ArrayList<>();
            long until = System.currentTimeMillis() + 60_000;
            while (kept.isEmpty() && System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(500))) {
                    kept.add(r);
                    held.add(r.value());
                }
            }
            if (kept.isEmpty()) {
                return "consumer A got no record";
            }
            System.out.println("A holds " + kept.size() + " records");
            Thread b = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer("share-check-renew-b")) {
                    while (!stop.get()) {
                        ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(500));
                        for (ConsumerRecord<String, String> r : polled) {
                            toB.add(r.value());
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        if (!polled.isEmpty()) {
                            commit(c, new TreeMap<>());
                        }
                    }
                }
            });
            b.start();
            long heldUntil = System.currentTimeMillis() + LOCK_MS + 9_000;
            int renewals = 0;
            while (System.currentTimeMillis() < heldUntil) {
                Thread.sleep(4_000);
                for (ConsumerRecord<String, String> r : kept) {
                    a.acknowledge(r, AcknowledgeType.RENEW);
                }
                if (!commit(a, errors).isEmpty()) {
                    break;
                }
                renewals++;
                // The next poll takes the renewed records back in flight
                // (acknowledgeable again); anything new it brings is accepted.
                for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(100))) {
                    if (!held.contains(r.value())) {
                        a.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
            }
            for (ConsumerRecord<String, String> r : kept) {
                a.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            commit(a, errors);
            stop.set(true);
            b.join(60_000);
            System.out.println("A renewed " + renewals + " times; B got " + toB.size()
                + " records; acknowledgement errors " + errors);
        }
        Set<String> stolen = new java.util.HashSet<>(held);
        stolen.retainAll(toB);
        if (!errors.isEmpty()) {
            return "renewals or acceptances failed: " + errors;
        }
        if (!stolen.isEmpty()) {
            return stolen.size() + " held records were delivered to B: their locks were not renewed";
        }
        return null;
    }

    static String ackAfterMove() throws Exception {
        int records = Integer.parseInt(arg("records", "100"));
        int partition = Integer.parseInt(arg("partition", null));
        long deadline = System.currentTimeMillis() + Long.parseLong(arg("timeout-ms", "180000"));
        Path progress = Path.of(arg("progress-file", null));
        Path go = Path.of(arg("go-file", null));
        Set<String> sent = produce(records, 0, partition);
        Set<String> acked = new java.util.HashSet<>();
        Map<String, Integer> errors = new TreeMap<>();
        Map<String, Integer> errorsAfterMove = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = consumer("share-check-move")) {
            List<ConsumerRecord<String, String>> held = new ArrayList<>();
            while (held.isEmpty() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    held.add(r);
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
            if (held.isEmpty()) {
                return "the consumer got no record";
            }
            System.out.println("holds " + held.size() + " records of partition " + partition);
            Files.writeString(progress, "held");
            while (!Files.exists(go)) {
                if (System.currentTimeMillis() > deadline) {
                    return "no go file " + go + " before the deadline";
                }
                Thread.sleep(50);
            }
            long start = System.nanoTime();
            Set<TopicIdPartition> failed = commit(c, errorsAfterMove);
            long ms = (System.nanoTime() - start) / 1_000_000;
            System.out.println("COMMIT_AFTER_MOVE_MS " + ms + " FAILED " + failed.size() + " errors " + errorsAfterMove);
            if (failed.isEmpty()) {
                for (ConsumerRecord<String, String> r : held) {
                    acked.add(r.value());
                }
            }
            while (System.currentTimeMillis() < deadline && !acked.containsAll(sent)) {
                ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : polled) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (!polled.isEmpty() && commit(c, errors).isEmpty()) {
                    for (ConsumerRecord<String, String> r : polled) {
                        acked.add(r.value());
                    }
                }
            }
        }
        System.out.println("acknowledged " + acked.size() + " of " + sent.size()
            + "; acknowledgement errors after the move " + errors);
        if (sent.size() != records) {
            return "only " + sent.size() + " of " + records + " records were produced";
        }
        if (!acked.containsAll(sent)) {
            return (sent.size() - acked.size()) + " records never acknowledged";
        }
        return null;
    }
}
