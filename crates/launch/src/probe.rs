//! Four-letter words over a socket: how a server tells whether it serves,
//! and in which role.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A server's role, from the `Mode:` line of `srvr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Standalone,
    Leader,
    Follower,
    Observer,
}

/// Sends a four-letter word and reads the answer to the end; None when the
/// server does not answer within `timeout`.
pub fn four_letter_word(addr: SocketAddr, word: &str, timeout: Duration) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    stream.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The mode `srvr` reports; None while the server does not serve (it
/// answers "not currently serving requests" without a Mode line).
pub fn mode(addr: SocketAddr) -> Option<Mode> {
    match srvr_field(addr, "Mode: ")?.trim() {
        "standalone" => Some(Mode::Standalone),
        "leader" => Some(Mode::Leader),
        "follower" => Some(Mode::Follower),
        "observer" => Some(Mode::Observer),
        _ => None,
    }
}

/// The zxid `srvr` reports: the newest txn the server applied. None while
/// it does not serve.
pub fn zxid(addr: SocketAddr) -> Option<i64> {
    parse_zxid(&srvr_field(addr, "Zxid: ")?)
}

fn parse_zxid(zxid: &str) -> Option<i64> {
    i64::from_str_radix(zxid.trim().trim_start_matches("0x"), 16).ok()
}

/// The rest of the `srvr` line that starts with `field`; None while the
/// server does not serve (it then answers without such lines).
fn srvr_field(addr: SocketAddr, field: &str) -> Option<String> {
    let out = four_letter_word(addr, "srvr", Duration::from_secs(2))?;
    field_of(&out, field)
}

fn field_of(srvr: &str, field: &str) -> Option<String> {
    let value = srvr.lines().find_map(|line| line.strip_prefix(field))?;
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zxid_is_read_from_srvr_in_hex() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nZxid: 0x100000a2f\nMode: follower\n";
        let zxid = |out: &str| parse_zxid(&field_of(out, "Zxid: ")?);
        assert_eq!(zxid(srvr), Some(0x1_0000_0a2f));
        assert_eq!(zxid("Zxid: 0x0\n"), Some(0));
        assert_eq!(
            zxid("This ZooKeeper instance is not currently serving requests\n"),
            None
        );
    }
}
