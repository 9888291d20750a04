//! Who may run the commands that hand out or replace a server's whole
//! tree (`snapshot`, `restore`), as ZooKeeper 3.9's AdminServer decides:
//! the `Authorization` header names a scheme and its credentials
//! (`digest user:password`, `ip`, `x509`), which become ids as a client's
//! `addauth` would, and those ids need every permission on the root znode,
//! each bit checked on its own. There is no switch to turn it off, as in
//! ZooKeeper; the root's default ACL (`world:anyone`, all) lets anyone who
//! authenticates at all through.

use axum::http::{HeaderValue, StatusCode};
use jute::{perms, Id};
use server::Monitor;

use crate::connections::Peer;

/// The znode whose ACL guards these commands.
const ROOT: &str = "/";

/// Why a command was refused: its status and `error`, ZooKeeper's words.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub error: &'static str,
}

impl Refusal {
    const fn new(status: StatusCode, error: &'static str) -> Self {
        Self { status, error }
    }
}

/// Whether the request with `header` from `peer` may run a command that
/// needs every permission on the root.
pub fn authorize(
    monitor: &Monitor,
    header: Option<&HeaderValue>,
    peer: &Peer,
) -> Result<(), Refusal> {
    let Some(header) = header else {
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "Auth info is missing for the command",
        ));
    };
    let ids = authenticate(monitor, header.as_bytes(), peer)
        .ok_or(Refusal::new(StatusCode::UNAUTHORIZED, "Not authenticated"))?;
    match monitor.permits(ROOT, perms::ALL, &ids) {
        Some(true) => Ok(()),
        Some(false) => Err(Refusal::new(StatusCode::FORBIDDEN, "Not authorized")),
        None => Err(Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Error occurred during auth",
        )),
    }
}

/// The ids the header proves, or `None` when it proves nothing: a scheme
/// without a provider, a malformed header, `x509` without a certificate.
fn authenticate(monitor: &Monitor, header: &[u8], peer: &Peer) -> Option<Vec<Id>> {
    let (scheme, credentials) = scheme_and_credentials(std::str::from_utf8(header).ok()?)?;
    let config = monitor.config();
    let ids = match scheme {
        "x509" => server::certificate_ids(
            peer.subject.clone()?,
            config.client_tls.super_user.as_deref(),
        ),
        _ => server::authenticate(
            scheme,
            credentials.map(str::as_bytes),
            peer.remote.ip(),
            config.super_digest.as_deref(),
        )?,
    };
    (!ids.is_empty()).then_some(ids)
}

/// The header split on single spaces as Java's `String.split(" ")` splits
/// it (empty strings at the end dropped), which must leave a scheme and at
/// most one more part.
fn scheme_and_credentials(header: &str) -> Option<(&str, Option<&str>)> {
    let mut parts: Vec<&str> = header.split(' ').collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    match parts[..] {
        [scheme] => Some((scheme, None)),
        [scheme, credentials] => Some((scheme, Some(credentials))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_splits_as_java_splits_it() {
        assert_eq!(
            scheme_and_credentials("digest root:pw"),
            Some(("digest", Some("root:pw")))
        );
        assert_eq!(scheme_and_credentials("x509"), Some(("x509", None)));
        assert_eq!(scheme_and_credentials("x509 "), Some(("x509", None)));
        assert_eq!(scheme_and_credentials("ip  "), Some(("ip", None)));
        assert_eq!(
            scheme_and_credentials("digestroot:pw"),
            Some(("digestroot:pw", None))
        );
        assert_eq!(scheme_and_credentials("digest root pw"), None);
        assert_eq!(scheme_and_credentials("digest  root:pw"), None);
        assert_eq!(scheme_and_credentials(" digest root:pw"), None);
        assert_eq!(scheme_and_credentials(""), Some(("", None)));
    }
}
