// A Kafka Streams application on the Streams rebalance protocol (KIP-1071,
// `group.protocol=streams`) with `processing.guarantee=exactly_once_v2`,
// counting records per key, run by Sluice's integration tests
// (crates/sluice/tests/lifecycle/streams.rs) as a single-file program
// (`java -cp '<kafka libs>/*:<kafka-streams libs>/*' StreamsCount.java ...`).
//
// A producer (idempotent, acks=all) writes `--records` records over `--keys`
// keys into `<prefix>-in`, paced over about `--produce-ms`, while the
// application counts them per key (an in-memory store, no record cache, so
// that every input record gives exactly one count update) into
// `<prefix>-out`. A checking consumer reads `<prefix>-out` read_committed
// and requires each key's counts to be exactly 1, 2, 3, ... in order: a
// lost or repeated record shows as a count that skips or repeats. The
// program ends when every key has reached its number of records.
//
// Prints `PROGRESS produced=N counted=N` every second (the test kills a
// broker on it), then `RESULT PASS|FAIL <detail>` with the stream threads'
// uncaught errors; exits 1 on FAIL or when not done within --timeout-ms.
//
//   StreamsCount --bootstrap HOST:PORT --prefix P --state-dir DIR
//                [--records 20000] [--keys 50] [--produce-ms 30000]
//                [--timeout-ms 240000]

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

public class StreamsCount {
    static final int PARTITIONS = 6;

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String bootstrap = need(args, "bootstrap");
        String prefix = need(args, "prefix");
        String stateDir = need(args, "state-dir");
        int records = Integer.parseInt(args.getOrDefault("records", "20000"));
        int keys = Integer.parseInt(args.getOrDefault("keys", "50"));
        long produceMs = Long.parseLong(args.getOrDefault("produce-ms", "30000"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeout-ms", "240000"));
        if (records % keys != 0) {
            throw new IllegalArgumentException("--records must be a multiple of --keys");
        }
        int perKey = records / keys;
        String in = prefix + "-in";
        String out = prefix + "-out";
        long deadline = System.currentTimeMillis() + timeoutMs;

        Properties admin = new Properties();
        admin.put("bootstrap.servers", bootstrap);
        try (Admin a = Admin.create(admin)) {
            Map<String, String> configs = Map.of("min.insync.replicas", "2");
            a.createTopics(List.of(
                new NewTopic(in, PARTITIONS, (short) 3).configs(configs),
                new NewTopic(out, PARTITIONS, (short) 3).configs(configs))).all().get();
        }

        AtomicInteger threadErrors = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>("");
        KafkaStreams streams = new KafkaStreams(topology(in, out), streamsConfig(
            bootstrap, prefix + "-app", stateDir));
        streams.setUncaughtExceptionHandler(e -> {
            threadErrors.incrementAndGet();
            firstError.compareAndSet("", e.toString());
            System.out.println("stream thread error: " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();

        AtomicLong produced = new AtomicLong();
        AtomicReference<Exception> produceError = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            try {
                produce(bootstrap, in, records, keys, produceMs, produced);
            } catch (Exception e) {
                produceError.set(e);
            }
        });
        producer.start();

        List<String> violations = new ArrayList<>();
        Map<String, Long> last = new HashMap<>();
        long counted = 0;
        try (KafkaConsumer<String, Long> check = checker(bootstrap)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                parts.add(new TopicPartition(out, p));
            }
            check.assign(parts);
            check.seekToBeginning(parts);
            long nextReport = 0;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, Long> r : check.poll(Duration.ofMillis(200))) {
                    long previous = last.getOrDefault(r.key(), 0L);
                    if (r.value() != previous + 1 && violations.size() < 20) {
                        violations.add(r.key() + ": " + previous + " then " + r.value()
                            + " at " + r.partition() + "@" + r.offset());
                    }
                    counted += Math.max(0, r.value() - previous);
                    last.put(r.key(), Math.max(previous, r.value()));
                }
                if (System.currentTimeMillis() >= nextReport) {
                    System.out.println("PROGRESS produced=" + produced.get() + " counted=" + counted);
                    nextReport = System.currentTimeMillis() + 1000;
                }
                boolean done = last.size() == keys
                    && last.values().stream().allMatch(v -> v >= perKey);
                if (done || produceError.get() != null) {
                    break;
                }
            }
        }
        producer.join(Math.max(1, deadline - System.currentTimeMillis()));
        streams.close(Duration.ofSeconds(30));

        long exact = last.values().stream().filter(v -> v == perKey).count();
        String detail = "records=" + records + " keys=" + keys + " produced=" + produced.get()
            + " counted=" + counted + " keys_exact=" + exact
            + " stream_thread_errors=" + threadErrors.get()
            + (firstError.get().isEmpty() ? "" : " first_error=" + firstError.get());
        boolean pass = violations.isEmpty() && exact == keys && produceError.get() == null;
        if (produceError.get() != null) {
            detail += " produce_error=" + produceError.get();
        }
        if (!violations.isEmpty()) {
            detail += " violations=" + violations;
        }
        System.out.println("RESULT " + (pass ? "PASS " : "FAIL ") + detail);
        System.out.flush();
        Runtime.getRuntime().halt(pass ? 0 : 1);
    }

    static org.apache.kafka.streams.Topology topology(String in, String out) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .count(Materialized.as(Stores.inMemoryKeyValueStore("counts")))
            .toStream()
            .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Properties streamsConfig(String bootstrap, String appId, String stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), 120000);
        return p;
    }

    static void produce(String bootstrap, String topic, int records, int keys, long produceMs,
                        AtomicLong produced) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", "120000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        int batch = Math.max(1, records / 100);
        long pause = Math.max(0, produceMs / 100);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i += batch) {
                List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
                for (int j = i; j < Math.min(records, i + batch); j++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, "k" + (j % keys), "v" + j)));
                }
                for (java.util.concurrent.Future<?> f : sent) {
                    f.get();
                }
                produced.addAndGet(sent.size());
                Thread.sleep(pause);
            }
        }
    }

    static KafkaConsumer<String, Long> checker(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", LongDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static String need(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }
}
