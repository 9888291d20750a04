//! ACL checks and validation, as ZooKeeper's `ZooKeeperServer.checkACL`,
//! `PrepRequestProcessor.fixupACL` and the default authentication
//! providers (`ip` and `digest`; `super` is the digest superuser's id).
//!
//! The auth ids a request carries are decided by the server when it stamps
//! the Txn (the connection's `ip:<address>` plus whatever `addauth` proved),
//! so these functions are pure.

use std::sync::Arc;

use jute::{Acl, ErrorCode, Id};

/// A node's ACL, shared between the versions of the tree and the watch
/// triggers that carry it (ZooKeeper shares them through its ACL cache).
/// A thin pointer (`Arc<Vec>`, not `Arc<[Acl]>`'s two words): with the
/// children set boxed, a node and its reference counts took 128 bytes,
/// the allocator's size class below the 160 they took: 486 -> 457 MB
/// resident for 1M znodes (`cargo run --release -p tree --example
/// tree_costs -- 1000000 1000000 1000`). With the data boxed too, they
/// took 112, and 96 with the data and its length in twelve bytes and one
/// count (see `Node`).
pub type AclList = Arc<Vec<Acl>>;

/// Schemes whose ids `auth` ACLs expand to: those whose provider answers
/// `isAuthenticated() == true` (digest, SASL and x509 when configured, which
/// is the only way a client gets a `sasl` or `x509` id). `ip` answers
/// false; `super` has no provider and is skipped.
const AUTHENTICATED_SCHEMES: &[&str] = &["digest", "sasl", "x509"];

/// `ZooKeeperServer.checkACL`: may a client with `auth` ids do `perm`?
///
/// An empty ACL admits everyone; a `super` id admits everything;
/// `world:anyone` matches all; `ip` ids match by address and CIDR mask;
/// `digest` and `x509` ids match exactly; `sasl` ids match exactly or when
/// the client is `sasl:super` (as `SASLAuthenticationProvider`, should one
/// be set).
pub fn check_acl(acl: &[Acl], perm: i32, auth: &[Id]) -> bool {
    if acl.is_empty() || auth.iter().any(|id| id.scheme == "super") {
        return true;
    }
    acl.iter().any(|entry| {
        if entry.perms & perm == 0 {
            return false;
        }
        if entry.id.scheme == "world" && entry.id.id == "anyone" {
            return true;
        }
        auth.iter()
            .filter(|id| id.scheme == entry.id.scheme)
            .any(|id| scheme_matches(&entry.id.scheme, &id.id, &entry.id.id))
    })
}

/// `AuthenticationProvider.matches` for the schemes we know; an unknown
/// scheme has no provider and never matches.
fn scheme_matches(scheme: &str, id: &str, acl_expr: &str) -> bool {
    match scheme {
        "digest" => id == acl_expr,
        "ip" => ip_matches(id, acl_expr),
        "sasl" => id == "super" || id == acl_expr,
        "x509" => id == acl_expr,
        _ => false,
    }
}

