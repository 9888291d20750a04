//! The byte stream to one server: plain TCP, or TLS over it when the
//! client was given a TLS configuration ([`crate::ConnectOptions::tls`]).

use std::sync::Arc;

use tls::MaybeTls;
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

pub(crate) use tls::{ReadHalf, WriteHalf};

/// Connects to `host:port`, with a TLS handshake when `tls` is given; the
/// error says which step failed.
pub(crate) async fn connect(
    host: &str,
    port: u16,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<MaybeTls, String> {
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connect failed: {e}"))?;
    tcp.set_nodelay(true)
        .map_err(|e| format!("setting TCP_NODELAY failed: {e}"))?;
    let Some(config) = tls else {
        return Ok(MaybeTls::Plain(tcp));
    };
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host:?} cannot name a TLS server: {e}"))?;
    let stream = TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake failed: {e}"))?;
    Ok(MaybeTls::Client(Box::new(stream)))
}
