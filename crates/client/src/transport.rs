//! The byte stream to one server: plain TCP, or TLS over it when the
//! client was given a TLS configuration ([`crate::ConnectOptions::tls`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// The half the reader task owns.
pub(crate) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The half the session task writes to.
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// Connects to `host:port`, with a TLS handshake when `tls` is given;
    /// the error says which step failed.
    pub(crate) async fn connect(
        host: &str,
        port: u16,
        tls: Option<&Arc<ClientConfig>>,
    ) -> Result<Self, String> {
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connect failed: {e}"))?;
        tcp.set_nodelay(true)
            .map_err(|e| format!("setting TCP_NODELAY failed: {e}"))?;
        let Some(config) = tls else {
            return Ok(Self::Plain(tcp));
        };
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{host:?} cannot name a TLS server: {e}"))?;
        let stream = TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        Ok(Self::Tls(Box::new(stream)))
    }

    pub(crate) fn split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Self::Plain(tcp) => {
                let (read, write) = tcp.into_split();
                (Box::new(read), Box::new(write))
            }
            Self::Tls(tls) => {
                let (read, write) = tokio::io::split(*tls);
                (Box::new(read), Box::new(write))
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
