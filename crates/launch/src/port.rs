//! Free loopback ports for servers that are started later.
//!
//! Asking the kernel for port 0 and closing the socket is racy in two ways
//! that both bit the benchmarks: the kernel may hand the same port out again
//! to the next caller (two servers of one ensemble on one port), and it
//! hands ports from the ephemeral range, which every outgoing connection
//! draws from too (a client's socket takes the port before the server binds
//! it). So ports come from below the ephemeral range, where the kernel
//! never picks a port on its own, from a cursor that never repeats within
//! this process; each candidate is checked by binding it.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use anyhow::bail;

/// The lowest port handed out; below it live well-known services.
const FIRST_PORT: u32 = 10_000;
/// Where the ephemeral range starts when /proc does not say.
const DEFAULT_EPHEMERAL_START: u32 = 32_768;

/// How far the next candidate is from the start of the range.
static CURSOR: AtomicU32 = AtomicU32::new(0);

/// A loopback port nothing listens on now, not handed out before by this
/// process.
pub fn free() -> anyhow::Result<u16> {
    let range = range();
    let span = range.end - range.start;
    let candidates = (0..span).map(|_| {
        let step = CURSOR.fetch_add(1, Ordering::Relaxed);
        let port = range.start + (start_offset(span) + step) % span;
        u16::try_from(port).expect("ports below the ephemeral range fit in u16")
    });
    match first_bindable(candidates) {
        Some(port) => Ok(port),
        None => bail!(
            "no free loopback port between {} and {}: close other servers and try again",
            range.start,
            range.end
        ),
    }
}

fn first_bindable(mut candidates: impl Iterator<Item = u16>) -> Option<u16> {
    candidates.find(|&port| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok())
}

/// Ports this module may hand out: from [`FIRST_PORT`] up to the start of
/// the kernel's ephemeral range.
fn range() -> std::ops::Range<u32> {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_START);
    FIRST_PORT..ephemeral_start.max(FIRST_PORT + 1_000)
}

/// Each process starts at its own place in the range, so two harnesses
/// running at once rarely probe the same ports.
fn start_offset(span: u32) -> u32 {
    static OFFSET: OnceLock<u32> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        (std::process::id().wrapping_mul(7_919) ^ nanos) % span
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice_and_stay_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..200).map(|_| free().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
        let range = range();
        assert!(ports.iter().all(|&port| range.contains(&u32::from(port))));
    }

    #[test]
    fn a_port_in_use_is_skipped() {
        let taken = free().unwrap();
        let _listener = TcpListener::bind((Ipv4Addr::LOCALHOST, taken)).unwrap();
        let next = free().unwrap();
        assert_eq!(first_bindable([taken, next].into_iter()), Some(next));
    }
}
