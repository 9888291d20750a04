//! The server's side: its identity from the key store, client
//! certificates checked against the trust store as `ssl.clientAuth` asks.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, SupportedProtocolVersion};

use crate::settings::{setting, ClientAuth, TlsSettings};
use crate::store::{load_identity, load_trust};
use crate::TlsError;

/// A rustls server configuration from the settings.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    if settings.key_store.location.is_none() {
        return Err(TlsError::Config(
            "a TLS port needs ssl.keyStore.location: the server's key and certificate".into(),
        ));
    }
    let identity = load_identity(&settings.key_store)?;
    let provider = Arc::new(provider(settings)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings)?)
        .map_err(|e| {
            TlsError::Config(format!("no protocol in common with the cipher suites: {e}"))
        })?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = trust_roots(
                settings,
                "ssl.clientAuth=need (ZooKeeper's default) or want",
            )?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                ClientAuth::Want => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Config(format!("checking client certificates: {e}")))?,
            )
        }
    };
    let config = builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| {
            TlsError::Config(format!(
                "the key store's key and certificate do not go together: {e}"
            ))
        })?;
    Ok(Arc::new(config))
}

/// The subject of the client's certificate, if it sent one, as the `x509`
/// scheme names it.
pub fn peer_subject(connection: &ServerConnection) -> Option<String> {
    let leaf = connection.peer_certificates()?.first()?;
    crate::subject::subject_name(leaf).ok()
}

/// The trust store's certificates as roots; `needed_by` says what
/// requires them.
pub(crate) fn trust_roots(
    settings: &TlsSettings,
    needed_by: &str,
) -> Result<RootCertStore, TlsError> {
    if settings.trust_store.location.is_none() {
        return Err(TlsError::Config(format!(
            "{needed_by} needs ssl.trustStore.location: the certificates to trust"
        )));
    }
    let mut roots = RootCertStore::empty();
    for cert in load_trust(&settings.trust_store)? {
        roots.add(cert).map_err(|e| {
            TlsError::Config(format!(
                "{}: a certificate that cannot be trusted: {e}",
                settings
                    .trust_store
                    .location
                    .as_deref()
                    .unwrap_or_else(|| std::path::Path::new(""))
                    .display()
            ))
        })?;
    }
    Ok(roots)
}

/// ring's provider with the cipher suites `ssl.ciphersuites` names (Java's
/// names); names rustls does not implement are logged and skipped.
pub(crate) fn provider(settings: &TlsSettings) -> Result<CryptoProvider, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(wanted) = &settings.cipher_suites else {
        return Ok(provider);
    };
    let java_name = |suite: &rustls::SupportedCipherSuite| {
        format!("{:?}", suite.suite()).replacen("TLS13_", "TLS_", 1)
    };
    let known: Vec<String> = provider.cipher_suites.iter().map(java_name).collect();
    for name in wanted.iter().filter(|name| !known.contains(name)) {
        tracing::warn!("ssl.ciphersuites: {name} is not implemented here; skipping it");
    }
    provider
        .cipher_suites
        .retain(|suite| wanted.contains(&java_name(suite)));
    if provider.cipher_suites.is_empty() {
        return Err(setting(
            "ssl.ciphersuites",
            &wanted.join(","),
            &format!(
                "none of these is implemented; choose from {}",
                known.join(",")
            ),
        ));
    }
    Ok(provider)
}

/// The protocol versions `ssl.enabledProtocols` (or `ssl.protocol`) allow.
pub(crate) fn versions(
    settings: &TlsSettings,
) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
    let (key, names) = match &settings.enabled_protocols {
        Some(names) => ("ssl.enabledProtocols", names.clone()),
        None => match settings.protocol.as_str() {
            "TLSv1.3" | "TLS" => ("ssl.protocol", vec!["TLSv1.3".into(), "TLSv1.2".into()]),
            other => ("ssl.protocol", vec![other.to_owned()]),
        },
    };
    let mut versions = Vec::new();
    for name in &names {
        match name.as_str() {
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            "TLS" => versions.extend([&rustls::version::TLS13, &rustls::version::TLS12]),
            other => tracing::warn!("{key}: {other} is not spoken here (TLSv1.2 and TLSv1.3 are)"),
        }
    }
    if versions.is_empty() {
        return Err(setting(
            key,
            &names.join(","),
            "Paddock speaks TLSv1.2 and TLSv1.3 only",
        ));
    }
    Ok(versions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_by_javas_names() {
        let mut s = TlsSettings::default();
        assert_eq!(versions(&s).unwrap().len(), 2);
        s.protocol = "TLSv1.2".into();
        assert_eq!(versions(&s).unwrap(), vec![&rustls::version::TLS12]);
        s.enabled_protocols = Some(vec!["TLSv1.1".into()]);
        assert!(versions(&s).is_err());
        s.enabled_protocols = Some(vec!["TLSv1.1".into(), "TLSv1.3".into()]);
        assert_eq!(versions(&s).unwrap(), vec![&rustls::version::TLS13]);
    }

    #[test]
    fn cipher_suites_by_javas_names() {
        let mut s = TlsSettings {
            cipher_suites: Some(vec![
                "TLS_AES_128_GCM_SHA256".into(),
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
                "TLS_RSA_WITH_AES_128_CBC_SHA".into(),
            ]),
            ..Default::default()
        };
        assert_eq!(provider(&s).unwrap().cipher_suites.len(), 2);
        s.cipher_suites = Some(vec!["TLS_RSA_WITH_AES_128_CBC_SHA".into()]);
        assert!(provider(&s).is_err());
    }

    #[test]
    fn a_tls_port_needs_its_stores() {
        let s = TlsSettings::default();
        assert!(server_config(&s)
            .unwrap_err()
            .to_string()
            .contains("ssl.keyStore.location"));
    }
}
