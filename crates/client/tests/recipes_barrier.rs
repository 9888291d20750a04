//! The barrier and the double barrier against real servers.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use client::recipes::{Barrier, DoubleBarrier};
use common::{join_all, Server};
use tokio::sync::oneshot;

// In a module so that `cargo test recipes` selects them.
mod recipes {
    use super::*;
    on_every_server!(barrier_holds_until_removed, barrier_on);
    on_every_server!(double_barrier_releases_only_when_full, double_barrier_on);
}

/// Long enough for a released waiter to have noticed.
const A_WHILE: Duration = Duration::from_millis(300);

async fn barrier_on(server: &mut Server) {
    let (a, b) = (server.client().await, server.client().await);
    let barrier = Barrier::new(&a, "/barriers/simple/b");
    assert!(
        barrier.try_wait(Duration::ZERO).await.unwrap(),
        "not set yet"
    );
    barrier.set().await.unwrap();
    barrier.set().await.unwrap();
    let theirs = Barrier::new(&b, "/barriers/simple/b");
    let waiter = tokio::spawn(async move { theirs.wait().await });
    tokio::time::sleep(A_WHILE).await;
    assert!(!waiter.is_finished(), "through a raised barrier");
    assert!(!barrier.try_wait(Duration::from_millis(100)).await.unwrap());
    barrier.remove().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("released when removed")
        .unwrap()
        .unwrap();
    assert!(barrier.try_wait(Duration::ZERO).await.unwrap());
    barrier.remove().await.unwrap();
}

async fn double_barrier_on(server: &mut Server) {
    const SIZE: usize = 3;
    let dir = "/barriers/double";
    let mut clients = Vec::new();
    for _ in 0..SIZE {
        clients.push(server.client().await);
    }
    // Two rounds: the barrier is clean again once everyone has left.
    for round in 0..2 {
        eprintln!("round {round}");
        let entered = Arc::new(AtomicUsize::new(0));
        let left = Arc::new(AtomicUsize::new(0));
        let mut participants = Vec::new();
        let mut go = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            let (leave, told) = oneshot::channel::<()>();
            go.push(leave);
            let barrier = DoubleBarrier::new(c, dir, SIZE);
            let (now_in, now_out) = (entered.clone(), left.clone());
            participants.push(tokio::spawn(async move {
                barrier.enter().await.unwrap();
                now_in.fetch_add(1, SeqCst);
                told.await.unwrap();
                barrier.leave().await.unwrap();
                now_out.fetch_add(1, SeqCst);
            }));
            if i + 1 < SIZE {
                tokio::time::sleep(A_WHILE).await;
                assert_eq!(entered.load(SeqCst), 0, "in before the barrier is full");
            }
        }
        for _ in 0..100 {
            if entered.load(SeqCst) == SIZE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(entered.load(SeqCst), SIZE, "all in once full");

        let last = go.pop().unwrap();
        for leave in go {
            leave.send(()).unwrap();
        }
        tokio::time::sleep(A_WHILE).await;
        assert_eq!(left.load(SeqCst), 0, "out before everyone left");
        last.send(()).unwrap();
        for done in join_all(participants).await {
            done.unwrap();
        }
        assert_eq!(left.load(SeqCst), SIZE);
        assert!(clients[0].get_children(dir).await.unwrap().is_empty());
    }

    // A lone participant that gives up is out again.
    let lone = DoubleBarrier::new(&clients[0], dir, SIZE);
    assert!(!lone.try_enter(A_WHILE).await.unwrap());
    assert!(clients[0].get_children(dir).await.unwrap().is_empty());
    // And one cancelled while waiting is taken out in the background.
    let cancelled = tokio::time::timeout(A_WHILE, lone.enter()).await;
    assert!(cancelled.is_err());
    for _ in 0..100 {
        if clients[0].get_children(dir).await.unwrap().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the cancelled participant's node stayed");
}
