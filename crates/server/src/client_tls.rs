//! TLS for clients, configured with ZooKeeper's keys: `secureClientPort`
//! (beside `clientPort`, or instead of it when `clientPort` is absent),
//! `secureClientPortAddress`, `client.portUnification` (TLS and plain text
//! on `clientPort` alike), the `ssl.*` keys (the `tls` crate's
//! `TlsSettings`) and `X509AuthenticationProvider.superUser`. The listener
//! that uses them is `tls_listener`.

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
                return self
                    .settings
                    .set(ssl_key, raw_key, value)
                    .map_err(|e| match e {
                        tls::TlsError::Setting { key, value, reason } => {
                            invalid(&key, &value, reason)
                        }
                        other => invalid(raw_key, value, other.to_string()),
                    });
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
}
