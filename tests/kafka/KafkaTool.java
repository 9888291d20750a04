// The client side of the Kafka tier (test_kafka.py): Admin, producer and
// consumer operations on Kafka's own client library (kafka-clients), one
// operation per run, results as plain lines on stdout.
//
// usage: java -cp CLASSES:JARS/* KafkaTool COMMAND BOOTSTRAP ARGS... [--option value]...
//
//   create-topics  B name:partitions:replicas...
//   alter-config   B topic key=value...          incremental SET
//   describe       B topic...                    "topic", "partition" and "config" lines
//   list-topics    B                             one name a line (no internal topics)
//   delete-topics  B topic...
//   cluster        B                             "controller=ID nodes=ID,ID"
//   produce        B topic --prefix P --count N --size S [--acked FILE]
//                  [--stop-file F --rate R]      the default producer (idempotent,
//                                                acks=all); with --stop-file it
//                                                produces R records/s until F exists
//   txn            B topic --prefix P --count N --size S --transactional-id T
//                                                one committed transaction (ids
//                                                P-commit-i), then one aborted (P-abort-i)
//   consume        B topic --out FILE [--isolation read_committed] [--group G]
//                                                everything up to the end offsets
//                                                seen at start; one id a line in FILE
//
// A record's key is its id; its value is value(id, size), so the consumer
// checks every record's content. Exit status: 0 done, 1 error, 2 records
// failed or were wrong, 3 deadline (--timeout seconds, default 120) passed.

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTool {
    static String bootstrap;
    static final List<String> positional = new ArrayList<>();
    static final Map<String, String> options = new HashMap<>();
    static long deadline;
    /** What the command has done so far, for the watchdog's message. */
    static volatile String progress = "nothing done";

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            if (args[i].startsWith("--")) {
                options.put(args[i].substring(2), args[++i]);
            } else {
                positional.add(args[i]);
            }
        }
        String cmd = positional.remove(0);
        bootstrap = positional.remove(0);
        long timeout = longOpt("timeout", 120);
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeout);
        // A client call may block past any deadline of its own (a producer
        // without a producer id never expires its batches): give up here.
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(timeout) + 5000);
            } catch (InterruptedException e) {
                return;
            }
            System.out.flush();
            System.err.println("KafkaTool " + cmd + ": deadline of " + timeout + "s passed; "
                + progress);
            System.err.flush();
            Runtime.getRuntime().halt(3);
        });
        watchdog.setDaemon(true);
        watchdog.start();
        int status;
        try {
            switch (cmd) {
                case "create-topics": status = createTopics(); break;
                case "alter-config": status = alterConfig(); break;
                case "describe": status = describe(); break;
                case "list-topics": status = listTopics(); break;
                case "delete-topics": status = deleteTopics(); break;
                case "cluster": status = cluster(); break;
                case "produce": status = produce(); break;
                case "txn": status = txn(); break;
                case "consume": status = consume(); break;
                default: throw new IllegalArgumentException("unknown command " + cmd);
            }
        } catch (Exception e) {
            System.out.flush();
            System.err.println("KafkaTool " + cmd + " failed: " + e);
            e.printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.err.flush();
        // Client threads (the producer's sender on a fatal error) must not
        // keep the JVM alive.
        Runtime.getRuntime().halt(status);
    }

    static long longOpt(String name, long dflt) {
        String v = options.get(name);
        return v == null ? dflt : Long.parseLong(v);
    }

    static String opt(String name) {
        String v = options.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }

    static long secondsLeft() {
        return Math.max(1, TimeUnit.NANOSECONDS.toSeconds(deadline - System.nanoTime()));
    }

    static boolean pastDeadline() {
        return System.nanoTime() - deadline > 0;
    }

    /** The value of the record with this id: the id, a colon, then letters
     *  that depend on the id, `size` bytes in all. */
    static byte[] value(String id, int size) {
        byte[] v = new byte[size];
        byte[] head = (id + ":").getBytes(StandardCharsets.US_ASCII);
        int h = id.hashCode();
        for (int i = 0; i < size; i++) {
            v[i] = i < head.length ? head[i] : (byte) ('a' + Math.floorMod(h + 7 * i, 26));
        }
        return v;
    }

    // ------------------------------------------------------------ admin

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return Admin.create(p);
    }

    static int createTopics() throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String spec : positional) {
            String[] f = spec.split(":");
            topics.add(new NewTopic(f[0], Integer.parseInt(f[1]), Short.parseShort(f[2])));
        }
        try (Admin a = admin()) {
            a.createTopics(topics).all().get(secondsLeft(), TimeUnit.SECONDS);
        }
        for (NewTopic t : topics) {
            System.out.println("created " + t.name());
        }
        return 0;
    }

    static int alterConfig() throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, positional.get(0));
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String kv : positional.subList(1, positional.size())) {
            String[] f = kv.split("=", 2);
            ops.add(new AlterConfigOp(new ConfigEntry(f[0], f[1]), AlterConfigOp.OpType.SET));
        }
        try (Admin a = admin()) {
            a.incrementalAlterConfigs(Collections.singletonMap(r, ops)).all()
                .get(secondsLeft(), TimeUnit.SECONDS);
        }
        System.out.println("altered " + r.name());
        return 0;
    }

    static String ids(Collection<Node> nodes) {
        return nodes.stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(","));
    }

    static int describe() throws Exception {
        try (Admin a = admin()) {
            Map<String, TopicDescription> d = a.describeTopics(positional).allTopicNames()
                .get(secondsLeft(), TimeUnit.SECONDS);
            List<ConfigResource> rs = new ArrayList<>();
            for (String t : positional) {
                rs.add(new ConfigResource(ConfigResource.Type.TOPIC, t));
            }
            Map<ConfigResource, Config> cs = a.describeConfigs(rs).all()
                .get(secondsLeft(), TimeUnit.SECONDS);
            for (String t : positional) {
                TopicDescription td = d.get(t);
                System.out.println("topic " + t + " partitions=" + td.partitions().size());
                for (TopicPartitionInfo p : td.partitions()) {
                    System.out.println("partition " + t + " " + p.partition()
                        + " leader=" + (p.leader() == null ? "none" : p.leader().id())
                        + " replicas=" + ids(p.replicas()) + " isr=" + ids(p.isr()));
                }
                for (ConfigEntry e : cs.get(new ConfigResource(ConfigResource.Type.TOPIC, t)).entries()) {
                    if (e.source() != ConfigEntry.ConfigSource.DEFAULT_CONFIG) {
                        System.out.println("config " + t + " " + e.name() + "=" + e.value()
                            + " source=" + e.source());
                    }
                }
            }
        }
        return 0;
    }

    static int listTopics() throws Exception {
        try (Admin a = admin()) {
            for (String t : new TreeSet<>(a.listTopics().names().get(secondsLeft(), TimeUnit.SECONDS))) {
                System.out.println(t);
            }
        }
        return 0;
    }

    static int deleteTopics() throws Exception {
        try (Admin a = admin()) {
            a.deleteTopics(positional).all().get(secondsLeft(), TimeUnit.SECONDS);
        }
        System.out.println("deleted " + String.join(" ", positional));
        return 0;
    }

    static int cluster() throws Exception {
        try (Admin a = admin()) {
            DescribeClusterResult c = a.describeCluster();
            Node controller = c.controller().get(secondsLeft(), TimeUnit.SECONDS);
            Collection<Node> nodes = c.nodes().get(secondsLeft(), TimeUnit.SECONDS);
            List<Node> sorted = new ArrayList<>(nodes);
            sorted.sort((x, y) -> Integer.compare(x.id(), y.id()));
            System.out.println("controller=" + (controller == null ? "none" : controller.id())
                + " nodes=" + ids(sorted));
        }
        return 0;
    }

    // ------------------------------------------------------------ produce

    static Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // The defaults (enable.idempotence=true, acks=all), said out loud.
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // Long enough to ride out a broker's session expiring (6 s) and a
        // new controller electing leaders; short enough to fail a test.
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        return p;
    }

    /** Writes the ids of acknowledged records, flushed every 100 ms so the
     *  test can follow progress while the producer runs. */
    static class AckLog implements AutoCloseable {
        final BufferedWriter out;
        final AtomicLong acked = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final Thread flusher;

        AckLog(String path) throws IOException {
            out = path == null ? null : Files.newBufferedWriter(Paths.get(path), StandardCharsets.US_ASCII);
            flusher = new Thread(() -> {
                while (!Thread.currentThread().isInterrupted()) {
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException e) {
                        return;
                    }
                    flush();
                }
            });
            flusher.setDaemon(true);
            flusher.start();
        }

        synchronized void ack(String id) {
            acked.incrementAndGet();
            if (out != null) {
                try {
                    out.write(id);
                    out.write('\n');
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            }
        }

        void fail(String id, Exception e) {
            long n = failed.incrementAndGet();
            if (n <= 5) {
                System.err.println("record " + id + " failed: " + e);
            }
        }

        synchronized void flush() {
            if (out != null) {
                try {
                    out.flush();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            }
        }

        @Override
        public void close() throws IOException {
            flusher.interrupt();
            flush();
            if (out != null) {
                out.close();
            }
        }
    }

    static int produce() throws Exception {
        String topic = positional.get(0);
        String prefix = opt("prefix");
        long count = longOpt("count", Long.MAX_VALUE);
        int size = (int) longOpt("size", 200);
        String stopFile = options.get("stop-file");
        long rate = longOpt("rate", 0);
        long start = System.nanoTime();
        long sent = 0;
        boolean timedOut = false;
        try (AckLog log = new AckLog(options.get("acked"));
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps())) {
            for (long i = 0; i < count; i++) {
                if (pastDeadline()) {
                    timedOut = true;
                    break;
                }
                if (stopFile != null && i % 50 == 0 && Files.exists(Paths.get(stopFile))) {
                    break;
                }
                if (rate > 0) {
                    long due = start + i * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        TimeUnit.NANOSECONDS.sleep(wait);
                    }
                }
                if (i % 1000 == 0) {
                    progress = "sent " + i + ", acked " + log.acked.get() + ", failed " + log.failed.get();
                }
                String id = prefix + "-" + i;
                byte[] key = id.getBytes(StandardCharsets.US_ASCII);
                producer.send(new ProducerRecord<>(topic, key, value(id, size)), (md, e) -> {
                    if (e == null) {
                        log.ack(id);
                    } else {
                        log.fail(id, e);
                    }
                });
                sent++;
            }
            progress = "sent " + sent + ", waiting for acks (acked " + log.acked.get()
                + ", failed " + log.failed.get() + ")";
            // flush() waits for every record to be acknowledged or to fail
            // (delivery.timeout.ms), or for the watchdog.
            producer.flush();
            System.out.println("sent=" + sent + " acked=" + log.acked.get()
                + " failed=" + log.failed.get()
                + " seconds=" + String.format("%.1f", (System.nanoTime() - start) / 1e9));
            if (timedOut) {
                System.err.println("deadline passed after sending " + sent + " records");
                return 3;
            }
            return log.failed.get() == 0 ? 0 : 2;
        }
    }

    static int txn() throws Exception {
        String topic = positional.get(0);
        String prefix = opt("prefix");
        long count = longOpt("count", 100);
        int size = (int) longOpt("size", 200);
        Properties p = producerProps();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, opt("transactional-id"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            progress = "initTransactions";
            producer.initTransactions();
            for (String outcome : new String[] {"commit", "abort"}) {
                progress = "in the " + outcome + " transaction";
                producer.beginTransaction();
                for (long i = 0; i < count; i++) {
                    String id = prefix + "-" + outcome + "-" + i;
                    producer.send(new ProducerRecord<>(topic, id.getBytes(StandardCharsets.US_ASCII),
                        value(id, size)));
                }
                // Every record is written (unacknowledged sends would make
                // the commit fail) before the transaction ends.
                producer.flush();
                if (outcome.equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                System.out.println((outcome.equals("commit") ? "committed " : "aborted ") + count);
            }
        }
        return 0;
    }

    // ------------------------------------------------------------ consume

    static int consume() throws Exception {
        String topic = positional.get(0);
        String group = options.get("group");
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, options.getOrDefault("isolation", "read_uncommitted"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        long consumed = 0;
        long bad = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
             BufferedWriter out = Files.newBufferedWriter(Paths.get(opt("out")), StandardCharsets.US_ASCII)) {
            if (group != null) {
                // a fresh group: the coordinator (on __consumer_offsets)
                // assigns, and auto.offset.reset starts at the beginning
                c.subscribe(Collections.singletonList(topic));
            } else {
                List<TopicPartition> all = new ArrayList<>();
                for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(secondsLeft()))) {
                    all.add(new TopicPartition(topic, pi.partition()));
                }
                c.assign(all);
                c.seekToBeginning(all);
            }
            int size = (int) longOpt("size", 200);
            Set<TopicPartition> parts = null;
            Map<TopicPartition, Long> end = null;
            while (true) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    String id = new String(r.key(), StandardCharsets.US_ASCII);
                    if (r.value().length != size || !Arrays.equals(r.value(), value(id, size))) {
                        bad++;
                        if (bad <= 5) {
                            System.err.println("record " + id + " at " + r.topic() + "-" + r.partition()
                                + "@" + r.offset() + " has the wrong value");
                        }
                    }
                    out.write(id);
                    out.write('\n');
                    consumed++;
                }
                progress = "consumed " + consumed + (end == null ? ", no partitions assigned yet" : "");
                if (end == null && !c.assignment().isEmpty()) {
                    parts = c.assignment();
                    // Under read_committed these are the last stable offsets.
                    end = c.endOffsets(parts, Duration.ofSeconds(secondsLeft()));
                }
                boolean done = end != null;
                if (end != null) {
                    for (TopicPartition tp : parts) {
                        if (c.position(tp) < end.get(tp)) {
                            done = false;
                        }
                    }
                }
                if (done) {
                    break;
                }
                if (pastDeadline()) {
                    Map<Integer, String> where = new TreeMap<>();
                    if (end != null) {
                        for (TopicPartition tp : parts) {
                            where.put(tp.partition(), c.position(tp) + "/" + end.get(tp));
                        }
                    }
                    System.err.println("deadline passed after " + consumed + " records; "
                        + (end == null ? "no partitions assigned" : "position/end by partition: " + where));
                    return 3;
                }
            }
            if (group != null) {
                c.commitSync(Duration.ofSeconds(secondsLeft()));
            }
        }
        System.out.println("consumed=" + consumed + " bad=" + bad);
        return bad == 0 ? 0 : 2;
    }
}
