// A tailing Kafka consumer for scripts/bench (kafka-clients 4.4.0), compiled by
// the bench into its state dir. Default consumer settings: only
// bootstrap.servers, group.id, auto.offset.reset=latest and the (required)
// deserializers are set.
//
//   TailConsumer --bootstrap B --topic T --group G --partitions N --out FILE
//                --timeout-secs S [--idle --stop-file F]
//
// Prints "assigned N" on stdout once it holds all N partitions (and knows its
// position in each). Values are "PHASE SEQ SEND_NS" (see tail.py): for each
// PHASE=m record it writes "SEQ PARTITION LATENCY_NS" to FILE (receive time
// minus the send timestamp, both wall clock); it exits 0 once every partition
// brought an end marker (PHASE=e). With --idle it expects no records at all
// and exits 0 when the stop file appears. Exits 1 on timeout or any failure.
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class TailConsumer {
  private static long epochNanos() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000_000L + now.getNano();
  }

  private static void fail(String message) {
    System.err.println("TailConsumer: " + message);
    System.exit(1);
  }

  public static void main(String[] argv) throws IOException {
    Map<String, String> args = new HashMap<>();
    boolean idle = false;
    for (int i = 0; i < argv.length; i++) {
      if (argv[i].equals("--idle")) {
        idle = true;
      } else if (argv[i].startsWith("--") && i + 1 < argv.length) {
        args.put(argv[i], argv[++i]);
      } else {
        fail("bad argument " + argv[i]);
      }
    }
    for (String required : List.of("--bootstrap", "--topic", "--group", "--partitions", "--out", "--timeout-secs")) {
      if (!args.containsKey(required)) fail("missing " + required);
    }
    if (idle && !args.containsKey("--stop-file")) fail("--idle needs --stop-file");
    String topic = args.get("--topic");
    int partitions = Integer.parseInt(args.get("--partitions"));
    long deadline = System.nanoTime() + Long.parseLong(args.get("--timeout-secs")) * 1_000_000_000L;
    Path stopFile = idle ? Path.of(args.get("--stop-file")) : null;

    Properties props = new Properties();
    props.put("bootstrap.servers", args.get("--bootstrap"));
    props.put("group.id", args.get("--group"));
    props.put("auto.offset.reset", "latest");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());

    Set<TopicPartition> assigned = new HashSet<>();
    Set<Integer> ended = new HashSet<>();
    boolean[] ready = {false};
    long measured = 0;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        BufferedWriter out = new BufferedWriter(new FileWriter(args.get("--out"), StandardCharsets.UTF_8))) {
      consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
          assigned.removeAll(parts);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
          assigned.addAll(parts);
          if (!ready[0] && assigned.size() == partitions) {
            // Resolve auto.offset.reset now, so that nothing sent after
            // "assigned" is skipped.
            for (TopicPartition tp : assigned) consumer.position(tp, Duration.ofSeconds(30));
            ready[0] = true;
            System.out.println("assigned " + partitions);
            System.out.flush();
          }
        }
      });
      while (true) {
        if (System.nanoTime() > deadline) {
          fail("timed out: assigned=" + assigned.size() + "/" + partitions + " ready=" + ready[0]
              + " measured=" + measured + " end markers=" + ended.size() + "/" + partitions);
        }
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
        for (ConsumerRecord<byte[], byte[]> r : records) {
          long now = epochNanos();
          if (idle) fail("idle topic " + topic + " got a record at partition " + r.partition());
          String[] f = new String(r.value(), StandardCharsets.UTF_8).split(" ");
          if (f.length != 3) fail("unexpected value on partition " + r.partition());
          if (f[0].equals("e")) {
            ended.add(r.partition());
          } else if (f[0].equals("m")) {
            out.write(f[1] + " " + r.partition() + " " + (now - Long.parseLong(f[2])) + "\n");
            measured++;
          }
        }
        if (idle ? Files.exists(stopFile) : ended.size() == partitions) break;
      }
    }
    System.out.println("done measured=" + measured);
  }
}
