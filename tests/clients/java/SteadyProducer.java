// A producer that sends one record at a time, steadily, and reports each
// outcome: Sluice's re-authentication tests (crates/sluice/tests/reauth.rs)
// run it as a single-file program (`java -cp '<kafka libs>/*'
// SteadyProducer.java ...`: the JDK compiles it on the fly) to watch one
// long-lived connection through several SASL session lifetimes (KIP-368),
// and see it lose access once its user's password changed.
//
// Every `--interval-ms` it sends one record to `--topic` and waits for the
// answer (at most `--wait-ms`), then prints one JSON line:
//   {"event":"sent","n":N,"ms":T}                          acknowledged
//   {"event":"failed","n":N,"ms":T,"error":"Class","message":"...","auth":B}
// where T is milliseconds since start and `auth` says whether the error (or
// one of its causes) is an authentication failure. It keeps going after a
// failure (its next sends then show whether it can reconnect), until killed.
//
//   SteadyProducer --bootstrap HOST:PORT --topic T [--interval-ms 200]
//                  [--wait-ms 5000] [-X key=value ...]

import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.serialization.StringSerializer;

public class SteadyProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        long intervalMs = 200;
        long waitMs = 5000;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--topic" -> topic = args[++i];
                case "--interval-ms" -> intervalMs = Long.parseLong(args[++i]);
                case "--wait-ms" -> waitMs = Long.parseLong(args[++i]);
                case "-X" -> {
                    String[] kv = args[++i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || topic == null) {
            throw new IllegalArgumentException("--bootstrap and --topic are required");
        }
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.putIfAbsent("acks", "all");
        props.putIfAbsent("linger.ms", "0");
        props.putIfAbsent("max.block.ms", String.valueOf(waitMs));
        props.putIfAbsent("request.timeout.ms", String.valueOf(waitMs));
        props.putIfAbsent("delivery.timeout.ms", String.valueOf(waitMs));
        long start = System.nanoTime();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (long n = 0; ; n++) {
                long ms = (System.nanoTime() - start) / 1_000_000;
                try {
                    producer.send(new ProducerRecord<>(topic, "k" + (n % 10), "v" + n))
                        .get(waitMs + 1000, TimeUnit.MILLISECONDS);
                    System.out.println("{\"event\":\"sent\",\"n\":" + n + ",\"ms\":" + ms + "}");
                } catch (Exception e) {
                    Throwable cause = e.getCause() != null ? e.getCause() : e;
                    boolean auth = false;
                    for (Throwable t = e; t != null; t = t.getCause()) {
                        auth |= t instanceof AuthenticationException;
                    }
                    System.out.println("{\"event\":\"failed\",\"n\":" + n + ",\"ms\":" + ms
                        + ",\"error\":\"" + cause.getClass().getSimpleName()
                        + "\",\"message\":\"" + escape(String.valueOf(cause.getMessage()))
                        + "\",\"auth\":" + auth + "}");
                }
                System.out.flush();
                Thread.sleep(intervalMs);
            }
        }
    }

    static String escape(String s) {
        StringBuilder out = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(' ');
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
