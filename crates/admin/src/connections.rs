//! The AdminServer's port: HTTP, HTTPS only (`admin.forceHttps`), or both
//! on one port (`admin.portUnification`), told apart by the first byte as
//! ZooKeeper's unified connector tells them. Each connection is served on
//! a task of its own, so a slow handshake holds up nobody else, and its
//! requests carry who is on the other end ([`Peer`]): the address the
//! `ip` scheme names and the certificate subject the `x509` scheme names.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// How long a new connection has to send its first byte and finish a TLS
/// handshake (ZooKeeper's admin port closes idle connections after 30 s).
const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a request's line and headers may take, Jetty's default (the
/// AdminServer's): past it the request is answered 431 and the connection
/// closed.
const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Who sent a request.
#[derive(Debug, Clone)]
pub struct Peer {
    pub remote: SocketAddr,
    /// The subject of the client's certificate, when it showed one.
    pub subject: Option<String>,
}

/// HTTPS on the admin port: the `ssl.quorum.*` stores, as ZooKeeper's
/// AdminServer uses them.
#[derive(Clone)]
pub struct Https {
    pub acceptor: TlsAcceptor,
    /// Plain HTTP is served too (`admin.portUnification` without
    /// `admin.forceHttps`).
    pub plain_too: bool,
}

/// Accepts connections until the runtime stops.
pub async fn serve(listener: TcpListener, routes: Router, https: Option<Https>) {
    let https = https.map(Arc::new);
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("the AdminServer could not accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let routes = routes.clone();
        let https = https.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(FIRST_BYTES_TIMEOUT, open(stream, remote, https)).await {
                Ok(Some((io, peer))) => serve_http(io, routes.layer(Extension(peer))).await,
                Ok(None) => {}
                Err(_) => {
                    tracing::debug!(%remote, "admin connection idle before its first request, closed")
                }
            }
        });
    }
}

type Io = Box<dyn IoStream>;
trait IoStream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> IoStream for T {}

/// The connection's byte stream once it is known to be HTTP or a finished
/// TLS handshake; `None` when it is closed instead (plain text to an HTTPS
/// port, a failed handshake), with no HTTP answer, as Jetty gives none.
async fn open(
    stream: TcpStream,
    remote: SocketAddr,
    https: Option<Arc<Https>>,
) -> Option<(Io, Peer)> {
    let plain = Peer {
        remote,
        subject: None,
    };
    let Some(https) = https else {
        return Some((Box::new(stream), plain));
    };
    let mut first = [0u8; 1];
    let opens_tls =
        matches!(stream.peek(&mut first).await, Ok(1) if first[0] == TLS_HANDSHAKE_RECORD);
    if !opens_tls {
        if https.plain_too {
            return Some((Box::new(stream), plain));
        }
        tracing::info!(%remote, "plain text to the AdminServer's HTTPS port (admin.forceHttps), closed");
        return None;
    }
    match https.acceptor.accept(stream).await {
        Ok(tls) => {
            let subject = tls::peer_subject(tls.get_ref().1);
            Some((Box::new(tls), Peer { remote, subject }))
        }
        Err(error) => {
            tracing::info!(%remote, "TLS handshake on the AdminServer's port failed, closed: {error}");
            None
        }
    }
}

async fn serve_http(io: Io, routes: Router) {
    let service = TowerToHyperService::new(routes);
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .max_buf_size(REQUEST_HEAD_BYTES_MAX)
        .serve_connection(TokioIo::new(io), service)
        .await
    {
        tracing::debug!("admin connection ended: {error}");
    }
}
