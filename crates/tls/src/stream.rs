//! A byte stream that is plain TCP or TLS over it, either end of the
//! handshake, so that what reads and writes frames is written once.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The half that reads.
pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The half that writes.
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

pub enum MaybeTls {
    Plain(TcpStream),
    /// This end dialled.
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// This end accepted.
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl MaybeTls {
    /// Halves for a reader and a writer; plain TCP splits without a lock.
    pub fn split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Self::Plain(tcp) => {
                let (read, write) = tcp.into_split();
                (Box::new(read), Box::new(write))
            }
            Self::Client(tls) => {
                let (read, write) = tokio::io::split(*tls);
                (Box::new(read), Box::new(write))
            }
            Self::Server(tls) => {
                let (read, write) = tokio::io::split(*tls);
                (Box::new(read), Box::new(write))
            }
        }
    }

    /// The certificates the other end showed, leaf first (none over plain
    /// TCP).
    pub fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        match self {
            Self::Plain(_) => None,
            Self::Client(tls) => tls.get_ref().1.peer_certificates(),
            Self::Server(tls) => tls.get_ref().1.peer_certificates(),
        }
    }
}

impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Client(s) => Pin::new(s).poll_read(cx, buf),
            Self::Server(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Client(s) => Pin::new(s).poll_write(cx, buf),
            Self::Server(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Client(s) => Pin::new(s).poll_flush(cx),
            Self::Server(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Client(s) => Pin::new(s).poll_shutdown(cx),
            Self::Server(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