/// `PrepRequestProcessor.fixupACL`: drop duplicates (keeping the first),
/// reject an empty list, expand `auth` entries to the client's
/// authenticated ids and check every other id with its provider. Any
/// failure is `InvalidAcl`.
pub fn fixup_acl(acl: &[Acl], auth: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for entry in acl {
        if !unique.contains(&entry) {
            unique.push(entry);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut out = Vec::with_capacity(unique.len());
    for entry in unique {
        let id = &entry.id;
        if id.scheme == "world" && id.id == "anyone" {
            out.push(entry.clone());
        } else if id.scheme == "auth" {
            let before = out.len();
            out.extend(
                auth.iter()
                    .filter(|cid| AUTHENTICATED_SCHEMES.contains(&cid.scheme.as_str()))
                    .map(|cid| Acl {
                        perms: entry.perms,
                        id: cid.clone(),
                    }),
            );
            if out.len() == before {
                return Err(ErrorCode::InvalidAcl);
            }
        } else if id_is_valid(&id.scheme, &id.id) {
            out.push(entry.clone());
        } else {
            return Err(ErrorCode::InvalidAcl);
        }
    }
    Ok(out)
}

/// `AuthenticationProvider.isValid` for the registered providers. `world`
/// (other than `anyone`, handled by the caller), `super` and any other
/// scheme have no provider, so ZooKeeper rejects them. `sasl` and `x509`
/// are valid here (their providers accept any id); a server without SASL
/// or TLS configured refuses such ACLs before proposing, after the checks that
/// come before this one (`DataTree::create_checks_before_acl`), as
/// ZooKeeper does without that provider.
fn id_is_valid(scheme: &str, id: &str) -> bool {
    match scheme {
        "digest" => digest_id_is_valid(id),
        "ip" => ip_id_is_valid(id),
        "sasl" | "x509" => true,
        _ => false,
    }
}

/// `DigestAuthenticationProvider.isValid`: `id.split(":").length == 2`,
/// where Java's split drops trailing empty strings (so `"u:"` is invalid
/// and `":h"` valid).
fn digest_id_is_valid(id: &str) -> bool {
    java_split_len(id, ':') == 2
}

/// The length of Java's `s.split(String.valueOf(sep))`.
fn java_split_len(s: &str, sep: char) -> usize {
    if s.is_empty() {
        return 1;
    }
    let parts: Vec<&str> = s.split(sep).collect();
    let trailing_empty = parts.iter().rev().take_while(|p| p.is_empty()).count();
    parts.len() - trailing_empty
}

/// `GetACL` without ADMIN permission shows digest ids as `user:x`
/// (FinalRequestProcessor, `id.replaceAll(":.*", ":x")`).
pub fn redact_digest(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|entry| {
            if entry.id.scheme == "digest" {
                Acl {
                    perms: entry.perms,
                    id: Id::new("digest", replace_colon_tail(&entry.id.id)),
                }
            } else {
                entry.clone()
            }
        })
        .collect()
}

/// Java's `s.replaceAll(":.*", ":x")`: `.` stops at line terminators, so
/// each line's tail from its first colon becomes `:x`.
fn replace_colon_tail(s: &str) -> String {
    let is_line_end = |c: char| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
    let mut out = String::with_capacity(s.len());
    let mut skipping = false;
    for c in s.chars() {
        if skipping {
            if is_line_end(c) {
                skipping = false;
                out.push(c);
            }
        } else if c == ':' {
            out.push_str(":x");
            skipping = true;
        } else {
            out.push(c);
        }
    }
    out
}

/// `IPAuthenticationProvider.isValid`: an address with an optional
/// `/bits` mask no longer than the address.
fn ip_id_is_valid(id: &str) -> bool {
    let (addr, mask) = split_mask(id);
    let Some(addr) = addr_to_bytes(addr) else {
        return false;
    };
    match mask {
        None => true,
        Some(bits) => parse_mask(bits, addr.len()).is_some(),
    }
}

/// `IPAuthenticationProvider.matches`: both addresses masked to the ACL's
/// prefix length, then compared byte for byte.
fn ip_matches(id: &str, acl_expr: &str) -> bool {
    let (addr, mask) = split_mask(acl_expr);
    let Some(mut acl_addr) = addr_to_bytes(addr) else {
        return false;
    };
    let bits = match mask {
        None => acl_addr.len() * 8,
        Some(bits) => match parse_mask(bits, acl_addr.len()) {
            Some(bits) => bits,
            None => return false,
        },
    };
    apply_mask(&mut acl_addr, bits);
    let Some(mut remote) = addr_to_bytes(id) else {
        return false;
    };
    apply_mask(&mut remote, bits);
    remote == acl_addr
}

/// Java's `s.split("/", 2)`.
fn split_mask(s: &str) -> (&str, Option<&str>) {
    match s.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits)),
        None => (s, None),
    }
}

fn parse_mask(bits: &str, addr_len: usize) -> Option<usize> {
    let bits = java_parse_int(bits, 10)?;
    if bits < 0 || bits as usize > addr_len * 8 {
        return None;
    }
    Some(bits as usize)
}

/// `IPAuthenticationProvider.mask`: keep the first `bits` bits.
fn apply_mask(bytes: &mut [u8], bits: usize) {
    let start = bits / 8;
    let mut start_mask: u8 = !(((1u16 << (8 - bits % 8)) - 1) as u8);
    for b in bytes.iter_mut().skip(start) {
        *b &= start_mask;
        start_mask = 0;
    }
}

/// `IPAuthenticationProvider.addr2Bytes`: IPv6 if there is a `:`, IPv4 if
/// there is a `.`, else nothing.
fn addr_to_bytes(addr: &str) -> Option<Vec<u8>> {
    if addr.contains(':') {
        v6_to_bytes(addr)
    } else if addr.contains('.') {
        v4_to_bytes(addr)
    } else {
        None
    }
}

fn v4_to_bytes(addr: &str) -> Option<Vec<u8>> {
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    parts
        .iter()
        .map(|p| {
            let v = java_parse_int(p, 10)?;
            u8::try_from(v).ok()
        })
        .collect()
}

