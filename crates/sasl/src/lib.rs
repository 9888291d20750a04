//! SASL DIGEST-MD5 (RFC 2831) as ZooKeeper speaks it over its `sasl`
//! opcode, for both ends: the server's exchange that checks a user of a
//! JAAS `Server` section, and the client's that answers it as Java's
//! `DigestMD5Client` does. Pure code, no I/O: callers move the tokens.
//!
//! The exchange, two round trips:
//! 1. the client sends an empty token; the server answers with a challenge
//!    carrying a fresh nonce;
//! 2. the client answers with a digest of its password over the nonce and
//!    its own cnonce; the server checks it and answers with `rspauth`, a
//!    digest proving it knows the password too, which the client checks.
//!
//! Layout:
//! - `directives`: the `name="value",name=value` text of every token.
//! - `digest`: the hashes both sides compute (RFC 2831 §2.1.2.1).
//! - `server`: [`ServerExchange`].
//! - `client`: [`ClientExchange`].
//! - `jaas`: the users of a JAAS file's `Server` section and the login of
//!   its `Client` section.

mod client;
mod digest;
mod directives;
pub mod jaas;
mod server;

pub use client::ClientExchange;
pub use server::{ServerExchange, Users};

/// ZooKeeper's SASL server name: Java's DIGEST-MD5 server offers it as the
/// realm, and clients name it in their digest-uri.
pub const SERVER_NAME: &str = "zk-sasl-md5";
/// The service ZooKeeper clients authenticate to.
pub const SERVICE: &str = "zookeeper";
/// Java's DIGEST-MD5 server refuses longer client tokens.
pub const TOKEN_BYTES_MAX: usize = 4096;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 random bytes in hex: a nonce or a cnonce.
fn fresh_nonce() -> String {
    use rand::RngCore as _;
    let mut raw = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut raw);
    hex(&raw)
}
