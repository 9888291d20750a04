//! TLS, configured with ZooKeeper's keys.
//!
//! For clients ([`ClientTls`]): `secureClientPort` (beside `clientPort`, or
//! instead of it when `clientPort` is absent), `secureClientPortAddress`,
//! `client.portUnification` (TLS and plain text on `clientPort` alike), the
//! `ssl.*` keys (the `tls` crate's `TlsSettings`) and
//! `X509AuthenticationProvider.superUser`; `tls_listener` serves them.
//!
//! Between servers ([`QuorumTls`]): `sslQuorum`, `portUnification` (the
//! peer port takes TLS and plain text, to switch an ensemble over one
//! server at a time) and the `ssl.quorum.*` keys; the consensus
//! transport's `PeerTls` carries them out.

use std::net::IpAddr;

use crate::config::{address, boolean, invalid, number, ConfigError};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientTls {
    /// `secureClientPort`.
    pub port: Option<u16>,
    /// `secureClientPortAddress`; `clientPortAddress`'s when absent.
    pub address: Option<IpAddr>,
    /// `client.portUnification`: `clientPort` takes TLS too.
    pub port_unification: bool,
    pub settings: tls::TlsSettings,
    /// `X509AuthenticationProvider.superUser`: the certificate subject
    /// that is the superuser.
    pub super_user: Option<String>,
}

/// The authentication providers ZooKeeper's zoo.cfg names that Paddock
/// has built in: naming them is accepted and changes nothing.
const BUILT_IN_PROVIDERS: &[&str] = &[
    "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
    "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
    "org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
    "org.apache.zookeeper.server.auth.IPAuthenticationProvider",
];

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuorumTls {
    /// `sslQuorum`: dial peers with TLS, and take only TLS unless
    /// `port_unification`.
    pub ssl_quorum: bool,
    /// `portUnification`: the peer port takes TLS and plain text.
    pub port_unification: bool,
    pub settings: tls::TlsSettings,
}

impl QuorumTls {
    /// Takes `key` (without its `zookeeper.` prefix) if it is one of these;
    /// `Ok(false)` if not.
    pub fn set(&mut self, key: &str, raw_key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "sslQuorum" => self.ssl_quorum = boolean(raw_key, value)?,
            "portUnification" => self.port_unification = boolean(raw_key, value)?,
            _ => match key.strip_prefix("ssl.quorum.") {
                Some(ssl_key) => return tls_setting(&mut self.settings, ssl_key, raw_key, value),
                None => return Ok(false),
            },
        }
        Ok(true)
    }

    /// The peer transport's TLS; `None` when the peer port is plain text.
    pub fn peer_tls(&self) -> Result<Option<consensus::PeerTls>, tls::TlsError> {
        if !self.ssl_quorum && !self.port_unification {
            return Ok(None);
        }
        let dial = match self.ssl_quorum {
            true => Some(tls::client_config(&self.settings)?),
            false => None,
        };
        Ok(Some(consensus::PeerTls {
            dial,
            accept: tls::server_config(&self.settings)?,
            accept_plain: !self.ssl_quorum || self.port_unification,
        }))
    }
}

/// One `ssl.*` key into `settings`, its errors in zoo.cfg's terms.
fn tls_setting(
    settings: &mut tls::TlsSettings,
    ssl_key: &str,
    raw_key: &str,
    value: &str,
) -> Result<bool, ConfigError> {
    settings.set(ssl_key, raw_key, value).map_err(|e| match e {
        tls::TlsError::Setting { key, value, reason } => invalid(&key, &value, reason),
        other => invalid(raw_key, value, other.to_string()),
    })
}

impl ClientTls {
    /// Whether clients can connect with TLS at all.
    pub fn enabled(&self) -> bool {
        self.port.is_some() || self.port_unification
    }

    /// Takes `key` (without its `zookeeper.` prefix) if it is one of these;
    /// `Ok(false)` if not.
    pub fn set(&mut self, key: &str, raw_key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "secureClientPort" => self.port = Some(number(raw_key, value)?),
            "secureClientPortAddress" => self.address = Some(address(raw_key, value)?),
            "client.portUnification" => self.port_unification = boolean(raw_key, value)?,
            "X509AuthenticationProvider.superUser" => self.super_user = Some(value.to_owned()),
            // Netty or NIO, Paddock serves TLS and plain text alike.
            "serverCnxnFactory" => {}
            _ if key.starts_with("authProvider.") && BUILT_IN_PROVIDERS.contains(&value) => {}
            _ => {
                let Some(ssl_key) = key.strip_prefix("ssl.") else {
                    return Ok(false);
                };
                if ssl_key.starts_with("quorum.") {
                    return Ok(false);
                }
                return tls_setting(&mut self.settings, ssl_key, raw_key, value);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zookeepers_keys() {
        let mut t = ClientTls::default();
        for (key, value) in [
            ("secureClientPort", "2281"),
            ("client.portUnification", "true"),
            ("ssl.keyStore.location", "/k.pem"),
            ("ssl.clientAuth", "want"),
            ("X509AuthenticationProvider.superUser", "CN=admin"),
            (
                "authProvider.x509",
                "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            ),
            (
                "serverCnxnFactory",
                "org.apache.zookeeper.server.NettyServerCnxnFactory",
            ),
        ] {
            assert!(t.set(key, key, value).unwrap(), "{key}");
        }
        assert_eq!(t.port, Some(2281));
        assert!(t.port_unification && t.enabled());
        assert_eq!(t.settings.client_auth, tls::ClientAuth::Want);
        assert_eq!(t.super_user.as_deref(), Some("CN=admin"));
        for key in [
            "ssl.quorum.keyStore.location",
            "authProvider.1",
            "ssl.sslProvider",
        ] {
            assert!(!t.set(key, key, "x").unwrap(), "{key}");
        }
        assert!(t.set("ssl.clientAuth", "ssl.clientAuth", "bad").is_err());
    }

    #[test]
    fn quorum_keys_and_what_the_peer_port_takes() {
        let mut q = QuorumTls::default();
        assert!(q.peer_tls().unwrap().is_none(), "plain text by default");
        for (key, value) in [
            ("sslQuorum", "true"),
            ("portUnification", "true"),
            ("ssl.quorum.clientAuth", "need"),
        ] {
            assert!(q.set(key, key, value).unwrap(), "{key}");
        }
        assert!(q.ssl_quorum && q.port_unification);
        assert!(!q.set("ssl.clientAuth", "ssl.clientAuth", "need").unwrap());
        // Without a key store the peer port cannot take TLS.
        assert!(q.peer_tls().is_err());
    }
}
