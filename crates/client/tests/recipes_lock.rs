//! The lock recipes against real servers: the exclusive lock under
//! contention and when its holder's session ends, the read-write lock, the
//! semaphore.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use client::recipes::{Lock, ReadWriteLock, Semaphore};
use client::{Client, ConnectOptions, CreateMode, Error, SessionState};
use common::{join_all, Proxy, Server};

// In a module so that `cargo test recipes` selects them.
mod recipes {
    use super::*;
    on_every_server!(
        lock_excludes_under_contention,
        lock_contention_on,
        Duration::from_secs(120)
    );
    on_every_server!(
        lock_passes_on_when_the_holder_goes,
        lock_holder_goes_on,
        Duration::from_secs(120)
    );
    on_every_server!(
        lock_passes_on_when_the_holder_expires,
        lock_expiry_on,
        Duration::from_secs(120)
    );
    on_every_server!(
        lock_survives_connection_loss,
        lock_connection_loss_on,
        Duration::from_secs(120)
    );
    on_every_server!(
        read_write_lock_shares_and_excludes,
        rwlock_on,
        Duration::from_secs(120)
    );
    on_every_server!(
        semaphore_never_exceeds_its_leases,
        semaphore_on,
        Duration::from_secs(120)
    );
}

/// Polls `children` of `dir` until there are `n` (background deletes take a
/// round trip or two).
async fn wait_children(client: &Client, dir: &str, n: usize) {
    for _ in 0..100 {
        if client.get_children(dir).await.unwrap().len() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{dir} has {:?}, not {n} children",
        client.get_children(dir).await
    );
}

async fn lock_contention_on(server: &mut Server) {
    const CLIENTS: usize = 4;
    const ROUNDS: usize = 8;
    let observer = server.client().await;
    observer
        .create("/count", b"0", CreateMode::Persistent)
        .await
        .unwrap();
    let held = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..CLIENTS {
        let c = server.client().await;
        let held = held.clone();
        workers.push(async move {
            let lock = Lock::new(&c, "/locks/count");
            for _ in 0..ROUNDS {
                let guard = lock.acquire().await.unwrap();
                assert!(!held.swap(true, SeqCst), "two holders at once");
                // An unprotected read-modify-write: only the lock keeps
                // the increments from overwriting each other.
                let (data, _) = c.get_data("/count").await.unwrap();
                let n: usize = std::str::from_utf8(&data.unwrap())
                    .unwrap()
                    .parse()
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                c.set_data("/count", (n + 1).to_string().as_bytes(), None)
                    .await
                    .unwrap();
                held.store(false, SeqCst);
                guard.release().await.unwrap();
            }
            c.close().await;
        });
    }
    join_all(workers).await;
    let (data, _) = observer.get_data("/count").await.unwrap();
    assert_eq!(data.unwrap(), (CLIENTS * ROUNDS).to_string().as_bytes());
    assert!(observer
        .get_children("/locks/count")
        .await
        .unwrap()
        .is_empty());
}

