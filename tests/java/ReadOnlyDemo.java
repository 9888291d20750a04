// A client of the official Java client (Debian's zookeeper.jar) that can
// take a read-only server (canBeReadOnly), for test_read_only.py. It
// prints a line per step: connected read-only, a read, a write refused
// with NotReadOnly, then, once a quorum is back, connected read-write and
// a write that goes through.
//
// usage: java -cp DIR:/usr/share/java/zookeeper.jar ReadOnlyDemo HOST:PORT PATH

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public class ReadOnlyDemo {
    public static void main(String[] args) throws Exception {
        CountDownLatch readOnly = new CountDownLatch(1);
        CountDownLatch readWrite = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 4000, event -> {
            if (event.getState() == KeeperState.ConnectedReadOnly) {
                readOnly.countDown();
            } else if (event.getState() == KeeperState.SyncConnected) {
                readWrite.countDown();
            }
        }, true);
        String path = args[1];
        if (!readOnly.await(30, TimeUnit.SECONDS)) {
            System.out.println("NEVER READ-ONLY");
            System.exit(1);
        }
        System.out.println("CONNECTED READ-ONLY");
        System.out.println("READ " + new String(zk.getData(path, false, null), "UTF-8"));
        try {
            zk.create(path + "-refused", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            System.out.println("WRITTEN WHILE READ-ONLY");
        } catch (KeeperException.NotReadOnlyException e) {
            System.out.println("REFUSED NOTREADONLY");
        }
        System.out.flush();
        if (!readWrite.await(90, TimeUnit.SECONDS)) {
            System.out.println("NEVER READ-WRITE");
            System.exit(1);
        }
        System.out.println("CONNECTED READ-WRITE");
        zk.create(path + "-after", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        System.out.println("CREATED " + path + "-after");
        zk.close();
    }
}
