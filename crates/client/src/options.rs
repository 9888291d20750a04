//! How to connect: the connect string ("host:port,host:port/chroot") and
//! [`ConnectOptions`] (timeouts, credentials, an existing session to resume).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio_rustls::rustls::ClientConfig;

use crate::error::Error;
use crate::path;

/// ZooKeeper's default client port, used when a host names none.
pub const DEFAULT_PORT: u16 = 2181;

/// The largest reply frame accepted by default. Larger than the server's
/// 1 MiB `jute.maxbuffer` on purpose: a request is bounded by it, but a
/// reply (the children of a large node, a 1 MiB value plus its stat) may be
/// a little or a lot larger, and the limit only guards the client's memory
/// against a broken server.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Settings for [`crate::Client::connect`]. Build with the setters:
///
/// ```
/// use std::time::Duration;
/// let options = client::ConnectOptions::new()
///     .session_timeout(Duration::from_secs(10))
///     .digest("alice", "secret");
/// ```
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub(crate) session_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) auth: Vec<AuthData>,
    pub(crate) resume: Option<(i64, Bytes)>,
    pub(crate) max_frame_bytes: usize,
    pub(crate) sasl: Option<SaslLogin>,
    pub(crate) tls: Option<Arc<ClientConfig>>,
    pub(crate) local_address: Option<IpAddr>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            session_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(15),
            auth: Vec::new(),
            resume: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            sasl: None,
            tls: None,
            local_address: None,
        }
    }
}

impl ConnectOptions {
    pub fn new() -> Self {
        Self::default()
    }

    /// The session timeout to ask for (30 s by default). The server clamps
    /// it to its `[minSessionTimeout, maxSessionTimeout]`; the negotiated
    /// value sets the ping interval (a third of it) and how long a silent
    /// connection is trusted (two thirds).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`crate::Client::connect`] tries the servers before giving
    /// up (15 s by default). Reconnects after that are not bounded by it:
    /// only the server can say a session has expired.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Authenticates with the `digest` scheme as `user:password` on connect
    /// and after every reconnect.
    pub fn digest(self, user: &str, password: &str) -> Self {
        self.auth("digest", format!("{user}:{password}").as_bytes())
    }

    /// Authenticates with any scheme on connect and after every reconnect.
    pub fn auth(mut self, scheme: &str, auth: &[u8]) -> Self {
        self.auth.push(AuthData {
            scheme: scheme.to_owned(),
            auth: Bytes::copy_from_slice(auth),
        });
        self
    }

    /// Authenticates with SASL DIGEST-MD5 as `user` on every connection,
    /// before any request is sent, as ZooKeeper's client does with the
    /// `Client` section of its JAAS file (read one with
    /// `sasl::jaas::client_login`). The session's ACL id is `sasl:user`. A
    /// refused login ends the client with [`Error::SaslFailed`].
    pub fn sasl_digest_md5(mut self, user: &str, password: &str) -> Self {
        self.sasl = Some(SaslLogin {
            user: user.to_owned(),
            password: password.to_owned(),
        });
        self
    }

    /// Connects with TLS, as ZooKeeper's client does with
    /// `zookeeper.client.secure=true` (to a server's `secureClientPort`).
    /// The `tls` crate's `client_config` builds a configuration from
    /// ZooKeeper's `zookeeper.ssl.*` properties; the certificate it offers
    /// names the session as `x509:<subject>`.
    pub fn tls(mut self, config: Arc<ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Re-attaches to an existing session instead of creating one (its id
    /// and password from [`crate::Client::session_id`] and
    /// [`crate::Client::session_password`]). Connecting fails with
    /// `SessionExpired` if the session is gone.
    pub fn resume_session(mut self, session_id: i64, password: Bytes) -> Self {
        self.resume = Some((session_id, password));
        self
    }

    /// Connects from this address of the host (bound before each
    /// connect), rather than the one the kernel picks for the route: on a
    /// host with several addresses, or for many thousands of sessions from
    /// one host to one server, each address having its own ports.
    pub fn local_address(mut self, address: IpAddr) -> Self {
        self.local_address = Some(address);
        self
    }

    /// The largest reply frame to accept (16 MiB by default).
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }
}

/// Credentials sent as an `auth` packet on every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthData {
    pub scheme: String,
    pub auth: Bytes,
}

/// Who to log in as with SASL DIGEST-MD5.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SaslLogin {
    pub user: String,
    pub password: String,
}

/// Never prints the password.
impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// A parsed connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    pub hosts: Vec<(String, u16)>,
    pub chroot: Option<String>,
}

impl ConnectString {
    /// Parses "host[:port][,host[:port]...][/chroot]". IPv6 addresses go in
    /// brackets ("[::1]:2181"). A chroot of "/" means none.
    pub(crate) fn parse(input: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidConnectString {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let (hosts_part, chroot) = match input.find('/') {
            Some(at) => (&input[..at], Some(&input[at..])),
            None => (input, None),
        };
        let chroot = match chroot {
            None | Some("/") => None,
            Some(root) => {
                path::validate(root, false).map_err(|e| invalid(&format!("bad chroot: {e}")))?;
                Some(root.to_owned())
            }
        };
        let mut hosts = Vec::new();
        for entry in hosts_part.split(',').map(str::trim) {
            if entry.is_empty() {
                continue;
            }
            hosts.push(parse_host(entry).map_err(|reason| invalid(&reason))?);
        }
        if hosts.is_empty() {
            return Err(invalid("no servers"));
        }
        Ok(Self { hosts, chroot })
    }

    /// "h1:p1,h2:p2" for messages.
    pub(crate) fn servers(&self) -> String {
        let names: Vec<String> = self
            .hosts
            .iter()
            .map(|(host, port)| format!("{host}:{port}"))
            .collect();
        names.join(",")
    }
}

fn parse_host(entry: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("unclosed [ in {entry:?}"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("expected :port after ] in {entry:?}"))?,
            ),
        };
        (host, port)
    } else {
        match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return Err(format!("empty host in {entry:?}"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("bad port in {entry:?}"))?,
    };
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_ports_and_chroot() {
        let cs = ConnectString::parse("a:1, b ,[::1]:3/app/x").unwrap();
        assert_eq!(
            cs.hosts,
            vec![
                ("a".to_owned(), 1),
                ("b".to_owned(), DEFAULT_PORT),
                ("::1".to_owned(), 3)
            ]
        );
        assert_eq!(cs.chroot.as_deref(), Some("/app/x"));
        assert_eq!(cs.servers(), "a:1,b:2181,::1:3");
        assert_eq!(ConnectString::parse("h:5/").unwrap().chroot, None);
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "", "/app", "h:x", "h:0", "h:70000", "[::1", "h:1/app/", "h:1//",
        ] {
            assert!(ConnectString::parse(bad).is_err(), "{bad:?}");
        }
    }
}
