//! A fault-injecting TCP proxy for every directed peer link of an
//! ensemble: server `from` reaches server `to` through its own listener,
//! so a partition is a set of links to cut. Cutting a link closes the
//! connections through it and refuses new ones until it is healed, as a
//! dropped route would (seen by the servers as resets, not silence).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Directed link `(from, to)` between server ids.
pub type Link = (usize, usize);

/// The proxies of one ensemble; they stop when it is dropped.
pub struct Links {
    cut: BTreeMap<Link, watch::Sender<bool>>,
    /// `(from, to) -> (peer, election)` listening ports, for zoo.cfg.
    ports: BTreeMap<Link, (u16, u16)>,
    /// Where each link's (peer, election) proxies forward to: the real
    /// ports of server `to`, set by [`Links::forward`].
    targets: BTreeMap<Link, (Arc<AtomicU16>, Arc<AtomicU16>)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Links {
    /// Binds a proxy pair (peer and election port) for every directed link
    /// between `servers` (ids), before the servers' own ports are chosen,
    /// so that no proxy can take a port meant for a server.
    pub async fn bind(servers: &[usize]) -> anyhow::Result<Links> {
        let mut links = Links {
            cut: BTreeMap::new(),
            ports: BTreeMap::new(),
            targets: BTreeMap::new(),
            tasks: Vec::new(),
        };
        for &from in servers {
            for &to in servers {
                if from == to {
                    continue;
                }
                let (tx, rx) = watch::channel(false);
                let (peer_target, election_target) = (Arc::default(), Arc::default());
                let (peer_port, peer_task) = proxy(Arc::clone(&peer_target), rx.clone()).await?;
                let (election_port, election_task) =
                    proxy(Arc::clone(&election_target), rx).await?;
                links.cut.insert((from, to), tx);
                links.ports.insert((from, to), (peer_port, election_port));
                links
                    .targets
                    .insert((from, to), (peer_target, election_target));
                links.tasks.extend([peer_task, election_task]);
            }
        }
        Ok(links)
    }

    /// Points every link to server `to` at its real (peer, election) ports.
    pub fn forward(&self, servers: &BTreeMap<usize, (u16, u16)>) {
        for (&(_, to), (peer, election)) in &self.targets {
            if let Some(&(peer_port, election_port)) = servers.get(&to) {
                peer.store(peer_port, Ordering::Release);
                election.store(election_port, Ordering::Release);
            }
        }
    }

    pub fn ports(&self) -> &BTreeMap<Link, (u16, u16)> {
        &self.ports
    }

    /// Cuts both directions between every server of `side` and every
    /// server not in it.
    pub fn isolate(&self, side: &[usize]) {
        for (&(from, to), cut) in &self.cut {
            if side.contains(&from) != side.contains(&to) {
                let _ = cut.send(true);
            }
        }
    }

    pub fn heal(&self) {
        for cut in self.cut.values() {
            let _ = cut.send(false);
        }
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Listens on a free loopback port and forwards each connection to the
/// target port (once set) while the link is not cut; returns the port.
async fn proxy(
    target: Arc<AtomicU16>,
    cut: watch::Receiver<bool>,
) -> anyhow::Result<(u16, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    let task = tokio::spawn(async move {
        loop {
            let Ok((inbound, _)) = listener.accept().await else {
                continue;
            };
            let target = target.load(Ordering::Acquire);
            if *cut.borrow() || target == 0 {
                drop(inbound);
                continue;
            }
            let mut cut = cut.clone();
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
                    return;
                };
                let (mut a, mut b) = (inbound, outbound);
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
                    _ = cut.wait_for(|&is_cut| is_cut) => {}
                }
            });
        }
    });
    Ok((port, task))
}