/// `IPAuthenticationProvider.parseV6addr`, including its leniency (a
/// segment may carry a sign, as `Integer.parseInt` accepts one).
fn v6_to_bytes(addr: &str) -> Option<Vec<u8>> {
    let halves: Vec<&str> = addr.split("::").collect();
    let split_segments = |s: &str| -> Vec<String> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split(':').map(str::to_owned).collect()
        }
    };
    let (head, tail) = match halves.len() {
        1 => {
            let head: Vec<String> = halves[0].split(':').map(str::to_owned).collect();
            if head.len() != 8 {
                return None;
            }
            (head, Vec::new())
        }
        2 => {
            let head = split_segments(halves[0]);
            let tail = split_segments(halves[1]);
            if head.len() + tail.len() >= 8 {
                return None;
            }
            (head, tail)
        }
        _ => return None,
    };
    let mut out = vec![0u8; 16];
    write_v6_segments(&mut out[..], 0, &head)?;
    write_v6_segments(&mut out[..], 16 - tail.len() * 2, &tail)?;
    Some(out)
}

fn write_v6_segments(out: &mut [u8], mut at: usize, segments: &[String]) -> Option<()> {
    for segment in segments {
        if segment.is_empty() || segment.encode_utf16().count() > 4 {
            return None;
        }
        let value = java_parse_int(segment, 16)?;
        out[at] = ((value >> 8) & 0xff) as u8;
        out[at + 1] = (value & 0xff) as u8;
        at += 2;
    }
    Some(())
}

