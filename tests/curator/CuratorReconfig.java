// Apache Curator reconfiguring an ensemble as an application does: as the
// superuser, one server leaves and joins again, and Curator's ensemble
// tracker (on by default) follows the configuration into its connection
// string. Prints one line per step for tests/e2e/test_reconfig.py.
//
// java CuratorReconfig CONNECT SUPER_PASSWORD LEAVING_ID JOINING_LINE

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public class CuratorReconfig {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        byte[] superUser = ("super:" + args[1]).getBytes(StandardCharsets.UTF_8);
        String leaving = args[2];
        String joining = args[3];
        try (CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .authorization("digest", superUser)
                .ensembleTracker(true)
                .build()) {
            client.start();
            if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not connected within 30 s");
            }
            Stat stat = new Stat();
            String config = text(client.getConfig().storingStatIn(stat).forEnsemble());
            System.out.println("config " + servers(config) + " version "
                    + Long.toHexString(stat.getMzxid()));

            Stat left = new Stat();
            String afterLeave = text(client.reconfig().leaving(leaving)
                    .storingStatIn(left).fromConfig(stat.getMzxid()).forEnsemble());
            System.out.println("left " + servers(afterLeave) + " version "
                    + Long.toHexString(left.getMzxid()));

            Stat joined = new Stat();
            String afterJoin = text(client.reconfig().joining(joining)
                    .storingStatIn(joined).fromConfig(left.getMzxid()).forEnsemble());
            System.out.println("joined " + servers(afterJoin) + " version "
                    + Long.toHexString(joined.getMzxid()));

            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            String tracked = client.getZookeeperClient().getCurrentConnectionString();
            while (tracked.split(",").length < 3 && System.nanoTime() < deadline) {
                Thread.sleep(50);
                tracked = client.getZookeeperClient().getCurrentConnectionString();
            }
            System.out.println("tracked " + tracked);
        }
    }

    private static String text(byte[] data) {
        return new String(data, StandardCharsets.UTF_8);
    }

    /** The server ids a configuration lists, in its order. */
    private static String servers(String config) {
        StringBuilder ids = new StringBuilder();
        for (String line : config.split("\n")) {
            if (line.startsWith("server.")) {
                if (ids.length() > 0) {
                    ids.append(",");
                }
                ids.append(line.substring("server.".length(), line.indexOf('=')));
            }
        }
        return ids.toString();
    }
}
