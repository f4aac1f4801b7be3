// A chained consume-transform-produce workload (an ETL) with Kafka's Java
// clients: the Java twin of compat/franz-go-etl, run by Sluice's integration
// tests (crates/sluice/tests/it/cluster_etl.rs) as a single-file program
// (`java -cp '<kafka libs>/*' EtlChain.java ...`: the JDK compiles it on the
// fly), through Sluice and directly.
//
// `--records` records (key i, i < N) go into a source topic. In each chain a
// group consumes them and produces each to a second topic, a second group
// does the same into a third, and a checking consumer reads the third
// (read_committed) and requires every key exactly once. The chains run at
// once, with different group protocols:
//   range              classic group, RangeAssignor
//   cooperative-sticky classic group, CooperativeStickyAssignor
//   kip848             group.protocol=consumer (the server's range assignor)
//   txn-classic        classic cooperative-sticky group, transactional
//   txn-kip848         group.protocol=consumer, transactional
// A transactional member produces a poll's records and sends their offsets
// (sendOffsetsToTransaction with the consumer's group metadata) in one
// transaction, read_committed; a transaction that fails is aborted and the
// member rewinds to its committed offsets. A plain member produces a poll's
// records (acks=all, idempotent), waits for them, and commits their
// offsets; an offset it could not commit yet (a rebalance in progress, or
// a KIP-848 member epoch that a heartbeat advanced meanwhile) is committed
// at its next commit or when its partition is revoked, before the member
// lets it go.
// In every stage one member stays throughout and others join, process a
// while and leave, one after another, so that the group rebalances again
// and again.
//
// Prints `RESULT <chain> PASS|FAIL <detail>` per chain, then
// `etl: N chains, N records each, S.Ss` and `etl: N passed, N failed`; exits
// 1 if any chain failed or the workload did not finish within --timeout-ms.
//
//   EtlChain --bootstrap HOST:PORT --prefix P [--records 20000]
//            [--timeout-ms 150000] [--chains NAME,...]

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class EtlChain {
    static final int PARTITIONS = 6;

    record Chain(String name, boolean kip848, String assignor, boolean txn) {}

    static final List<Chain> CHAINS = List.of(
        new Chain("range", false, "org.apache.kafka.clients.consumer.RangeAssignor", false),
        new Chain("cooperative-sticky", false,
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor", false),
        new Chain("kip848", true, "range", false),
        new Chain("txn-classic", false,
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor", true),
        new Chain("txn-kip848", true, "range", true));

    static String bootstrap;
    static String prefix;
    static int records = 20000;
    static long deadlineNanos;

    public static void main(String[] args) throws Exception {
        long timeoutMs = 150_000;
        String only = "";
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--prefix" -> prefix = args[++i];
                case "--records" -> records = Integer.parseInt(args[++i]);
                case "--timeout-ms" -> timeoutMs = Long.parseLong(args[++i]);
                case "--chains" -> only = args[++i];
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || prefix == null) {
            throw new IllegalArgumentException("--bootstrap and --prefix are required");
        }
        long started = System.nanoTime();
        deadlineNanos = started + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        List<String> names = only.isEmpty() ? List.of() : Arrays.asList(only.split(","));
        List<Chain> chains = CHAINS.stream()
            .filter(c -> names.isEmpty() || names.contains(c.name()))
            .toList();
        if (chains.isEmpty()) {
            throw new IllegalArgumentException("no chain named in --chains " + only);
        }
        String source = prefix + "-source";
        List<String> topics = new ArrayList<>(List.of(source));
        for (Chain c : chains) {
            topics.add(topic(c, 2));
            topics.add(topic(c, 3));
        }
        createTopics(topics);
        Map<String, String> results = new HashMap<>();
        List<Thread> threads = new ArrayList<>();
        String[] produced = new String[1];
        threads.add(spawn(() -> produced[0] = produceSource(source)));
        for (Chain c : chains) {
            threads.add(spawn(() -> {
                String result = runChain(c, source);
                synchronized (results) {
                    results.put(c.name(), result);
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        int passed = 0;
        int failed = 0;
        if (produced[0] != null) {
            System.out.println("RESULT source-producer FAIL " + produced[0]);
            failed++;
        }
        for (Chain c : chains) {
            String error = results.get(c.name());
            if (error == null) {
                System.out.println("RESULT " + c.name() + " PASS " + records + " records exactly once");
                passed++;
            } else {
                System.out.println("RESULT " + c.name() + " FAIL " + error);
                failed++;
            }
        }
        System.out.printf("etl: %d chains, %d records each, %.1fs%n", chains.size(), records,
            (System.nanoTime() - started) / 1e9);
        System.out.println("etl: " + passed + " passed, " + failed + " failed");
        System.out.flush();
        System.exit(failed > 0 ? 1 : 0);
    }

    static String topic(Chain c, int stage) {
        return prefix + "-" + c.name() + "-" + stage;
    }

    static long remainingMs() {
        return Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime()));
    }

    static Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", prefix + "-etl");
        return p;
    }

    static void createTopics(List<String> topics) throws Exception {
        try (Admin admin = Admin.create(common())) {
            admin.createTopics(topics.stream().map(t -> new NewTopic(t, PARTITIONS, (short) 3)).toList())
                .all().get(60, TimeUnit.SECONDS);
        }
    }

    static Properties producerProps() {
        Properties p = common();
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", "60000");
        p.put("linger.ms", "5");
        return p;
    }

    /** Produces the source records; returns an error, or null. */
    static String produceSource(String topic) {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < records; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, Integer.toString(i), "etl")));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get(remainingMs() + 1, TimeUnit.MILLISECONDS);
            }
            return null;
        } catch (Exception e) {
            return describe(e);
        }
    }

    /** Runs the two transform stages and the check of `c`; returns an error, or null. */
    static String runChain(Chain c, String source) {
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        List<Thread> stages = new ArrayList<>();
        String[] froms = {source, topic(c, 2)};
        for (int s = 0; s < 2; s++) {
            String from = froms[s];
            String to = topic(c, s + 2);
            String group = prefix + "-" + c.name() + "-g" + (s + 1);
            stages.add(spawn(() -> runStage(c, group, from, to, stop, errors)));
        }
        String result;
        try {
            result = check(c, topic(c, 3), errors);
        } catch (Exception e) {
            result = "check: " + describe(e);
        }
        stop.set(true);
        for (Thread t : stages) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (result == null) {
            result = errors.peek();
        }
        return result;
    }

    /**
     * Keeps the stage's members coming and going until `stop`: one member
     * stays throughout; four others join two seconds apart and leave three
     * seconds after they joined.
     */
    static void runStage(Chain c, String group, String from, String to, AtomicBoolean stop,
            ConcurrentLinkedQueue<String> errors) {
        AtomicInteger ids = new AtomicInteger();
        List<Thread> members = new ArrayList<>();
        java.util.function.LongConsumer start = lifeMs -> {
            int id = ids.incrementAndGet();
            members.add(spawn(() -> {
                try {
                    new Member(c, group, id, from, to, stop, lifeMs).run();
                } catch (Exception e) {
                    if (!stop.get()) {
                        errors.add(group + " member " + id + ": " + describe(e));
                    }
                }
            }));
        };
        start.accept(-1);
        for (int i = 0; i < 4 && !stop.get(); i++) {
            long next = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (!stop.get() && System.nanoTime() < next) {
                sleepMs(50);
            }
            if (!stop.get()) {
                start.accept(3000);
            }
        }
        for (Thread t : members) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** One member of a transform stage. */
    static final class Member implements ConsumerRebalanceListener {
        final Chain chain;
        final String to;
        final AtomicBoolean stop;
        /** When the member leaves (System.nanoTime), unless it stays throughout. */
        final long untilNanos;
        final boolean stays;
        final KafkaConsumer<String, String> consumer;
        final KafkaProducer<String, String> producer;
        /** Offsets produced but not yet committed (plain members). */
        final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();

        /** A member that leaves `lifeMs` after it joined; never, if negative. */
        Member(Chain c, String group, int id, String from, String to, AtomicBoolean stop,
                long lifeMs) {
            this.chain = c;
            this.to = to;
            this.stop = stop;
            this.stays = lifeMs < 0;
            this.untilNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, lifeMs));
            Properties cp = common();
            cp.put("group.id", group);
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            cp.put("enable.auto.commit", "false");
            cp.put("auto.offset.reset", "earliest");
            if (c.kip848()) {
                cp.put("group.protocol", "consumer");
                cp.put("group.remote.assignor", c.assignor());
            } else {
                cp.put("group.protocol", "classic");
                cp.put("session.timeout.ms", "20000");
                cp.put("partition.assignment.strategy", c.assignor());
            }
            Properties pp = producerProps();
            if (c.txn()) {
                cp.put("isolation.level", "read_committed");
                pp.put("transactional.id", group + "-" + id);
                pp.put("transaction.timeout.ms", "60000");
            }
            consumer = new KafkaConsumer<>(cp);
            producer = new KafkaProducer<>(pp);
            consumer.subscribe(List.of(from), this);
        }

        boolean live() {
            return !stop.get() && (stays || System.nanoTime() - untilNanos < 0) && remainingMs() > 0;
        }

        void run() throws Exception {
            try {
                if (chain.txn()) {
                    producer.initTransactions();
                }
                while (live()) {
                    ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(500));
                    if (recs.isEmpty()) {
                        continue;
                    }
                    if (chain.txn()) {
                        transact(recs);
                    } else {
                        produceAndCommit(recs);
                    }
                }
                if (!chain.txn()) {
                    commitBeforeLeaving();
                }
            } finally {
                try {
                    consumer.close(CloseOptions.timeout(Duration.ofSeconds(15)));
                } finally {
                    producer.close(Duration.ofSeconds(15));
                }
            }
        }

        /** Produces `recs`, waits for them, and commits their offsets. */
        void produceAndCommit(ConsumerRecords<String, String> recs) throws Exception {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (ConsumerRecord<String, String> r : recs) {
                sent.add(producer.send(new ProducerRecord<>(to, r.key(), r.value())));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get(60, TimeUnit.SECONDS);
            }
            pending.putAll(next(recs));
            try {
                commitPending();
            } catch (KafkaException e) {
                if (!retriable(e)) {
                    throw e;
                }
            }
        }

        /**
         * Whether a failed commit leaves its offsets pending, committed at
         * the member's next commit or when their partitions are revoked
         * (the member owns them until it lets them go in a poll; a
         * partition lost instead fails the member): a rebalance in
         * progress, a retriable error, or in a KIP-848 group a stale
         * member epoch (the group checks a commit's epoch strictly, and the
         * consumer fails a commitSync that a heartbeat advanced the epoch
         * under). In a classic group a failed commit means the group went
         * on without the member.
         */
        boolean retriable(KafkaException e) {
            return e instanceof RebalanceInProgressException || e instanceof RetriableException
                || (e instanceof CommitFailedException && chain.kip848());
        }

        /**
         * Commits what is pending before the member leaves; a rebalance in
         * progress is completed first (by a poll of the paused partitions,
         * which returns no records; a partition it revokes is committed by
         * onPartitionsRevoked).
         */
        void commitBeforeLeaving() {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                try {
                    commitPending();
                    return;
                } catch (KafkaException e) {
                    if (!retriable(e) || System.nanoTime() - until > 0) {
                        throw e;
                    }
                    consumer.pause(consumer.assignment());
                    consumer.poll(Duration.ofMillis(200));
                }
            }
        }

        void commitPending() {
            if (!pending.isEmpty()) {
                consumer.commitSync(pending, Duration.ofSeconds(30));
                pending.clear();
            }
        }

        /** Produces `recs` and commits their offsets in one transaction. */
        void transact(ConsumerRecords<String, String> recs) throws Exception {
            try {
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : recs) {
                    producer.send(new ProducerRecord<>(to, r.key(), r.value()));
                }
                producer.sendOffsetsToTransaction(next(recs), consumer.groupMetadata());
                producer.commitTransaction();
            } catch (ProducerFencedException e) {
                throw e;
            } catch (KafkaException e) {
                // The group moved on (a rebalance) or the transaction
                // failed: nothing of it is visible to read_committed;
                // what this member still owns is consumed again.
                producer.abortTransaction();
                rewind(recs.partitions());
            }
        }

        /** Seeks the partitions of `parts` still assigned back to their committed offsets. */
        void rewind(Set<TopicPartition> parts) {
            Set<TopicPartition> owned = new HashSet<>(parts);
            owned.retainAll(consumer.assignment());
            if (owned.isEmpty()) {
                return;
            }
            Map<TopicPartition, OffsetAndMetadata> committed =
                consumer.committed(owned, Duration.ofSeconds(30));
            for (TopicPartition tp : owned) {
                OffsetAndMetadata at = committed.get(tp);
                if (at == null) {
                    consumer.seekToBeginning(List.of(tp));
                } else {
                    consumer.seek(tp, at);
                }
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
            if (chain.txn() || pending.isEmpty()) {
                return;
            }
            Map<TopicPartition, OffsetAndMetadata> mine = new HashMap<>();
            for (TopicPartition tp : revoked) {
                OffsetAndMetadata at = pending.remove(tp);
                if (at != null) {
                    mine.put(tp, at);
                }
            }
            if (!mine.isEmpty()) {
                consumer.commitSync(mine, Duration.ofSeconds(30));
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> assigned) {}

        @Override
        public void onPartitionsLost(Collection<TopicPartition> lost) {
            for (TopicPartition tp : lost) {
                if (pending.remove(tp) != null) {
                    throw new IllegalStateException("lost partition " + tp
                        + " with produced records whose offsets were not committed");
                }
            }
        }
    }

    /** The offsets after the last record of each partition in `recs`. */
    static Map<TopicPartition, OffsetAndMetadata> next(ConsumerRecords<String, String> recs) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : recs.partitions()) {
            List<ConsumerRecord<String, String>> rs = recs.records(tp);
            out.put(tp, new OffsetAndMetadata(rs.get(rs.size() - 1).offset() + 1));
        }
        return out;
    }

    /**
     * Reads the chain's last topic (read_committed) until every key has
     * arrived; returns an error (a key seen twice, an unexpected key, a
     * stage's error, the deadline), or null.
     */
    static String check(Chain c, String topic, ConcurrentLinkedQueue<String> errors) {
        Properties cp = common();
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                parts.add(new TopicPartition(topic, p));
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            boolean[] seen = new boolean[records];
            int got = 0;
            while (got < records) {
                if (!errors.isEmpty()) {
                    return errors.peek();
                }
                if (remainingMs() == 0) {
                    return got + " of " + records + " records arrived before the deadline";
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    String dup = take(seen, r);
                    if (dup != null) {
                        return dup;
                    }
                    got++;
                }
            }
            // Nothing more may follow: a late duplicate within a short wait fails.
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            while (System.nanoTime() < until) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    return "record " + r.key() + " arrived again after all had arrived";
                }
            }
            return null;
        }
    }

    /** Marks `r`'s key seen; returns an error if it is unexpected or was seen before. */
    static String take(boolean[] seen, ConsumerRecord<String, String> r) {
        int k;
        try {
            k = Integer.parseInt(r.key());
        } catch (NumberFormatException e) {
            return "unexpected key " + r.key();
        }
        if (k < 0 || k >= seen.length) {
            return "unexpected key " + r.key();
        }
        if (seen[k]) {
            return "record " + k + " arrived twice (partition " + r.partition() + " offset "
                + r.offset() + ")";
        }
        seen[k] = true;
        return null;
    }

    static String describe(Throwable e) {
        StringBuilder s = new StringBuilder(e.toString());
        for (Throwable t = e.getCause(); t != null; t = t.getCause()) {
            s.append(" <- ").append(t);
        }
        return s.toString();
    }

    static Thread spawn(Runnable r) {
        Thread t = new Thread(r);
        t.start();
        return t;
    }

    static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
