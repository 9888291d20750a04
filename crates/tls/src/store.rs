//! Key and trust stores. PEM is read: a key store file holds the private
//! key (PKCS#8, PKCS#1 or SEC1, unencrypted) and its certificate chain, a
//! trust store file the trusted certificates. Java's binary stores are
//! refused with the commands that turn them into PEM.

use std::path::Path;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::settings::{StoreSpec, StoreType};
use crate::TlsError;

/// A private key and its certificate chain, leaf first.
#[derive(Debug)]
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// The key store's identity.
pub fn load_identity(spec: &StoreSpec) -> Result<Identity, TlsError> {
    let path = pem_path(spec)?;
    let text = read(path)?;
    let chain = certificates(path, &text)?;
    let key = PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        let hint = if contains(&text, b"ENCRYPTED PRIVATE KEY") {
            " (the key is encrypted: Paddock reads unencrypted keys; \
             `openssl pkcs8 -in KEY.pem -out PLAIN.pem` decrypts one)"
        } else {
            ""
        };
        store_error(path, format!("no private key: {e}{hint}"))
    })?;
    Ok(Identity { chain, key })
}

/// The trust store's certificates.
pub fn load_trust(spec: &StoreSpec) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let path = pem_path(spec)?;
    certificates(path, &read(path)?)
}

fn pem_path(spec: &StoreSpec) -> Result<&Path, TlsError> {
    let path = spec
        .location
        .as_deref()
        .ok_or_else(|| TlsError::Config("a store without a location".into()))?;
    let kind = spec.kind.or_else(|| StoreType::from_path(path));
    let convert = match kind {
        None | Some(StoreType::Pem) => return Ok(path),
        Some(StoreType::Pkcs12) => {
            "a PKCS12 store: Paddock reads PEM; \
             `openssl pkcs12 -in STORE.p12 -out STORE.pem -nodes` converts it"
        }
        Some(StoreType::Jks) => {
            "a JKS store: Paddock reads PEM; `keytool -importkeystore -srckeystore STORE.jks \
             -destkeystore STORE.p12 -deststoretype PKCS12`, then \
             `openssl pkcs12 -in STORE.p12 -out STORE.pem -nodes` converts it"
        }
        Some(StoreType::Bcfks) => "a BCFKS store: Paddock reads PEM; export it to PEM",
    };
    Err(store_error(path, convert.into()))
}

fn certificates(path: &Path, text: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| store_error(path, format!("a certificate that does not parse: {e}")))?;
    if certs.is_empty() {
        return Err(store_error(path, "no certificate in the file".into()));
    }
    Ok(certs)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn store_error(path: &Path, reason: String) -> TlsError {
    TlsError::Store {
        path: path.to_path_buf(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(path: &Path) -> StoreSpec {
        StoreSpec {
            location: Some(path.to_path_buf()),
            ..Default::default()
        }
    }

    #[test]
    fn binary_stores_are_named_with_how_to_convert() {
        for name in ["s.p12", "s.jks", "s.bcfks"] {
            let error = load_trust(&spec(Path::new(name))).unwrap_err().to_string();
            assert!(error.contains("Paddock reads PEM"), "{error}");
        }
    }

    #[test]
    fn files_without_pem_are_refused() {
        let dir = std::env::temp_dir().join(format!("tls-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "nothing here").unwrap();
        assert!(load_trust(&spec(&empty))
            .unwrap_err()
            .to_string()
            .contains("no certificate"));
        let missing = dir.join("missing.pem");
        assert!(matches!(
            load_identity(&spec(&missing)),
            Err(TlsError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
