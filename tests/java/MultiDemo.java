// A small program on the official Java client (Debian's zookeeper.jar) that
// runs multi transactions and prints one line per result, for test_zkcli.py.
//
// usage: java -cp DIR:/usr/share/java/zookeeper.jar MultiDemo HOST:PORT /root

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public class MultiDemo {
    static String describe(OpResult r) {
        if (r instanceof OpResult.CreateResult) {
            OpResult.CreateResult c = (OpResult.CreateResult) r;
            Stat s = c.getStat();
            return "create " + c.getPath() + (s == null ? "" : " czxid=" + s.getCzxid());
        } else if (r instanceof OpResult.SetDataResult) {
            return "setData version=" + ((OpResult.SetDataResult) r).getStat().getVersion();
        } else if (r instanceof OpResult.CheckResult) {
            return "check";
        } else if (r instanceof OpResult.DeleteResult) {
            return "delete";
        } else if (r instanceof OpResult.GetDataResult) {
            return "getData " + new String(((OpResult.GetDataResult) r).getData());
        } else if (r instanceof OpResult.GetChildrenResult) {
            return "getChildren " + ((OpResult.GetChildrenResult) r).getChildren();
        } else if (r instanceof OpResult.ErrorResult) {
            int err = ((OpResult.ErrorResult) r).getErr();
            return "error " + err + " " + KeeperException.Code.get(err);
        }
        return "unknown " + r;
    }

    public static void main(String[] args) throws Exception {
        String hosts = args[0];
        String root = args[1];
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(hosts, 15000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            throw new RuntimeException("could not connect to " + hosts);
        }
        byte[] none = new byte[0];
        zk.create(root, none, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);

        List<OpResult> ok = zk.multi(Arrays.asList(
                Op.create(root + "/a", "A".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.create(root + "/s-", "S".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE,
                          CreateMode.PERSISTENT_SEQUENTIAL),
                Op.setData(root + "/a", "A2".getBytes(), 0),
                Op.check(root + "/a", 1),
                Op.delete(root + "/a", 1)));
        for (OpResult r : ok) {
            System.out.println("OK " + describe(r));
        }

        try {
            zk.multi(Arrays.asList(
                    Op.create(root + "/b", none, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.check(root, 42),
                    Op.create(root + "/c", none, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
            System.out.println("UNEXPECTED the failing multi succeeded");
        } catch (KeeperException e) {
            System.out.println("FAILED " + e.code());
            for (OpResult r : e.getResults()) {
                System.out.println("FAILED " + describe(r));
            }
        }

        List<OpResult> reads = zk.multi(Arrays.asList(
                Op.getChildren(root),
                Op.getData(root + "/s-0000000001")));
        for (OpResult r : reads) {
            System.out.println("READ " + describe(r));
        }
        System.out.println("EXISTS b " + (zk.exists(root + "/b", false) != null));
        System.out.println("EXISTS c " + (zk.exists(root + "/c", false) != null));
        zk.close();
        System.out.println("DONE");
    }
}
