// Seek around a topic with the Java consumer and check every record it gets
// back: the Java twin of tests/clients/python/seek_check.py, run by Sluice's
// integration tests as a single-file program (`java -cp '<kafka libs>/*'
// SeekCheck.java ...`: the JDK compiles it on the fly).
//
// The consumer is assigned every partition of the topic from offset 0 (no
// group membership) and, for `--seconds`, polls while seeking at random every
// few hundred milliseconds: one partition or all of them, backwards or
// forwards, never past what it knows exists. It checks that, per partition,
// each record has exactly the offset that follows the previous one, or, first
// after a seek, exactly the offset sought (a gap is a skipped record, a repeat
// a duplicate or stale data), and that a record read twice has the same value
// both times. The last `--settle-seconds` seek no more.
//
// It prints one JSON line, {seeks, records, after_seek, errors, error_count,
// seed}, and exits 1 when a record was wrong or nothing was read.
//
// With `--mode pause` it pauses instead of seeking, the Java twin of
// tests/clients/python/pause_check.py: every few hundred milliseconds a random
// set of the partitions not paused is paused, each for 0.2 to 12 seconds
// (longer than Sluice keeps a stashed answer, 10 s), and resumed when its
// time is up. A paused partition drops out of the consumer's fetches; on
// resume it must go on exactly where it stopped. It prints {pauses, resumes,
// records, after_resume, errors, error_count, seed}.
//
//   SeekCheck --bootstrap HOST:PORT --topic T [--mode seek|pause] [--seconds 30]
//             [--settle-seconds 3] [--seed N] [-X key=value ...]

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class SeekCheck {
    private final Map<Integer, Long> expected = new TreeMap<>();
    private final Map<Integer, Long> knownEnd = new HashMap<>();
    private final Map<Integer, Long> sought = new HashMap<>();
    private final Map<String, String> values = new HashMap<>();
    private final List<String> errors = new ArrayList<>();
    private long records;
    private long afterSeek;

    void record(int partition, long offset, String value) {
        long want = expected.get(partition);
        if (offset != want) {
            Long since = sought.get(partition);
            errors.add("partition " + partition + ": offset " + offset + " where " + want
                + " was due (" + (offset > want ? "gap" : "repeat") + "; "
                + (since != null ? "sought " + since : "no seek pending") + ")");
        }
        if (sought.remove(partition) != null) {
            afterSeek++;
        }
        String key = partition + "@" + offset;
        String seen = values.putIfAbsent(key, value);
        if (seen != null && !seen.equals(value)) {
            errors.add("partition " + partition + " offset " + offset + ": " + value
                + ", earlier " + seen);
        }
        expected.put(partition, offset + 1);
        knownEnd.merge(partition, offset + 1, Math::max);
        records++;
    }

    static long between(Random rng, long low, long high) {
        return low + (long) (rng.nextDouble() * (high - low + 1));
    }

    Map<Integer, Long> targets(Random rng) {
        Map<Integer, Long> targets = new TreeMap<>();
        List<Integer> parts = new ArrayList<>(expected.keySet());
        String[] kinds = {"one", "one", "all-back", "all-forward", "all-any"};
        String kind = kinds[rng.nextInt(kinds.length)];
        if (kind.equals("one")) {
            int p = parts.get(rng.nextInt(parts.size()));
            targets.put(p, between(rng, 0, Math.max(expected.get(p), knownEnd.get(p))));
            return targets;
        }
        for (int p : parts) {
            long next = expected.get(p);
            long top = Math.max(next, knownEnd.get(p));
            long low = kind.equals("all-forward") ? next : 0;
            long high = kind.equals("all-back") ? next : top;
            targets.put(p, between(rng, low, high));
        }
        return targets;
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] argv) {
        Map<String, String> args = new HashMap<>();
        Properties props = new Properties();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (argv[i].equals("-X")) {
                String[] kv = argv[i + 1].split("=", 2);
                props.put(kv[0], kv[1]);
            } else {
                args.put(argv[i], argv[i + 1]);
            }
        }
        String topic = args.get("--topic");
        double seconds = Double.parseDouble(args.getOrDefault("--seconds", "30"));
        double settle = Double.parseDouble(args.getOrDefault("--settle-seconds", "3"));
        long seed = Long.parseLong(args.getOrDefault("--seed", Long.toString(new Random().nextInt(1 << 30))));
        props.put("bootstrap.servers", args.get("--bootstrap"));
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "none");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        String mode = args.getOrDefault("--mode", "seek");
        System.exit(mode.equals("pause")
            ? pauses(topic, seconds, settle, seed, props)
            : run(topic, seconds, settle, seed, props));
    }

    /// Assigns every partition of `topic` from offset 0; returns them.
    List<TopicPartition> assignAll(KafkaConsumer<String, String> consumer, String topic) {
        List<TopicPartition> all = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
            all.add(new TopicPartition(topic, info.partition()));
        }
        Map<TopicPartition, Long> ends = consumer.endOffsets(all, Duration.ofSeconds(30));
        for (TopicPartition tp : all) {
            expected.put(tp.partition(), 0L);
            knownEnd.put(tp.partition(), ends.get(tp));
        }
        consumer.assign(all);
        consumer.seekToBeginning(all);
        return all;
    }

    /// The report's errors, at most 20, as a JSON list.
    String errorList() {
        if (records == 0) {
            errors.add("no record read");
        }
        List<String> shown = new ArrayList<>();
        for (String e : errors.subList(0, Math.min(20, errors.size()))) {
            shown.add(quote(e));
        }
        return "[" + String.join(", ", shown) + "]";
    }

    static int pauses(String topic, double seconds, double settle, long seed, Properties props) {
        Random rng = new Random(seed);
        SeekCheck check = new SeekCheck();
        long pauses = 0;
        long resumes = 0;
        long afterResume = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> all = check.assignAll(consumer, topic);
            Map<TopicPartition, Long> paused = new HashMap<>();
            java.util.Set<Integer> resumed = new java.util.HashSet<>();
            long start = System.nanoTime();
            long end = start + (long) (seconds * 1e9);
            long stopPausing = end - (long) (settle * 1e9);
            long nextPause = start + (long) ((0.3 + rng.nextDouble() * 1.2) * 1e9);
            while (System.nanoTime() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    check.record(r.partition(), r.offset(), r.value());
                    if (resumed.remove(r.partition())) {
                        afterResume++;
                    }
                }
                long now = System.nanoTime();
                List<TopicPartition> due = new ArrayList<>();
                for (Map.Entry<TopicPartition, Long> e : paused.entrySet()) {
                    if (e.getValue() <= now || now >= stopPausing) {
                        due.add(e.getKey());
                    }
                }
                if (!due.isEmpty()) {
                    consumer.resume(due);
                    for (TopicPartition tp : due) {
                        paused.remove(tp);
                        resumed.add(tp.partition());
                    }
                    resumes += due.size();
                }
                List<TopicPartition> free = new ArrayList<>(all);
                free.removeAll(paused.keySet());
                if (now >= nextPause && now < stopPausing && !free.isEmpty()) {
                    java.util.Collections.shuffle(free, rng);
                    List<TopicPartition> chosen = free.subList(0, 1 + rng.nextInt(free.size()));
                    consumer.pause(chosen);
                    for (TopicPartition tp : chosen) {
                        paused.put(tp, now + (long) ((0.2 + rng.nextDouble() * 11.8) * 1e9));
                    }
                    pauses += chosen.size();
                    nextPause = now + (long) ((0.3 + rng.nextDouble() * 1.2) * 1e9);
                }
            }
        } catch (RuntimeException e) {
            check.errors.add("consumer failed: " + e);
        }
        String errors = check.errorList();
        System.out.println("{\"pauses\": " + pauses + ", \"resumes\": " + resumes
            + ", \"records\": " + check.records + ", \"after_resume\": " + afterResume
            + ", \"errors\": " + errors + ", \"error_count\": " + check.errors.size()
            + ", \"seed\": " + seed + "}");
        return check.errors.isEmpty() ? 0 : 1;
    }

    static int run(String topic, double seconds, double settle, long seed, Properties props) {
        Random rng = new Random(seed);
        SeekCheck check = new SeekCheck();
        long seeks = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            check.assignAll(consumer, topic);
            long start = System.nanoTime();
            long end = start + (long) (seconds * 1e9);
            long stopSeeking = end - (long) (settle * 1e9);
            long nextSeek = start + (long) ((0.2 + rng.nextDouble() * 0.8) * 1e9);
            while (System.nanoTime() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    check.record(r.partition(), r.offset(), r.value());
                }
                long now = System.nanoTime();
                if (now >= nextSeek && now < stopSeeking) {
                    for (Map.Entry<Integer, Long> t : check.targets(rng).entrySet()) {
                        consumer.seek(new TopicPartition(topic, t.getKey()), t.getValue());
                        check.expected.put(t.getKey(), t.getValue());
                        check.sought.put(t.getKey(), t.getValue());
                    }
                    seeks++;
                    nextSeek = now + (long) ((0.2 + rng.nextDouble() * 0.8) * 1e9);
                }
            }
        } catch (RuntimeException e) {
            check.errors.add("consumer failed: " + e);
        }
        String errors = check.errorList();
        System.out.println("{\"seeks\": " + seeks + ", \"records\": " + check.records
            + ", \"after_seek\": " + check.afterSeek + ", \"errors\": " + errors
            + ", \"error_count\": " + check.errors.size() + ", \"seed\": " + seed + "}");
        return check.errors.isEmpty() ? 0 : 1;
    }
}
