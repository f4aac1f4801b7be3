// Keep a Java consumer catching up on one partition for a while, one record
// batch per fetch, so that every fetch through Sluice is served by the part
// Sluice read ahead for it (run by Sluice's integration tests as a
// single-file program: `java -cp '<kafka libs>/*' AheadCheck.java ...`).
//
// First it writes `--records` records to partition 0 of `--topic` straight
// to the cluster (`--produce-bootstrap`), each in its own record batch. Then
// a consumer of Sluice (`--bootstrap`, with the `-X key=value` settings) is
// assigned partition 0 from offset 0 (no group membership), asks for at most
// one batch per fetch, and polls for `--seconds`, pausing `--pause-ms` after
// each poll. Every record must have the offset after the previous one.
//
// It prints one JSON line, {produced, records, polls, errors, error_count},
// and exits 1 when a record was out of order or nothing was read.
//
//   AheadCheck --bootstrap HOST:PORT --produce-bootstrap HOST:PORT --topic T
//              [--records 4000] [--seconds 25] [--pause-ms 10] [-X key=value ...]

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AheadCheck {
    static long produce(String bootstrap, String topic, long records) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "1");
        // One record per batch: a fetch of one batch brings one record.
        props.put("batch.size", "0");
        props.put("linger.ms", "0");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (long i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "ahead-" + i));
            }
            producer.flush();
        }
        return records;
    }

    public static void main(String[] argv) throws Exception {
        Properties props = new Properties();
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (argv[i].equals("-X")) {
                String[] kv = argv[i + 1].split("=", 2);
                props.put(kv[0], kv[1]);
            } else {
                args.put(argv[i], argv[i + 1]);
            }
        }
        String topic = args.get("--topic");
        long records = Long.parseLong(args.getOrDefault("--records", "4000"));
        double seconds = Double.parseDouble(args.getOrDefault("--seconds", "25"));
        long pauseMs = Long.parseLong(args.getOrDefault("--pause-ms", "10"));
        long produced = produce(args.get("--produce-bootstrap"), topic, records);

        props.put("bootstrap.servers", args.get("--bootstrap"));
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "none");
        // At most one batch per fetch (a broker always sends the first one).
        props.put("max.partition.fetch.bytes", "1");
        props.put("fetch.max.bytes", "1");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        List<String> errors = new ArrayList<>();
        long read = 0;
        long polls = 0;
        long expected = 0;
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            long end = System.nanoTime() + (long) (seconds * 1e9);
            while (System.nanoTime() < end && expected < produced) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                polls++;
                for (ConsumerRecord<String, String> r : batch) {
                    if (r.offset() != expected || !r.value().equals("ahead-" + r.offset())) {
                        errors.add("offset " + r.offset() + " (" + r.value() + ") where "
                            + expected + " was due");
                    }
                    expected = r.offset() + 1;
                    read++;
                }
                Thread.sleep(pauseMs);
            }
        }
        StringBuilder json = new StringBuilder();
        json.append("{\"produced\":").append(produced)
            .append(",\"records\":").append(read)
            .append(",\"polls\":").append(polls)
            .append(",\"error_count\":").append(errors.size())
            .append(",\"errors\":[");
        for (int i = 0; i < Math.min(errors.size(), 20); i++) {
            if (i > 0) {
                json.append(",");
            }
            json.append("\"").append(errors.get(i).replace("\"", "'")).append("\"");
        }
        json.append("]}");
        System.out.println(json);
        System.exit(errors.isEmpty() && read > 0 ? 0 : 1);
    }
}
