//! The byte stream to one server: plain TCP, or TLS over it when the
//! client was given a TLS configuration ([`crate::ConnectOptions::tls`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tls::MaybeTls;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

pub(crate) use tls::{ReadHalf, WriteHalf};

/// Connects to `host:port` (from `local` when given), with a TLS handshake
/// when `tls` is given; the error says which step failed.
pub(crate) async fn connect(
    (host, port): &(String, u16),
    local: Option<IpAddr>,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<MaybeTls, String> {
    let tcp = match local {
        None => TcpStream::connect((host.as_str(), *port)).await,
        Some(local) => connect_from(local, host, *port).await,
    }
    .map_err(|e| format!("connect failed: {e}"))?;
    tcp.set_nodelay(true)
        .map_err(|e| format!("setting TCP_NODELAY failed: {e}"))?;
    let Some(config) = tls else {
        return Ok(MaybeTls::Plain(tcp));
    };
    let name = ServerName::try_from(host.clone())
        .map_err(|e| format!("{host:?} cannot name a TLS server: {e}"))?;
    let stream = TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake failed: {e}"))?;
    Ok(MaybeTls::Client(Box::new(stream)))
}

/// TCP from `local`: to the first of `host`'s addresses of the same family
/// that answers, as `TcpStream::connect` tries them.
async fn connect_from(local: IpAddr, host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last_error = None;
    for remote in tokio::net::lookup_host((host, port)).await? {
        if remote.is_ipv4() != local.is_ipv4() {
            continue;
        }
        let socket = match local {
            IpAddr::V4(_) => TcpSocket::new_v4()?,
            IpAddr::V6(_) => TcpSocket::new_v6()?,
        };
        defer_port_choice(&socket)?;
        socket.bind(SocketAddr::new(local, 0))?;
        match socket.connect(remote).await {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{host} has no address of the local address {local}'s family"),
        )
    }))
}

/// Lets the kernel choose the local port at connect, when it knows the
/// destination, rather than at bind (`IP_BIND_ADDRESS_NO_PORT`): a port
/// chosen at bind must be free for every destination, a search through
/// all of the host's bound ports that takes most of a connect's time once
/// tens of thousands are in use.
#[cfg(target_os = "linux")]
fn defer_port_choice(socket: &TcpSocket) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the socket's own and open; the value points
    // to a c_int that outlives the call, and its size is given.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match result {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
fn defer_port_choice(_: &TcpSocket) -> std::io::Result<()> {
    Ok(())
}
