//! SASL over the `sasl` opcode, with the DIGEST-MD5 mechanism (RFC 2831)
//! ZooKeeper offers for users listed in a JAAS file's `Server` section
//! (`user_NAME="password"`). An authenticated user's ACL id is `sasl:NAME`.
//!
//! The exchange: the client opens with a token we ignore (empty from real
//! clients); we answer with a challenge carrying a fresh nonce; the client
//! answers with a digest of its password; we check it and answer with
//! `rspauth`, proving we know the password too. Anything after that fails,
//! as Java's DIGEST-MD5 server is then "at illegal state".

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use jute::SetSASLResponse;
use md5::{Digest as _, Md5};
use rand::RngCore as _;

/// ZooKeeper's DIGEST-MD5 server name, which Java uses as the realm.
const REALM: &str = "zk-sasl-md5";
/// Java's DIGEST-MD5 server refuses longer client tokens.
const TOKEN_BYTES_MAX: usize = 4096;

/// The users of a JAAS `Server` section: name -> password.
pub type SaslUsers = HashMap<String, String>;

#[derive(Default)]
pub enum SaslExchange {
    #[default]
    Start,
    Challenged {
        nonce: String,
    },
    Done,
}

impl SaslExchange {
    /// Answers one client token: the response token, and the user once
    /// authenticated. An error ends the connection with `AuthFailed`.
    ///
    /// `users` is `None` when this server has no JAAS `Server` section.
    /// ZooKeeper then has no SASL server for the connection and catches the
    /// NullPointerException that meets: the answer is OK with a null token,
    /// whatever the client sent, and nothing changes.
    pub fn respond(
        &mut self,
        users: Option<&SaslUsers>,
        token: &[u8],
    ) -> Result<(SetSASLResponse, Option<String>), String> {
        let Some(users) = users else {
            return Ok((SetSASLResponse { token: None }, None));
        };
        if token.len() > TOKEN_BYTES_MAX {
            return Err(format!(
                "a token of {} bytes, over {TOKEN_BYTES_MAX}",
                token.len()
            ));
        }
        match std::mem::replace(self, SaslExchange::Done) {
            SaslExchange::Start => Ok((self.challenge(), None)),
            SaslExchange::Challenged { nonce } => {
                let user = verify(users, &nonce, token)?;
                Ok((token_response(user.rspauth.into_bytes()), Some(user.name)))
            }
            SaslExchange::Done => Err("a token after the exchange completed".into()),
        }
    }

    /// The first challenge; a token the client sent with it is ignored, as
    /// Java's server ignores an initial response.
    fn challenge(&mut self) -> SetSASLResponse {
        let mut raw = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut raw);
        let nonce = hex(&raw);
        let challenge = format!(
            "realm=\"{REALM}\",nonce=\"{nonce}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess"
        );
        *self = SaslExchange::Challenged { nonce };
        token_response(challenge.into_bytes())
    }
}

/// A user whose digest checked out, and our proof that we know the
/// password too.
struct Verified {
    name: String,
    rspauth: String,
}

/// Checks the client's digest response to the challenge with `nonce`.
fn verify(users: &SaslUsers, nonce: &str, token: &[u8]) -> Result<Verified, String> {
    let text = std::str::from_utf8(token).map_err(|_| "response is not UTF-8")?;
    let fields = parse_directives(text);
    let field = |name: &str| {
        fields
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| format!("response lacks {name}"))
    };
    let user = field("username")?;
    if field("nonce")? != nonce {
        return Err("nonce mismatch".into());
    }
    let password = users
        .get(user)
        .ok_or_else(|| format!("unknown user {user}"))?;
    let realm = fields.get("realm").map_or("", String::as_str);
    let cnonce = field("cnonce")?;
    let nc = field("nc")?;
    let qop = fields.get("qop").map_or("auth", String::as_str);
    let uri = field("digest-uri")?;
    let authzid = fields.get("authzid").map(String::as_str);
    let a1 = {
        let mut a1 = Md5::digest(format!("{user}:{realm}:{password}")).to_vec();
        a1.extend_from_slice(format!(":{nonce}:{cnonce}").as_bytes());
        if let Some(authzid) = authzid {
            a1.extend_from_slice(format!(":{authzid}").as_bytes());
        }
        hex(&Md5::digest(&a1))
    };
    let digest = |a2: &str| {
        hex(&Md5::digest(format!(
            "{a1}:{nonce}:{nc}:{cnonce}:{qop}:{}",
            hex(&Md5::digest(a2))
        )))
    };
    if digest(&format!("AUTHENTICATE:{uri}")) != field("response")? {
        return Err(format!("wrong password for {user}"));
    }
    if let Some(authzid) = authzid.filter(|&z| z != user) {
        return Err(format!("{user} may not act as {authzid}"));
    }
    Ok(Verified {
        name: user.to_string(),
        rspauth: format!("rspauth={}", digest(&format!(":{uri}"))),
    })
}

