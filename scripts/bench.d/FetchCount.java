// Counts the consumer Fetch requests the brokers handle, for scripts/bench:
// the sum over the given brokers' JMX ports of the Count of
// kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchConsumer
// (one meter per Fetch version, all summed).
//
//   FetchCount --ports P1,P2,P3 --window-secs W [--wait-fetching --settle-secs S --timeout-secs T]
//
// With --wait-fetching it first waits (at most T seconds) until the count
// rises, i.e. a consumer is fetching, then lets S seconds pass unmeasured.
// Then it counts over W seconds and prints "FETCHES SECONDS" (seconds as
// measured between the two readings).
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public final class FetchCount {
  private static final String PATTERN =
      "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchConsumer,*";

  private static long count(List<MBeanServerConnection> brokers) throws Exception {
    ObjectName pattern = new ObjectName(PATTERN);
    long sum = 0;
    for (MBeanServerConnection broker : brokers) {
      for (ObjectName name : broker.queryNames(pattern, null)) {
        sum += ((Number) broker.getAttribute(name, "Count")).longValue();
      }
    }
    return sum;
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    boolean waitFetching = false;
    for (int i = 0; i < argv.length; i++) {
      if (argv[i].equals("--wait-fetching")) waitFetching = true;
      else if (i + 1 < argv.length) args.put(argv[i], argv[++i]);
      else throw new IllegalArgumentException("bad argument " + argv[i]);
    }
    double window = Double.parseDouble(args.getOrDefault("--window-secs", "15"));
    double settle = Double.parseDouble(args.getOrDefault("--settle-secs", "2"));
    double timeout = Double.parseDouble(args.getOrDefault("--timeout-secs", "30"));
    List<JMXConnector> connectors = new ArrayList<>();
    List<MBeanServerConnection> brokers = new ArrayList<>();
    for (String port : args.get("--ports").split(",")) {
      JMXConnector c = JMXConnectorFactory.connect(
          new JMXServiceURL("service:jmx:rmi:///jndi/rmi://127.0.0.1:" + port + "/jmxrmi"));
      connectors.add(c);
      brokers.add(c.getMBeanServerConnection());
    }
    if (waitFetching) {
      long start = count(brokers);
      long deadline = System.nanoTime() + (long) (timeout * 1e9);
      while (count(brokers) == start) {
        if (System.nanoTime() > deadline) {
          System.err.println("FetchCount: no consumer Fetch reached the brokers within " + timeout + " s");
          System.exit(1);
        }
        Thread.sleep(50);
      }
      Thread.sleep((long) (settle * 1000));
    }
    long t0 = System.nanoTime();
    long c0 = count(brokers);
    Thread.sleep((long) (window * 1000));
    long c1 = count(brokers);
    long t1 = System.nanoTime();
    System.out.printf("%d %.3f%n", c1 - c0, (t1 - t0) / 1e9);
    for (JMXConnector c : connectors) c.close();
  }
}
