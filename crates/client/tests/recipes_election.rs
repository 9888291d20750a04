//! Leader election and group membership against real servers.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use client::recipes::{GroupMembership, Leader, LeaderChanges, LeaderElection, MemberChanges};
use client::Error;
use common::Server;
use tokio::sync::mpsc;

// In a module so that `cargo test recipes` selects them.
mod recipes {
    use super::*;
    on_every_server!(one_leader_at_a_time, election_on);
    on_every_server!(group_members_come_and_go, group_on);
}

/// Each change must come soon.
const SOON: Duration = Duration::from_secs(10);

async fn next_leader(changes: &mut LeaderChanges) -> Option<Leader> {
    tokio::time::timeout(SOON, changes.next())
        .await
        .expect("a leader change in time")
        .unwrap()
}

async fn next_members(changes: &mut MemberChanges) -> Vec<String> {
    tokio::time::timeout(SOON, changes.next())
        .await
        .expect("a membership change in time")
        .unwrap()
}

async fn election_on(server: &mut Server) {
    let dir = "/election";
    let observer = server.client().await;
    let election = LeaderElection::new(&observer, dir);
    let mut changes = election.changes();
    assert_eq!(next_leader(&mut changes).await, None);
    assert_eq!(election.leader().await.unwrap(), None);

    // Three candidates campaign at once; each reports when it leads.
    let leading = Arc::new(AtomicBool::new(false));
    let (led, mut leaders) = mpsc::unbounded_channel();
    let mut candidates = Vec::new();
    for i in 0..3 {
        let c = server.client().await;
        candidates.push(c.clone());
        let (leading, led) = (leading.clone(), led.clone());
        tokio::spawn(async move {
            let election = LeaderElection::new(&c, dir);
            let leadership = election.campaign(format!("c{i}").as_bytes()).await;
            let leadership = leadership.unwrap();
            assert!(!leading.swap(true, SeqCst), "two leaders at once");
            led.send((i, leadership)).unwrap();
        });
    }
    for round in 0..3 {
        let (i, leadership) = tokio::time::timeout(SOON, leaders.recv())
            .await
            .expect("a new leader in time")
            .unwrap();
        let leader = next_leader(&mut changes).await.expect("a leader");
        assert_eq!(&leader.data[..], format!("c{i}").as_bytes());
        assert_eq!(leader.session_id, candidates[i].session_id());
        assert_eq!(leader.path, leadership.path());
        assert_eq!(election.leader().await.unwrap(), Some(leader));
        assert!(leadership.is_leader().await.unwrap());
        // Nobody else leads meanwhile, nor does a newcomer that will not
        // wait.
        let newcomer = election
            .try_campaign(b"late", Duration::from_millis(200))
            .await
            .unwrap();
        assert!(newcomer.is_none());
        assert!(leaders.try_recv().is_err(), "two leaders at once");
        leading.store(false, SeqCst);
        if round == 0 {
            leadership.resign().await.unwrap();
        } else {
            // The leader's client goes without resigning.
            candidates[i].close().await;
            assert_eq!(leadership.is_leader().await.unwrap_err(), Error::Closed);
        }
    }
    assert_eq!(next_leader(&mut changes).await, None);
    assert_eq!(election.leader().await.unwrap(), None);
}

async fn group_on(server: &mut Server) {
    let dir = "/groups/g";
    let observer = server.client().await;
    let group = GroupMembership::new(&observer, dir);
    let mut changes = group.changes();
    assert!(next_members(&mut changes).await.is_empty());

    let (a, b, c) = (
        server.client().await,
        server.client().await,
        server.client().await,
    );
    let in_a = GroupMembership::new(&a, dir).join("a", b"A").await.unwrap();
    let in_b = GroupMembership::new(&b, dir).join("b", b"B").await.unwrap();
    let in_c = GroupMembership::new(&c, dir).join("c", b"C").await.unwrap();
    // The joins may be reported one by one or together.
    loop {
        let members = next_members(&mut changes).await;
        if members == ["a", "b", "c"] {
            break;
        }
        assert!(
            members
                .iter()
                .all(|m| ["a", "b", "c"].contains(&m.as_str())),
            "{members:?}"
        );
    }
    assert_eq!(group.members().await.unwrap(), ["a", "b", "c"]);
    assert_eq!(
        group.member_data("b").await.unwrap().as_deref(),
        Some(&b"B"[..])
    );
    assert_eq!(in_b.name(), "b");
    assert!(matches!(
        group.join("a", b"").await.unwrap_err(),
        Error::NodeExists { .. }
    ));

    // A member whose client closes leaves the group.
    c.close().await;
    drop(in_c);
    assert_eq!(next_members(&mut changes).await, ["a", "b"]);
    in_b.leave().await.unwrap();
    assert_eq!(next_members(&mut changes).await, ["a"]);
    assert!(in_a.is_member().await.unwrap());
    // Dropping a membership leaves in the background.
    drop(in_a);
    assert!(next_members(&mut changes).await.is_empty());
    assert_eq!(group.member_data("a").await.unwrap(), None);
}