async fn lock_holder_goes_on(server: &mut Server) {
    // The holder closes without releasing: its node goes with its session,
    // and the waiter gets the lock.
    let a = server.client().await;
    let b = server.client().await;
    let held_by_a = Lock::new(&a, "/locks/d").acquire().await.unwrap();
    let lock_b = Lock::new(&b, "/locks/d");
    let waiter = tokio::spawn(async move { lock_b.acquire().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "acquired while held");
    a.close().await;
    let held_by_b = waiter.await.unwrap().unwrap();
    assert!(held_by_b.is_held().await.unwrap());
    assert_eq!(held_by_a.is_held().await.unwrap_err(), Error::Closed);
    drop(held_by_a);

    // A try that times out leaves no node behind.
    let c = server.client().await;
    let lock_c = Lock::new(&c, "/locks/d");
    let late = lock_c
        .try_acquire(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(late.is_none());
    assert!(lock_c.try_acquire(Duration::ZERO).await.unwrap().is_none());
    assert_eq!(c.get_children("/locks/d").await.unwrap().len(), 1);

    // Nor does an acquire that is cancelled while it waits.
    let cancelled = tokio::time::timeout(Duration::from_millis(200), lock_c.acquire()).await;
    assert!(cancelled.is_err());
    wait_children(&c, "/locks/d", 1).await;

    // Dropping a guard releases in the background.
    drop(held_by_b);
    let held_by_c = lock_c
        .try_acquire(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the dropped guard released the lock");
    held_by_c.release().await.unwrap();
    wait_children(&c, "/locks/d", 0).await;
}

async fn lock_expiry_on(server: &mut Server) {
    // The holder is cut off from the server (through a proxy) with a short
    // session: the server expires it, the waiter gets the lock, and the old
    // holder is told once it is back.
    let proxy = Proxy::start(server.port).await;
    let a = Client::connect(
        &proxy.connect_string(),
        ConnectOptions::new().session_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let held_by_a = Lock::new(&a, "/locks/e").acquire().await.unwrap();
    let b = server.client().await;
    let lock_b = Lock::new(&b, "/locks/e");
    let waiter = tokio::spawn(async move { lock_b.acquire().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "acquired while held");

    proxy.cut();
    let held_by_b = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter gets the lock once the holder's session expires")
        .unwrap()
        .unwrap();
    proxy.restore();
    assert!(matches!(
        held_by_a.is_held().await.unwrap_err(),
        Error::SessionExpired { .. }
    ));
    assert!(matches!(
        held_by_a.release().await.unwrap_err(),
        Error::SessionExpired { .. }
    ));
    assert!(held_by_b.is_held().await.unwrap());
    held_by_b.release().await.unwrap();
}

async fn lock_connection_loss_on(server: &mut Server) {
    // A waiter cut off while it waits: the release it missed fires its
    // watch once it is back, and it gets the lock.
    let proxy = Proxy::start(server.port).await;
    let a = server.client().await;
    let b = server
        .client_with(&proxy.connect_string(), ConnectOptions::new())
        .await;
    let held_by_a = Lock::new(&a, "/locks/cl").acquire().await.unwrap();
    let lock_b = Lock::new(&b, "/locks/cl");
    let waiter = tokio::spawn(async move { lock_b.acquire().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut states = b.state_changes();
    proxy.cut();
    assert_eq!(states.next().await, Some(SessionState::Disconnected));
    held_by_a.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "acquired while disconnected");
    proxy.restore();
    let held_by_b = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter gets the lock once reconnected")
        .unwrap()
        .unwrap();
    assert_eq!(a.get_children("/locks/cl").await.unwrap().len(), 1);

    // The connection breaks with the create in flight: the server (frozen
    // meanwhile) has it but has not answered. Back, the acquirer finds its
    // node by its guid if the create was applied, creates it if not, and
    // either way ends up with exactly one node, holding the lock. (Both
    // Paddock and ZooKeeper apply a request read before the connection
    // closed, so this takes the "found by its guid" path.)
    held_by_b.release().await.unwrap();
    assert_eq!(b.state(), SessionState::Connected);
    let mut states = b.state_changes();
    server.pause();
    let lock_b = Lock::new(&b, "/locks/cl");
    let acquiring = tokio::spawn(async move { lock_b.acquire().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.cut();
    assert_eq!(states.next().await, Some(SessionState::Disconnected));
    server.resume();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.restore();
    let held_by_b = tokio::time::timeout(Duration::from_secs(20), acquiring)
        .await
        .expect("acquired once reconnected")
        .unwrap()
        .unwrap();
    let nodes = a.get_children("/locks/cl").await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(format!("/locks/cl/{}", nodes[0]), held_by_b.path());
    held_by_b.release().await.unwrap();
    assert!(a.get_children("/locks/cl").await.unwrap().is_empty());
}

async fn rwlock_on(server: &mut Server) {
    let (r1, r2, w, r3) = (
        server.client().await,
        server.client().await,
        server.client().await,
        server.client().await,
    );
    let dir = "/locks/rw";
    // Readers share.
    let read1 = ReadWriteLock::new(&r1, dir).acquire_read().await.unwrap();
    let read2 = ReadWriteLock::new(&r2, dir)
        .try_acquire_read(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a second reader shares the lock");
    // A writer waits for them.
    let rw_w = ReadWriteLock::new(&w, dir);
    assert!(rw_w
        .try_acquire_write(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    let writer = tokio::spawn(async move { rw_w.acquire_write().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A reader after a waiting writer queues behind it.
    let rw_r3 = ReadWriteLock::new(&r3, dir);
    assert!(rw_r3
        .try_acquire_read(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    let reader3 = tokio::spawn(async move { rw_r3.acquire_read().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    read1.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writer.is_finished(), "the writer waits for every reader");
    read2.release().await.unwrap();
    let write = writer.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!reader3.is_finished(), "a reader waits for the writer");
    write.release().await.unwrap();
    reader3.await.unwrap().unwrap().release().await.unwrap();

    // Under contention: a writer is alone, readers only share with readers.
    let readers = Arc::new(AtomicUsize::new(0));
    let writing = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for i in 0..4 {
        let c = server.client().await;
        let (readers, writing) = (readers.clone(), writing.clone());
        workers.push(async move {
            let lock = ReadWriteLock::new(&c, "/locks/rw2");
            for round in 0..5 {
                if (i + round) % 3 == 0 {
                    let guard = lock.acquire_write().await.unwrap();
                    assert!(!writing.swap(true, SeqCst), "two writers at once");
                    assert_eq!(readers.load(SeqCst), 0, "a writer among readers");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    writing.store(false, SeqCst);
                    guard.release().await.unwrap();
                } else {
                    let guard = lock.acquire_read().await.unwrap();
                    readers.fetch_add(1, SeqCst);
                    assert!(!writing.load(SeqCst), "a reader while writing");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    readers.fetch_sub(1, SeqCst);
                    guard.release().await.unwrap();
                }
            }
            c.close().await;
        });
    }
    join_all(workers).await;
}

async fn semaphore_on(server: &mut Server) {
    const LEASES: usize = 2;
    let dir = "/semaphores/s";
    // Two leases go, the third waits until one comes back.
    let (a, b, c) = (
        server.client().await,
        server.client().await,
        server.client().await,
    );
    let lease_a = Semaphore::new(&a, dir, LEASES).acquire().await.unwrap();
    let lease_b = Semaphore::new(&b, dir, LEASES).acquire().await.unwrap();
    let sem_c = Semaphore::new(&c, dir, LEASES);
    assert!(sem_c
        .try_acquire(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let waiter = tokio::spawn(async move { sem_c.acquire().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "a third lease out of two");
    lease_a.release().await.unwrap();
    let lease_c = waiter.await.unwrap().unwrap();
    assert!(lease_c.is_held().await.unwrap());
    // A holder that goes away gives its lease back.
    b.close().await;
    drop(lease_b);
    let again = Semaphore::new(&a, dir, LEASES)
        .try_acquire(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the closed holder's lease is free");
    again.release().await.unwrap();
    lease_c.release().await.unwrap();

    // Under contention: never more than LEASES holders.
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..5 {
        let c = server.client().await;
        let (holders, most) = (holders.clone(), most.clone());
        workers.push(async move {
            let semaphore = Semaphore::new(&c, "/semaphores/busy", LEASES);
            for _ in 0..4 {
                let lease = semaphore.acquire().await.unwrap();
                let now = holders.fetch_add(1, SeqCst) + 1;
                assert!(now <= LEASES, "{now} holders of {LEASES} leases");
                most.fetch_max(now, SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                holders.fetch_sub(1, SeqCst);
                lease.release().await.unwrap();
            }
            c.close().await;
        });
    }
    join_all(workers).await;
    eprintln!("at most {} holders at once", most.load(SeqCst));
    assert_eq!(
        a.get_children("/semaphores/busy/leases")
            .await
            .unwrap()
            .len(),
        0
    );
}
