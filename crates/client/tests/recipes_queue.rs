//! The queue recipes against real servers.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use client::recipes::{PriorityQueue, Queue};
use common::{join_all, Server};

// In a module so that `cargo test recipes` selects them.
mod recipes {
    use super::*;
    on_every_server!(queue_delivers_each_item_once_in_order, queue_on);
    on_every_server!(priority_queue_orders_by_priority, priority_on);
}

async fn queue_on(server: &mut Server) {
    const ITEMS: usize = 40;
    const CONSUMERS: usize = 3;
    let dir = "/queues/q";
    let producer = server.client().await;
    let queue = Queue::new(&producer, dir);
    assert_eq!(queue.try_take(Duration::ZERO).await.unwrap(), None);
    assert!(queue.is_empty().await.unwrap());

    // The consumers start on an empty queue and race for every item.
    let taken = Arc::new(AtomicUsize::new(0));
    let mut consumers = Vec::new();
    for _ in 0..CONSUMERS {
        let c = server.client().await;
        let taken = taken.clone();
        consumers.push(async move {
            let queue = Queue::new(&c, dir);
            let mut got = Vec::new();
            while taken.load(SeqCst) < ITEMS {
                let item = queue.try_take(Duration::from_millis(200)).await.unwrap();
                if let Some(item) = item {
                    taken.fetch_add(1, SeqCst);
                    got.push(
                        std::str::from_utf8(&item)
                            .unwrap()
                            .parse::<usize>()
                            .unwrap(),
                    );
                }
            }
            c.close().await;
            got
        });
    }
    let produce = async {
        for i in 0..ITEMS {
            queue.offer(i.to_string().as_bytes()).await.unwrap();
        }
    };
    let (_, got) = tokio::join!(produce, join_all(consumers));
    let mut all: Vec<usize> = Vec::new();
    for (consumer, items) in got.iter().enumerate() {
        eprintln!("consumer {consumer} took {} items", items.len());
        assert!(
            items.windows(2).all(|w| w[0] < w[1]),
            "out of order: {items:?}"
        );
        all.extend(items);
    }
    all.sort();
    assert_eq!(
        all,
        (0..ITEMS).collect::<Vec<_>>(),
        "each item exactly once"
    );
    assert_eq!(queue.len().await.unwrap(), 0);

    // A blocking take waits for the next offer; the receipts are gone.
    let c = server.client().await;
    let theirs = Queue::new(&c, dir);
    let waiter = tokio::spawn(async move { theirs.take().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "took from an empty queue");
    queue.offer(b"late").await.unwrap();
    let item = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the offer")
        .unwrap()
        .unwrap();
    assert_eq!(&item[..], b"late");
    for _ in 0..100 {
        if producer.get_children(dir).await.unwrap().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "left in the queue: {:?}",
        producer.get_children(dir).await.unwrap()
    );
}

async fn priority_on(server: &mut Server) {
    let c = server.client().await;
    let queue = PriorityQueue::new(&c, "/queues/p");
    for (data, priority) in [("c1", 2), ("a1", 0), ("b1", 1), ("a2", 0), ("c2", 2)] {
        queue.offer(data.as_bytes(), priority).await.unwrap();
    }
    assert_eq!(queue.len().await.unwrap(), 5);
    let mut order = Vec::new();
    while let Some(item) = queue.try_take(Duration::ZERO).await.unwrap() {
        order.push(String::from_utf8(item.to_vec()).unwrap());
    }
    assert_eq!(order, ["a1", "a2", "b1", "c1", "c2"]);
    let other = server.client().await;
    let theirs = PriorityQueue::new(&other, "/queues/p");
    let waiter = tokio::spawn(async move { theirs.take().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    queue.offer(b"x", 7).await.unwrap();
    let item = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the offer")
        .unwrap()
        .unwrap();
    assert_eq!(&item[..], b"x");
}
