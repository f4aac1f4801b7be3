// Share consumers (KIP-932) for scripts/bench's share phase (kafka-clients
// 4.4.0), compiled by the bench into its state dir. The group's
// share.auto.offset.reset is set to earliest first, on --setup-bootstrap (the
// brokers), so that what was produced before the member joined is delivered.
//
//   ShareBench --mode throughput --bootstrap B --setup-bootstrap D --topic T
//              --group G --records N --timeout-secs S
//     One KafkaShareConsumer (implicit acknowledgement: each poll accepts
//     the records of the one before) reads the N records of T. Prints
//     "RESULT throughput N SECONDS BYTES": from its first record to the
//     N-th distinct one (partition and offset), value bytes.
//
//   ShareBench --mode tail --bootstrap B --setup-bootstrap D --topic T
//              --group G --rate R --warmup-secs W --seconds S --timeout-secs L
//     One KafkaProducer (linger.ms=0, acks=1, default settings otherwise)
//     and one KafkaShareConsumer in this JVM, both on B: the producer sends
//     R records/s round-robin over the topic's partitions for W + S seconds,
//     each value its send time; the consumer takes receive time minus send
//     time of the last S seconds' records. Prints "RESULT tail R P50_MS
//     P99_MS MAX_MS N" once every counted record arrived; exits 1 if one
//     is missing at the timeout.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ShareBench {
  static final Map<String, String> ARGS = new HashMap<>();

  static String arg(String name) {
    String v = ARGS.get(name);
    if (v == null) {
      throw new IllegalArgumentException("missing --" + name);
    }
    return v;
  }

  public static void main(String[] argv) throws Exception {
    for (int i = 0; i + 1 < argv.length; i += 2) {
      ARGS.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    }
    Properties p = new Properties();
    p.put("bootstrap.servers", arg("setup-bootstrap"));
    try (Admin admin = Admin.create(p)) {
      ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, arg("group"));
      admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
          new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
          .all().get();
    }
    int rc = "throughput".equals(arg("mode")) ? throughput() : tail();
    System.exit(rc);
  }

  static KafkaShareConsumer<byte[], byte[]> consumer() {
    Properties p = new Properties();
    p.put("bootstrap.servers", arg("bootstrap"));
    p.put("group.id", arg("group"));
    KafkaShareConsumer<byte[], byte[]> c =
        new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    c.subscribe(List.of(arg("topic")));
    return c;
  }

  static int throughput() {
    long records = Long.parseLong(arg("records"));
    long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(arg("timeout-secs"));
    Set<Long> seen = new HashSet<>();
    long bytes = 0;
    long first = 0;
    long last = 0;
    try (KafkaShareConsumer<byte[], byte[]> c = consumer()) {
      while (seen.size() < records && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
          if (first == 0) {
            first = System.nanoTime();
          }
          if (seen.add(((long) r.partition() << 40) | r.offset())) {
            bytes += r.value() == null ? 0 : r.value().length;
          }
        }
        last = System.nanoTime();
      }
      c.commitSync(Duration.ofSeconds(30));
    }
    if (seen.size() < records) {
      System.out.println("only " + seen.size() + " of " + records + " records in time");
      return 1;
    }
    System.out.printf("RESULT throughput %d %.3f %d%n", records, (last - first) / 1e9, bytes);
    return 0;
  }

  static long epochNanos() {
    java.time.Instant now = java.time.Instant.now();
    return now.getEpochSecond() * 1_000_000_000L + now.getNano();
  }

  static int tail() throws Exception {
    int rate = Integer.parseInt(arg("rate"));
    int warmup = Integer.parseInt(arg("warmup-secs"));
    int seconds = Integer.parseInt(arg("seconds"));
    long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(arg("timeout-secs"));
    Map<Long, Long> latencyNs = new ConcurrentHashMap<>();
    AtomicBoolean stop = new AtomicBoolean();
    Thread consumer = new Thread(() -> {
      try (KafkaShareConsumer<byte[], byte[]> c = consumer()) {
        while (!stop.get()) {
          for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
            long now = epochNanos();
            String[] v = new String(r.value()).split(" ");
            if (v[0].equals("m")) {
              latencyNs.putIfAbsent(Long.parseLong(v[1]), now - Long.parseLong(v[2]));
            }
          }
        }
      }
    });
    consumer.start();
    Properties p = new Properties();
    p.put("bootstrap.servers", arg("bootstrap"));
    p.put("linger.ms", "0");
    p.put("acks", "1");
    long counted = (long) rate * seconds;
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      int partitions = producer.partitionsFor(arg("topic")).size();
      long total = (long) rate * (warmup + seconds);
      long start = System.nanoTime();
      long seq = 0;
      for (long i = 0; i < total; i++) {
        long due = start + i * 1_000_000_000L / rate;
        long wait = due - System.nanoTime();
        if (wait > 0) {
          Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        }
        boolean measured = i >= (long) rate * warmup;
        String value = (measured ? "m " + seq++ : "w " + i) + " " + epochNanos();
        producer.send(new ProducerRecord<>(arg("topic"), (int) (i % partitions), null, value));
      }
      producer.flush();
    }
    while (latencyNs.size() < counted && System.currentTimeMillis() < deadline) {
      Thread.sleep(50);
    }
    stop.set(true);
    consumer.join(60_000);
    if (latencyNs.size() < counted) {
      System.out.println("only " + latencyNs.size() + " of " + counted + " counted records arrived");
      return 1;
    }
    List<Long> sorted = new ArrayList<>(latencyNs.values());
    Collections.sort(sorted);
    double p50 = sorted.get(sorted.size() / 2) / 1e6;
    double p99 = sorted.get((int) Math.min(sorted.size() - 1, Math.ceil(sorted.size() * 0.99) - 1)) / 1e6;
    double max = sorted.get(sorted.size() - 1) / 1e6;
    System.out.printf("RESULT tail %d %.1f %.1f %.1f %d%n", rate, p50, p99, max, sorted.size());
    return 0;
  }
}
