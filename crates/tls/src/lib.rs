//! TLS as ZooKeeper configures it, for Paddock's servers and clients alike.
//!
//! - `settings`: [`TlsSettings`], the `ssl.*` keys of zoo.cfg (and the
//!   `zookeeper.ssl.*` properties of a client), with ZooKeeper's defaults.
//! - `store`: key and trust stores, PEM (a key store holds the private
//!   key and its certificate chain) or PKCS12; JKS and BCFKS are named in
//!   a clear error saying how to convert them.
//! - `server`, `client`: rustls configurations from the settings: client
//!   authentication as `ssl.clientAuth` asks, protocols and cipher suites
//!   by their Java names, hostname verification that can be turned off.
//! - `stream`: [`MaybeTls`], plain TCP or TLS, split into boxed halves.
//! - `subject`: a certificate's subject as Java's
//!   `X500Principal.getName()` prints it (RFC 2253), which ZooKeeper's
//!   `x509` ACL scheme matches.
//!
//! Only the `ring` provider is built, to keep the build free of C++ and
//! CMake.

mod client;
mod der;
mod server;
mod settings;
mod store;
mod stream;
mod subject;

pub use client::client_config;
pub use rustls;
pub use server::{peer_subject, server_config};
pub use settings::{ClientAuth, StoreSpec, StoreType, TlsSettings};
pub use store::{load_identity, load_trust, Identity};
pub use stream::{MaybeTls, ReadHalf, WriteHalf};
pub use subject::subject_name;

/// Why TLS could not be set up, for the operator who must fix it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{key}={value}: {reason}")]
    Setting {
        key: String,
        value: String,
        reason: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Store {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("{0}")]
    Config(String),
}
