// A producer and a consumer over many partitions at once for scripts/bench's
// partitions phase (kafka-clients 4.4.0), compiled by the bench into its
// state dir.
//
//   ManyPartitions produce --bootstrap B --prefix P --per-topic K --partitions N
//                  --records R --record-size S
//   ManyPartitions consume --bootstrap B --prefix P --per-topic K --partitions N
//                  --expect R --timeout-secs T
//
// The partitions are the first N of topics P0, P1, ... of K partitions each
// (partition i is partition i % K of topic P(i / K)).
//
// produce sends R records of S bytes, record i to partition i % N, from one
// KafkaProducer (acks=1, linger.ms=5, otherwise the defaults), then flushes.
// It prints "produced R BYTES MS" (MS from the first send to the end of the
// flush) and exits 1 if any record failed.
//
// consume assigns all N partitions to one KafkaConsumer (no group; one fetch
// session per node it fetches from), checks that they hold exactly R records
// (end minus beginning offsets), reads them all from the beginning and prints
// "consumed R BYTES MS" (MS from the first poll to the last record). Exits 1
// if they hold another count, or if it has not read them all within T s.
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ManyPartitions {
  private static void fail(String message) {
    System.err.println("ManyPartitions: " + message);
    System.exit(1);
  }

  private static long num(Map<String, String> args, String name) {
    String v = args.get(name);
    if (v == null) {
      fail("missing " + name);
    }
    try {
      return Long.parseLong(v);
    } catch (NumberFormatException e) {
      fail(name + " must be a number, not " + v);
    }
    return 0;
  }

  public static void main(String[] argv) throws Exception {
    if (argv.length < 1) {
      fail("usage: ManyPartitions produce|consume --bootstrap B ...");
    }
    Map<String, String> args = new HashMap<>();
    for (int i = 1; i < argv.length; i++) {
      if (argv[i].startsWith("--") && i + 1 < argv.length) {
        args.put(argv[i], argv[++i]);
      } else {
        fail("bad argument " + argv[i]);
      }
    }
    String bootstrap = args.get("--bootstrap");
    String prefix = args.get("--prefix");
    if (bootstrap == null || prefix == null) {
      fail("need --bootstrap and --prefix");
    }
    long perTopic = num(args, "--per-topic");
    long n = num(args, "--partitions");
    List<TopicPartition> partitions = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      partitions.add(new TopicPartition(prefix + (i / perTopic), (int) (i % perTopic)));
    }
    if (argv[0].equals("produce")) {
      produce(bootstrap, partitions, num(args, "--records"), (int) num(args, "--record-size"));
    } else if (argv[0].equals("consume")) {
      consume(bootstrap, partitions, num(args, "--expect"), num(args, "--timeout-secs"));
    } else {
      fail("unknown mode " + argv[0]);
    }
  }

  private static void produce(String bootstrap, List<TopicPartition> partitions, long records, int size) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("acks", "1");
    props.put("linger.ms", "5");
    props.put("key.serializer", ByteArraySerializer.class.getName());
    props.put("value.serializer", ByteArraySerializer.class.getName());
    AtomicLong failed = new AtomicLong();
    AtomicReference<Exception> firstError = new AtomicReference<>();
    byte[] value = new byte[size];
    long start;
    long end;
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      for (TopicPartition tp : partitions) {
        producer.partitionsFor(tp.topic()); // metadata before the clock starts
      }
      start = System.nanoTime();
      for (long i = 0; i < records; i++) {
        TopicPartition tp = partitions.get((int) (i % partitions.size()));
        producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, value), (md, e) -> {
          if (e != null) {
            failed.incrementAndGet();
            firstError.compareAndSet(null, e);
          }
        });
      }
      producer.flush();
      end = System.nanoTime();
    }
    if (failed.get() > 0) {
      fail(failed.get() + " of " + records + " records failed, the first: " + firstError.get());
    }
    System.out.println("produced " + records + " " + records * size + " " + (end - start) / 1_000_000);
  }

  private static void consume(String bootstrap, List<TopicPartition> partitions, long expect, long timeoutSecs) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("enable.auto.commit", "false");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    long deadline = System.nanoTime() + timeoutSecs * 1_000_000_000L;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.assign(partitions);
      Map<TopicPartition, Long> begin = consumer.beginningOffsets(partitions);
      Map<TopicPartition, Long> endOffsets = consumer.endOffsets(partitions);
      long total = 0;
      for (TopicPartition tp : partitions) {
        total += endOffsets.get(tp) - begin.get(tp);
      }
      if (total != expect) {
        fail(partitions.size() + " partitions hold " + total + " records, not " + expect);
      }
      consumer.seekToBeginning(partitions);
      long count = 0;
      long bytes = 0;
      long start = System.nanoTime();
      long last = start;
      while (count < total) {
        if (System.nanoTime() > deadline) {
          fail("read " + count + " of " + total + " records within " + timeoutSecs + " s");
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(java.time.Duration.ofMillis(100))) {
          count++;
          bytes += r.value() == null ? 0 : r.value().length;
          last = System.nanoTime();
        }
      }
      if (count != total) {
        fail("read " + count + " records, more than the " + total + " the partitions hold");
      }
      System.out.println("consumed " + count + " " + bytes + " " + (last - start) / 1_000_000);
    }
  }
}
