//! The Paddock server: client connections, sessions, the request pipeline,
//! watch delivery and four-letter words, over the replicated log.
//!
//! Layout:
//! - `server`: everything wired together; start here.
//! - `connection`: one client connection — handshake, reader, writer.
//! - `pipeline`: what each request becomes (reply, write, ordered read);
//!   `session_order`: the order of a session's requests, answers and
//!   watch events, which the connection's reader and writer follow.
//! - `apply`: committed txns into tree versions, watch events, snapshots;
//!   `snapshot_schedule`: when the next snapshot is due, whole or delta;
//!   `snapshot_job`: the one being written, at the lowest CPU priority;
//!   `delta_chain`: what the next delta follows on.
//! - `shared`: state all tasks share, and its locking rule.
//! - `session`: session liveness and ids; `auth`, `sasl`: identities;
//!   `delegation`: identities lent to the server's own tools' sessions.
//! - `ensemble`: the servers of an ensemble and what they tell each other
//!   outside the log.
//! - `watch`, `rewatch`: the watch registry and `setWatches`.
//! - `monitor`: what the server publishes about itself, as data;
//!   `four_letter`: `ruok`, `srvr`, `mntr` and the rest, from it.
//! - `tls_config`, `tls_listener`: TLS for clients and between servers,
//!   configured, and served to clients (the peer port's is the consensus
//!   transport's).
//! - `config`: `zoo.cfg`; `load_limits`: its limits on load, which
//!   `throttle` applies to requests and new connections; `open_files`:
//!   the file descriptors client sockets may take.
//! - `reply`, `stats`: reply frames and counters.
//! - `quota_report`: the warnings and counts of quota limits passed;
//!   `audit`: ZooKeeper's audit log.

mod apply;
mod audit;
mod auth;
mod config;
mod connection;
mod delegation;
mod delta_chain;
mod ensemble;
mod four_letter;
mod load_limits;
mod membership;
mod monitor;
mod open_files;
mod pipeline;
mod quota_report;
mod read_ahead;
mod read_only;
mod reconfig;
mod reply;
mod rewatch;
mod sasl;
mod server;
mod session;
mod session_order;
mod shared;
mod snapshot_arrival;
mod snapshot_job;
mod snapshot_schedule;
mod snapshot_thread;
mod stats;
mod throttle;
mod tls_config;
mod tls_listener;
mod watch;
mod zookeeper_observer;

pub use auth::{authenticate, certificate_ids, digest_id};
pub use config::{
    parse_properties, AdminConfig, ConfigError, MetricsConfig, ServerConfig, ServerSpec,
};
pub use consensus::HistogramSnapshot;
pub use delegation::DELEGATED_SCHEME;
pub use membership::{config_text, parse_config_text};
pub use monitor::{
    environment, full_version, max_fds, open_fds, ConnectionInfo, Monitor, MonitorValue,
    ServerStats, VERSION,
};
pub use server::{run, stop_tasks, ServerError, Stopped};
pub use stats::Latency;