fn token_response(token: Vec<u8>) -> SetSASLResponse {
    SetSASLResponse {
        token: Some(Bytes::from(token)),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `a="x",b=y` into a map, honouring quotes and backslash escapes.
fn parse_directives(text: &str) -> HashMap<String, String> {
    let mut fields = HashMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().trim_start_matches(',').trim().to_string();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            out.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => out.push(c),
                }
            }
            value = out;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        rest = rest.trim_start_matches(',').trim_start();
        fields.insert(name, value);
    }
    fields
}

/// Users of the `Server` section of a JAAS file: `user_NAME="password"`;
/// `None` when there is no such section, so no SASL.
pub fn read_jaas_users(path: &Path) -> std::io::Result<Option<SaslUsers>> {
    let text = std::fs::read_to_string(path)?;
    Ok(parse_jaas_users(&text))
}

fn parse_jaas_users(text: &str) -> Option<SaslUsers> {
    let start = text.find("Server")?;
    let section = &text[start..];
    let section = section
        .find('{')
        .and_then(|open| {
            section[open..]
                .find('}')
                .map(|close| &section[open + 1..open + close])
        })
        .unwrap_or("");
    let mut users = HashMap::new();
    for part in section.split_whitespace() {
        let Some(assignment) = part.strip_prefix("user_") else {
            continue;
        };
        if let Some((name, value)) = assignment.split_once('=') {
            let value = value.trim_end_matches(';').trim_matches('"');
            users.insert(name.to_string(), value.to_string());
        }
    }
    Some(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_server_section() {
        let users = parse_jaas_users(
            "Client { foo required username=\"x\"; };\n\
             Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n \
             user_super=\"adminsecret\"\n user_alice=\"secret\";\n};\n",
        )
        .unwrap();
        assert_eq!(users.get("alice").map(String::as_str), Some("secret"));
        assert_eq!(users.get("super").map(String::as_str), Some("adminsecret"));
        assert_eq!(users.len(), 2);
    }

    #[test]
    fn no_server_section_is_no_sasl() {
        assert_eq!(parse_jaas_users("Client { x required; };"), None);
    }

    #[test]
    fn without_users_every_token_is_answered_with_null() {
        let mut exchange = SaslExchange::default();
        for token in [&b""[..], b"anything"] {
            let (reply, user) = exchange.respond(None, token).unwrap();
            assert_eq!((reply.token, user), (None, None));
        }
    }

    #[test]
    fn fails_as_javas_digest_md5_server() {
        let users = SaslUsers::new();
        let mut exchange = SaslExchange::default();
        let (challenge, _) = exchange.respond(Some(&users), b"ignored").unwrap();
        assert!(challenge.token.is_some());
        let long = vec![b'x'; TOKEN_BYTES_MAX + 1];
        assert!(exchange.respond(Some(&users), &long).is_err());
        let mut done = SaslExchange::Done;
        assert!(done.respond(Some(&users), b"").is_err());
    }

    #[test]
    fn parses_digest_directives() {
        let f = parse_directives(
            r#"username="alice",realm="zk-sasl-md5",nc=00000001,qop=auth,response=abc"#,
        );
        assert_eq!(f["username"], "alice");
        assert_eq!(f["nc"], "00000001");
        assert_eq!(f["response"], "abc");
    }

    /// The RFC 2831 §4 example, with its published response value.
    #[test]
    fn rfc_2831_example_verifies() {
        let users = HashMap::from([("chris".to_string(), "secret".to_string())]);
        let mut exchange = SaslExchange::Challenged {
            nonce: "OA6MG9tEQGm2hh".into(),
        };
        let response = r#"charset=utf-8,username="chris",realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",nc=00000001,cnonce="OA6MHXh6VqTrRk",digest-uri="imap/elwood.innosoft.com",response=d388dad90d4bbd760a152321f2143af7,qop=auth"#;
        let (reply, user) = exchange.respond(Some(&users), response.as_bytes()).unwrap();
        assert_eq!(user.as_deref(), Some("chris"));
        assert_eq!(
            reply.token.unwrap().as_ref(),
            b"rspauth=ea40f60335c427b5527b84dbabcdfffd"
        );
    }
}
