//! Serving clients over TLS: connections on `secureClientPort`, and those
//! on `clientPort` that open with a TLS record when `client.portUnification`
//! is on. The handshake is bounded by `ssl.handshakeDetectionTimeoutMillis`;
//! a client certificate's subject becomes the session's `x509` id (and
//! `super` when it is `X509AuthenticationProvider.superUser`). The key and
//! trust stores are read again when their files change, for the
//! connections that follow: a certificate is renewed without a restart.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use jute::Id;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::shared::Shared;
use crate::tls_config::ClientTls;

/// How often the stores' files are checked for changes.
const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// The first byte of a TLS handshake record: what tells TLS from a
/// ZooKeeper frame (whose length would have to be over 350 MiB to start
/// so) on a unified port.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

pub struct TlsService {
    config: ClientTls,
    acceptor: RwLock<TlsAcceptor>,
    /// The files the acceptor was built from, with their modification
    /// times then.
    files: RwLock<Vec<(PathBuf, Option<SystemTime>)>>,
}

impl TlsService {
    /// The service for `config`, or why its stores cannot be used.
    pub fn new(config: &ClientTls) -> Result<Self, tls::TlsError> {
        let files = watched_files(config);
        let acceptor = TlsAcceptor::from(tls::server_config(&config.settings)?);
        Ok(Self {
            config: config.clone(),
            acceptor: RwLock::new(acceptor),
            files: RwLock::new(files),
        })
    }

    fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.config.settings.handshake_timeout_ms)
    }

    /// A connection on `secureClientPort`: handshake, then serve.
    pub async fn serve(&self, shared: Arc<Shared>, stream: TcpStream, remote: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let acceptor = self.acceptor.read().expect("TLS acceptor poisoned").clone();
        let stream = match tokio::time::timeout(self.handshake_timeout(), acceptor.accept(stream))
            .await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::info!(%remote, "TLS handshake failed, closing: {error}");
                return;
            }
            Err(_) => {
                tracing::info!(%remote, timeout = ?self.handshake_timeout(), "no TLS handshake in time, closing (ssl.handshakeDetectionTimeoutMillis)");
                return;
            }
        };
        let ids = self.certificate_ids(stream.get_ref().1);
        crate::connection::serve_tls(shared, stream, remote, ids).await;
    }

    /// A connection on `clientPort` with `client.portUnification`: TLS if
    /// it opens with a TLS record, plain text otherwise.
    pub async fn serve_unified(&self, shared: Arc<Shared>, stream: TcpStream, remote: SocketAddr) {
        let mut first = [0u8; 1];
        match tokio::time::timeout(self.handshake_timeout(), stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {
                self.serve(shared, stream, remote).await
            }
            Ok(Ok(_)) => crate::connection::serve(shared, stream, remote).await,
            Ok(Err(error)) => tracing::debug!(%remote, "connection ended: {error}"),
            Err(_) => tracing::info!(%remote, "nothing sent in time, closing"),
        }
    }

    fn certificate_ids(&self, connection: &tokio_rustls::rustls::ServerConnection) -> Vec<Id> {
        tls::peer_subject(connection).map_or_else(Vec::new, |subject| {
            crate::auth::certificate_ids(subject, self.config.super_user.as_deref())
        })
    }

    /// Rebuilds the acceptor whenever a store's file changes; a store that
    /// no longer loads is logged and the one before kept.
    pub async fn reload_changed_stores(self: Arc<Self>) {
        let mut ticker = tokio::time::interval(RELOAD_CHECK_INTERVAL);
        loop {
            ticker.tick().await;
            let now = watched_files(&self.config);
            if *self.files.read().expect("TLS files poisoned") == now {
                continue;
            }
            *self.files.write().expect("TLS files poisoned") = now;
            match tls::server_config(&self.config.settings) {
                Ok(config) => {
                    *self.acceptor.write().expect("TLS acceptor poisoned") =
                        TlsAcceptor::from(config);
                    tracing::info!("TLS key and trust stores changed: new connections use them");
                }
                Err(error) => tracing::warn!(
                    "TLS key or trust store changed but cannot be used; keeping the previous ones: {error}"
                ),
            }
        }
    }
}

fn watched_files(config: &ClientTls) -> Vec<(PathBuf, Option<SystemTime>)> {
    let settings = &config.settings;
    [&settings.key_store, &settings.trust_store]
        .into_iter()
        .flat_map(|store| [store.location.clone(), store.password_path.clone()])
        .flatten()
        .map(|path| {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            (path, modified)
        })
        .collect()
}
