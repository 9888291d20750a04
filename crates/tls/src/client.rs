//! The client's side: the server's certificate checked against the trust
//! store (and, unless `ssl.hostnameVerification=false`, against the host
//! dialled), and the key store's certificate offered when there is one.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::server::{provider, trust_roots, versions};
use crate::settings::TlsSettings;
use crate::store::load_identity;
use crate::TlsError;

/// A rustls client configuration from the settings.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(provider(settings)?);
    let roots = trust_roots(settings, "a TLS client")?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Config(format!("checking server certificates: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.hostname_verification {
        verifier
    } else {
        Arc::new(AnyName(verifier))
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(settings)?)
        .map_err(|e| {
            TlsError::Config(format!("no protocol in common with the cipher suites: {e}"))
        })?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match settings.key_store.location {
        None => builder.with_no_client_auth(),
        Some(_) => {
            let identity = load_identity(&settings.key_store)?;
            builder
                .with_client_auth_cert(identity.chain, identity.key)
                .map_err(|e| {
                    TlsError::Config(format!(
                        "the key store's key and certificate do not go together: {e}"
                    ))
                })?
        }
    };
    Ok(Arc::new(config))
}

/// WebPKI's checks but the name: `ssl.hostnameVerification=false`.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
