//! The `ssl.*` keys, as ZooKeeper reads them for its client port (the
//! same names, after `zookeeper.`, configure its Java client).

use std::path::{Path, PathBuf};

use crate::TlsError;

/// Whether the server asks clients for a certificate (`ssl.clientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Not asked for.
    None,
    /// Asked for; a client without one is still served.
    Want,
    /// Required: ZooKeeper's default.
    Need,
}

/// A store's format (`ssl.keyStore.type`), or from the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
    Jks,
    Bcfks,
}

impl StoreType {
    fn parse(value: &str) -> Option<Self> {
        match value.to_ascii_uppercase().as_str() {
            "PEM" => Some(Self::Pem),
            "PKCS12" => Some(Self::Pkcs12),
            "JKS" => Some(Self::Jks),
            "BCFKS" => Some(Self::Bcfks),
            _ => None,
        }
    }

    /// ZooKeeper's guess from the extension when no type is given.
    pub fn from_path(path: &Path) -> Option<Self> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "pem" | "crt" | "cert" | "key" => Some(Self::Pem),
            "p12" | "pfx" => Some(Self::Pkcs12),
            "jks" => Some(Self::Jks),
            "bcfks" => Some(Self::Bcfks),
            _ => None,
        }
    }
}

/// One key or trust store: `location`, `password` or `passwordPath`,
/// `type`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSpec {
    pub location: Option<PathBuf>,
    pub password: Option<String>,
    pub password_path: Option<PathBuf>,
    pub kind: Option<StoreType>,
}

