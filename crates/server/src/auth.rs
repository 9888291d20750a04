//! Who a connection is: the ids it carries into ACL checks.
//!
//! Every connection starts as `ip:<address>`. `addauth digest user:pass`
//! adds `digest:user:<base64 sha1>`; the configured super digest adds
//! `super:` too, which passes every ACL. `addauth ip` adds the connection's
//! own address again. SASL adds `sasl:<user>`.

use std::net::IpAddr;

use base64::Engine as _;
use jute::Id;
use sha1::{Digest as _, Sha1};

/// `user:base64(sha1(credentials))`, ZooKeeper's digest id for
/// `credentials` (`DigestAuthenticationProvider.generateDigest`): the user
/// is what comes before the first colon, or all of it when there is none,
/// and the hash is over the whole string either way.
pub fn digest_id(credentials: &str) -> String {
    let user = credentials.split(':').next().unwrap_or_default();
    let hash = Sha1::digest(credentials.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// The `ip` id of a client at `addr`, written as Java's `getHostAddress`
/// writes it: an IPv4 client on a dual-stack listener is its IPv4 address,
/// and IPv6 is eight uncompressed hexadecimal groups.
pub fn ip_id(addr: IpAddr) -> Id {
    let text = match addr.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => v6
            .segments()
            .iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join(":"),
    };
    Id::new("ip", text)
}

/// The ids a client certificate with `subject` grants: `x509:<subject>`,
/// and `super` too when it is `X509AuthenticationProvider.superUser`.
pub fn certificate_ids(subject: String, super_user: Option<&str>) -> Vec<Id> {
    let mut ids = vec![Id::new("x509", subject.clone())];
    if super_user == Some(subject.as_str()) {
        ids.push(Id::new("super", subject));
    }
    ids
}

/// The ids an `auth` packet from a client at `remote` grants, or `None`
/// when it is refused (the connection is then told `AuthFailed` and
/// closed). ZooKeeper's server providers by default: `digest` accepts any
/// credentials but null, decoding them as Java's `new String(bytes)` does
/// (invalid UTF-8 replaced); `ip` accepts anything and grants the client's
/// own address. Every other scheme has no provider and fails.
pub fn authenticate(
    scheme: &str,
    auth: Option<&[u8]>,
    remote: IpAddr,
    super_digest: Option<&str>,
) -> Option<Vec<Id>> {
    match scheme {
        "digest" => {
            let id = digest_id(&String::from_utf8_lossy(auth?));
            let mut ids = Vec::with_capacity(2);
            if super_digest == Some(id.as_str()) {
                ids.push(Id::new("super", ""));
            }
            ids.push(Id::new("digest", id));
            Some(ids)
        }
        "ip" => Some(vec![ip_id(remote)]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn digest_matches_zookeeper() {
        // DigestAuthenticationProvider.generateDigest("super:test")
        assert_eq!(
            digest_id("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
        // No colon: the whole string is the user and the hash input.
        assert_eq!(digest_id("blah"), "blah:W/H9kn37hnlJai5s8Ay+UMHIcUU=");
        assert_eq!(digest_id(""), ":2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
    }

    #[test]
    fn digest_accepts_what_zookeeper_accepts() {
        let ids = |auth: Option<&[u8]>| authenticate("digest", auth, LOCAL, None);
        assert_eq!(
            ids(Some(b"blah")),
            Some(vec![Id::new("digest", "blah:W/H9kn37hnlJai5s8Ay+UMHIcUU=")])
        );
        // Java replaces invalid UTF-8 with U+FFFD before hashing.
        assert_eq!(
            ids(Some(b"u:\xff")),
            Some(vec![Id::new("digest", digest_id("u:\u{fffd}"))])
        );
        assert_eq!(ids(None), None, "null credentials fail");
    }

    #[test]
    fn super_digest_grants_super() {
        let ids = authenticate(
            "digest",
            Some(b"super:test"),
            LOCAL,
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU="),
        )
        .unwrap();
        assert_eq!(ids[0], Id::new("super", ""));
        assert!(authenticate("kerberos", Some(b"x"), LOCAL, None).is_none());
        assert!(authenticate("world", Some(b"anyone"), LOCAL, None).is_none());
    }

    #[test]
    fn ip_grants_the_clients_own_address() {
        assert_eq!(
            authenticate("ip", Some(b"10.0.0.1"), LOCAL, None),
            Some(vec![Id::new("ip", "127.0.0.1")])
        );
        assert_eq!(
            ip_id("::ffff:10.1.2.3".parse().unwrap()),
            Id::new("ip", "10.1.2.3")
        );
        assert_eq!(
            ip_id("::1".parse().unwrap()),
            Id::new("ip", "0:0:0:0:0:0:0:1")
        );
    }
}