/// Java's `Integer.parseInt(s, radix)` for ASCII digits: an optional sign,
/// at least one digit, no overflow. (Java also accepts non-ASCII Unicode
/// digits; no real address contains them.)
fn java_parse_int(s: &str, radix: u32) -> Option<i32> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for c in digits.chars() {
        value = value * i64::from(radix) + i64::from(c.to_digit(radix)?);
        if value > i64::from(i32::MAX) + 1 {
            return None;
        }
    }
    let value = if negative { -value } else { value };
    i32::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jute::perms;

    fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id::new(scheme, id),
        }
    }

    #[test]
    fn world_anyone_and_perm_bits() {
        // ZooKeeperServer.checkACL
        let a = [acl(perms::READ, "world", "anyone")];
        assert!(check_acl(&a, perms::READ, &[]));
        assert!(!check_acl(&a, perms::WRITE, &[]));
        assert!(check_acl(&a, perms::READ | perms::ADMIN, &[]));
        assert!(check_acl(&[], perms::ADMIN, &[]), "empty ACL admits all");
    }

    #[test]
    fn super_passes_everything() {
        let a = [acl(perms::READ, "digest", "u:h")];
        assert!(check_acl(&a, perms::ADMIN, &[Id::new("super", "")]));
    }

    #[test]
    fn digest_matches_exactly() {
        let a = [acl(perms::ALL, "digest", "user:hash=")];
        assert!(check_acl(
            &a,
            perms::WRITE,
            &[Id::new("digest", "user:hash=")]
        ));
        assert!(!check_acl(
            &a,
            perms::WRITE,
            &[Id::new("digest", "user:other")]
        ));
        assert!(!check_acl(&a, perms::WRITE, &[Id::new("ip", "user:hash=")]));
    }

    #[test]
    fn ip_matches_with_masks() {
        // IPAuthenticationProvider.matches
        let client = [Id::new("ip", "10.1.2.3")];
        for (expr, expect) in [
            ("10.1.2.3", true),
            ("10.1.2.4", false),
            ("10.1.0.0/16", true),
            ("10.2.0.0/16", false),
            ("10.1.2.0/24", true),
            ("10.1.2.2/31", true),
            ("10.1.2.0/31", false),
            ("0.0.0.0/0", true),
            ("10.1.2.3/33", false),
            ("10.1.2.3/-1", false),
            ("10.1.2.3/x", false),
        ] {
            let a = [acl(perms::READ, "ip", expr)];
            assert_eq!(check_acl(&a, perms::READ, &client), expect, "{expr}");
        }
        let v6 = [Id::new("ip", "0:0:0:0:0:0:0:1")];
        assert!(check_acl(
            &[acl(perms::READ, "ip", "::1")],
            perms::READ,
            &v6
        ));
        assert!(check_acl(
            &[acl(perms::READ, "ip", "::/0")],
            perms::READ,
            &v6
        ));
        assert!(!check_acl(
            &[acl(perms::READ, "ip", "::2")],
            perms::READ,
            &v6
        ));
        assert!(!check_acl(
            &[acl(perms::READ, "ip", "10.0.0.1")],
            perms::READ,
            &v6
        ));
    }

    #[test]
    fn ip_validity() {
        // IPAuthenticationProvider.isValid
        for id in [
            "1.2.3.4",
            "1.2.3.4/8",
            "::1",
            "fe80::1/64",
            "+1.2.3.4",
            "1:2:3:4:5:6:7:8",
        ] {
            assert!(ip_id_is_valid(id), "{id}");
        }
        for id in [
            "1.2.3",
            "1.2.3.256",
            "host",
            "1.2.3.4/33",
            "1::2::3",
            "1:2:3:4:5:6:7:8:9",
            "12345::",
            "1.2.3.4/",
        ] {
            assert!(!ip_id_is_valid(id), "{id}");
        }
    }

    #[test]
    fn digest_validity_follows_java_split() {
        assert!(digest_id_is_valid("user:hash"));
        assert!(digest_id_is_valid(":hash"));
        assert!(!digest_id_is_valid("user:"));
        assert!(!digest_id_is_valid("user"));
        assert!(!digest_id_is_valid("a:b:c"));
        assert!(!digest_id_is_valid(""));
        assert!(!digest_id_is_valid(":"));
    }

    #[test]
    fn fixup_expands_auth_and_rejects_bad_ids() {
        // PrepRequestProcessor.fixupACL
        let ids = [
            Id::new("ip", "127.0.0.1"),
            Id::new("digest", "u:h"),
            Id::new("super", ""),
        ];
        assert_eq!(
            fixup_acl(&[acl(perms::ALL, "auth", "")], &ids),
            Ok(vec![acl(perms::ALL, "digest", "u:h")])
        );
        assert_eq!(
            fixup_acl(&[acl(perms::ALL, "auth", "")], &ids[..1]),
            Err(ErrorCode::InvalidAcl),
            "ip ids are not 'authenticated'"
        );
        assert_eq!(fixup_acl(&[], &ids), Err(ErrorCode::InvalidAcl));
        for bad in [
            acl(1, "world", "someone"),
            acl(1, "digest", "nocolon"),
            acl(1, "ip", "nohost"),
            acl(1, "super", ""),
            acl(1, "kerberos", "me"),
        ] {
            assert_eq!(
                fixup_acl(std::slice::from_ref(&bad), &ids),
                Err(ErrorCode::InvalidAcl),
                "{bad:?}"
            );
        }
        let sasl = acl(1, "sasl", "me");
        assert_eq!(
            fixup_acl(&[acl(1, "x509", "CN=me")], &ids),
            Ok(vec![acl(1, "x509", "CN=me")]),
            "x509 ids are checked by the server against its configuration"
        );
        assert_eq!(
            fixup_acl(std::slice::from_ref(&sasl), &ids),
            Ok(vec![sasl.clone()]),
            "sasl ids are checked by the server against its configuration"
        );
        let dup = [
            acl(1, "world", "anyone"),
            acl(1, "world", "anyone"),
            acl(2, "ip", "1.2.3.4/8"),
        ];
        assert_eq!(
            fixup_acl(&dup, &[]),
            Ok(vec![acl(1, "world", "anyone"), acl(2, "ip", "1.2.3.4/8")])
        );
    }

    #[test]
    fn redaction() {
        let a = [acl(1, "digest", "user:secret"), acl(1, "ip", "1.2.3.4")];
        assert_eq!(
            redact_digest(&a),
            vec![acl(1, "digest", "user:x"), acl(1, "ip", "1.2.3.4")]
        );
        assert_eq!(replace_colon_tail("a:b:c"), "a:x");
        assert_eq!(replace_colon_tail("a:b\nc:d"), "a:x\nc:x");
        assert_eq!(replace_colon_tail("nocolon"), "nocolon");
    }

    #[test]
    fn java_int_parsing() {
        assert_eq!(java_parse_int("+7", 10), Some(7));
        assert_eq!(java_parse_int("-0", 10), Some(0));
        assert_eq!(java_parse_int("ffff", 16), Some(0xffff));
        assert_eq!(java_parse_int("-1", 16), Some(-1));
        assert_eq!(java_parse_int("2147483648", 10), None);
        assert_eq!(java_parse_int("-2147483648", 10), Some(i32::MIN));
        assert_eq!(java_parse_int("", 10), None);
        assert_eq!(java_parse_int("-", 10), None);
    }
}