impl StoreSpec {
    /// The store's password: `password`, else the first line of
    /// `passwordPath`'s file.
    pub fn password(&self) -> Result<Option<String>, TlsError> {
        if let Some(password) = &self.password {
            return Ok(Some(password.clone()));
        }
        let Some(path) = &self.password_path else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|source| TlsError::Read {
            path: path.clone(),
            source,
        })?;
        Ok(Some(text.lines().next().unwrap_or("").to_owned()))
    }

    fn set(&mut self, field: &str, raw_key: &str, value: &str) -> Result<bool, TlsError> {
        match field {
            "location" => self.location = Some(PathBuf::from(value)),
            "password" => self.password = Some(value.to_owned()),
            "passwordPath" => self.password_path = Some(PathBuf::from(value)),
            "type" => {
                self.kind =
                    Some(StoreType::parse(value).ok_or_else(|| {
                        setting(raw_key, value, "expected PEM, PKCS12, JKS or BCFKS")
                    })?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Everything `ssl.*` says, with ZooKeeper's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub key_store: StoreSpec,
    pub trust_store: StoreSpec,
    pub client_auth: ClientAuth,
    /// `ssl.protocol`: the newest protocol to speak (TLSv1.3).
    pub protocol: String,
    /// `ssl.enabledProtocols`; by default `protocol` and, for TLSv1.3,
    /// TLSv1.2 too.
    pub enabled_protocols: Option<Vec<String>>,
    /// `ssl.ciphersuites`, by their IANA (Java) names; `None` for rustls'
    /// defaults.
    pub cipher_suites: Option<Vec<String>>,
    /// `ssl.hostnameVerification`: a client checks that the server's
    /// certificate names the host it dialled.
    pub hostname_verification: bool,
    /// `ssl.handshakeDetectionTimeoutMillis`: how long a new connection
    /// has to complete its handshake.
    pub handshake_timeout_ms: u64,
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            key_store: StoreSpec::default(),
            trust_store: StoreSpec::default(),
            client_auth: ClientAuth::Need,
            protocol: "TLSv1.3".into(),
            enabled_protocols: None,
            cipher_suites: None,
            hostname_verification: true,
            handshake_timeout_ms: 5000,
        }
    }
}

impl TlsSettings {
    /// Takes one key, named without its `ssl.` prefix (`keyStore.location`);
    /// `Ok(false)` for a key that is not one of these. `raw_key` is the key
    /// as written, for messages.
    pub fn set(&mut self, key: &str, raw_key: &str, value: &str) -> Result<bool, TlsError> {
        if let Some(field) = key.strip_prefix("keyStore.") {
            return self.key_store.set(field, raw_key, value);
        }
        if let Some(field) = key.strip_prefix("trustStore.") {
            return self.trust_store.set(field, raw_key, value);
        }
        match key {
            "clientAuth" => {
                self.client_auth = match value.to_ascii_lowercase().as_str() {
                    "none" => ClientAuth::None,
                    "want" => ClientAuth::Want,
                    "need" => ClientAuth::Need,
                    _ => return Err(setting(raw_key, value, "expected none, want or need")),
                }
            }
            "protocol" => self.protocol = value.to_owned(),
            "enabledProtocols" => self.enabled_protocols = Some(list(value)),
            "ciphersuites" => self.cipher_suites = Some(list(value)),
            "hostnameVerification" => self.hostname_verification = boolean(raw_key, value)?,
            "handshakeDetectionTimeoutMillis" => {
                self.handshake_timeout_ms = value
                    .parse()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .ok_or_else(|| setting(raw_key, value, "expected milliseconds above 0"))?
            }
            "authProvider" if value == "x509" => {}
            "authProvider" => {
                return Err(setting(
                    raw_key,
                    value,
                    "Paddock authenticates certificates with the x509 provider only",
                ))
            }
            "crl" | "ocsp" if !boolean(raw_key, value)? => {}
            "crl" | "ocsp" => {
                return Err(setting(
                    raw_key,
                    value,
                    "revocation checking is not supported; remove the key or set it to false",
                ))
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn boolean(key: &str, value: &str) -> Result<bool, TlsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(setting(key, value, "expected true or false")),
    }
}

pub(crate) fn setting(key: &str, value: &str, reason: &str) -> TlsError {
    TlsError::Setting {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zookeepers_keys() {
        let mut s = TlsSettings::default();
        for (key, value) in [
            ("keyStore.location", "/k.pem"),
            ("keyStore.password", "pw"),
            ("trustStore.location", "/t.p12"),
            ("trustStore.type", "pkcs12"),
            ("clientAuth", "WANT"),
            ("enabledProtocols", "TLSv1.2, TLSv1.3"),
            ("hostnameVerification", "false"),
            ("authProvider", "x509"),
            ("ocsp", "false"),
        ] {
            assert!(s.set(key, key, value).unwrap(), "{key}");
        }
        assert_eq!(s.key_store.location.as_deref(), Some(Path::new("/k.pem")));
        assert_eq!(s.key_store.password().unwrap().as_deref(), Some("pw"));
        assert_eq!(s.trust_store.kind, Some(StoreType::Pkcs12));
        assert_eq!(s.client_auth, ClientAuth::Want);
        assert_eq!(
            s.enabled_protocols,
            Some(vec!["TLSv1.2".to_owned(), "TLSv1.3".to_owned()])
        );
        assert!(!s.hostname_verification);
        assert!(!s.set("sslProvider", "sslProvider", "JDK").unwrap());
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        for (key, value) in [
            ("clientAuth", "sometimes"),
            ("keyStore.type", "PKCS11"),
            ("authProvider", "custom"),
            ("crl", "true"),
            ("handshakeDetectionTimeoutMillis", "0"),
        ] {
            assert!(
                TlsSettings::default().set(key, key, value).is_err(),
                "{key}"
            );
        }
    }

    #[test]
    fn store_types_from_extensions() {
        assert_eq!(
            StoreType::from_path(Path::new("a/b.PEM")),
            Some(StoreType::Pem)
        );
        assert_eq!(
            StoreType::from_path(Path::new("b.pfx")),
            Some(StoreType::Pkcs12)
        );
        assert_eq!(StoreType::from_path(Path::new("b")), None);
    }
}
