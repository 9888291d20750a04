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
    let out = four_letter_word(addr, "srvr", Duration::from_secs(2))?;
    let mode = out.lines().find_map(|line| line.strip_prefix("Mode: "))?;
    match mode.trim() {
        "standalone" => Some(Mode::Standalone),
        "leader" => Some(Mode::Leader),
        "follower" => Some(Mode::Follower),
        "observer" => Some(Mode::Observer),
        _ => None,
    }
}
