//! Who a connection is: the ids it carries into ACL checks.
//!
//! Every connection starts as `ip:<address>`. `addauth digest user:pass`
//! adds `digest:user:<base64 sha1>`; the configured super digest adds
//! `super:` too, which passes every ACL. SASL adds `sasl:<user>`.

use base64::Engine as _;
use jute::Id;
use sha1::{Digest as _, Sha1};

/// `user:base64(sha1("user:password"))`, ZooKeeper's digest id for
/// credentials `user:password` (`DigestAuthenticationProvider.generateDigest`).
pub fn digest_id(credentials: &str) -> Option<String> {
    let (user, _) = credentials.split_once(':')?;
    let hash = Sha1::digest(credentials.as_bytes());
    Some(format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    ))
}

/// The ids an `auth` packet grants, or `None` when the credentials are not
/// acceptable (the connection is then told `AuthFailed`).
pub fn authenticate(scheme: &str, auth: &[u8], super_digest: Option<&str>) -> Option<Vec<Id>> {
    match scheme {
        "digest" => {
            let credentials = std::str::from_utf8(auth).ok()?;
            let id = digest_id(credentials)?;
            let mut ids = Vec::with_capacity(2);
            if super_digest == Some(id.as_str()) {
                ids.push(Id::new("super", ""));
            }
            ids.push(Id::new("digest", id));
            Some(ids)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_zookeeper() {
        // DigestAuthenticationProvider.generateDigest("super:test")
        assert_eq!(
            digest_id("super:test").as_deref(),
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
        );
        assert_eq!(digest_id("nocolon"), None);
    }

    #[test]
    fn super_digest_grants_super() {
        let ids = authenticate(
            "digest",
            b"super:test",
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU="),
        )
        .unwrap();
        assert_eq!(ids[0], Id::new("super", ""));
        assert!(authenticate("kerberos", b"x", None).is_none());
    }
}
