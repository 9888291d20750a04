//! Key and trust stores, PEM or PKCS12. A PEM key store holds the private
//! key (PKCS#8, PKCS#1 or SEC1, unencrypted) and its certificate chain, a
//! PEM trust store the trusted certificates; a PKCS12 key store's key
//! entry and a PKCS12 trust store's certificate entries, opened with the
//! store's password, are the same. JKS and BCFKS are refused with the
//! commands that turn them into PKCS12.

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
    let path = store_path(spec)?;
    if kind(spec, path) == Some(StoreType::Pkcs12) {
        return pkcs12_identity(path, &pkcs12(spec, path)?);
    }
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
    let path = store_path(spec)?;
    if kind(spec, path) == Some(StoreType::Pkcs12) {
        return pkcs12_trust(path, &pkcs12(spec, path)?);
    }
    certificates(path, &read(path)?)
}

fn kind(spec: &StoreSpec, path: &Path) -> Option<StoreType> {
    spec.kind.or_else(|| StoreType::from_path(path))
}

/// The store's path, if it is a format this crate reads.
fn store_path(spec: &StoreSpec) -> Result<&Path, TlsError> {
    let path = spec
        .location
        .as_deref()
        .ok_or_else(|| TlsError::Config("a store without a location".into()))?;
    let convert = match kind(spec, path) {
        None | Some(StoreType::Pem) | Some(StoreType::Pkcs12) => return Ok(path),
        Some(StoreType::Jks) => {
            "a JKS store: Paddock reads PEM and PKCS12; `keytool -importkeystore \
             -srckeystore STORE.jks -destkeystore STORE.p12 -deststoretype PKCS12` converts it"
        }
        Some(StoreType::Bcfks) => {
            "a BCFKS store: Paddock reads PEM and PKCS12; export it to PKCS12"
        }
    };
    Err(store_error(path, convert.into()))
}

fn pkcs12(spec: &StoreSpec, path: &Path) -> Result<p12_keystore::KeyStore, TlsError> {
    let password = spec.password()?.unwrap_or_default();
    p12_keystore::KeyStore::from_pkcs12(&read(path)?, &password).map_err(|e| {
        store_error(
            path,
            format!("a PKCS12 store that does not open (is the password right?): {e}"),
        )
    })
}

fn pkcs12_identity(path: &Path, store: &p12_keystore::KeyStore) -> Result<Identity, TlsError> {
    let (_, chain) = store
        .private_key_chain()
        .ok_or_else(|| store_error(path, "no private key entry in the store".into()))?;
    Ok(Identity {
        chain: chain
            .chain()
            .iter()
            .map(|cert| CertificateDer::from(cert.as_der().to_vec()))
            .collect(),
        key: PrivateKeyDer::Pkcs8(chain.key().to_vec().into()),
    })
}

fn pkcs12_trust(
    path: &Path,
    store: &p12_keystore::KeyStore,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = store
        .entries()
        .filter_map(|(_, entry)| match entry {
            p12_keystore::KeyStoreEntry::Certificate(cert) => {
                Some(CertificateDer::from(cert.as_der().to_vec()))
            }
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(store_error(
            path,
            "no trusted certificate entry in the store".into(),
        ));
    }
    Ok(certs)
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
    fn java_only_stores_are_named_with_how_to_convert() {
        for name in ["s.jks", "s.bcfks"] {
            let error = load_trust(&spec(Path::new(name))).unwrap_err().to_string();
            assert!(error.contains("Paddock reads PEM and PKCS12"), "{error}");
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
