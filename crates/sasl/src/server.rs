//! The server's side: a challenge, then the check of the client's digest
//! against the password of the user it names.

use std::collections::HashMap;

use crate::digest::DigestInputs;
use crate::directives::Directives;
use crate::{fresh_nonce, SERVER_NAME, TOKEN_BYTES_MAX};

/// The users a server accepts: name -> password.
pub type Users = HashMap<String, String>;

/// One connection's exchange, as Java's DIGEST-MD5 server runs it.
#[derive(Debug, Default)]
pub enum ServerExchange {
    #[default]
    Start,
    Challenged {
        nonce: String,
    },
    Done,
}

impl ServerExchange {
    /// Answers one client token: the token to send back, and the user once
    /// authenticated. An error fails the authentication.
    ///
    /// The first token is ignored (empty from real clients), as Java's
    /// server ignores an initial response. Anything after the exchange
    /// completed fails, as Java's server is then "at illegal state".
    pub fn respond(
        &mut self,
        users: &Users,
        token: &[u8],
    ) -> Result<(Vec<u8>, Option<String>), String> {
        if token.len() > TOKEN_BYTES_MAX {
            return Err(format!(
                "a token of {} bytes, over {TOKEN_BYTES_MAX}",
                token.len()
            ));
        }
        match std::mem::replace(self, ServerExchange::Done) {
            ServerExchange::Start => {
                let nonce = fresh_nonce();
                let challenge = format!(
                    "realm=\"{SERVER_NAME}\",nonce=\"{nonce}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess"
                );
                *self = ServerExchange::Challenged { nonce };
                Ok((challenge.into_bytes(), None))
            }
            ServerExchange::Challenged { nonce } => {
                let (user, rspauth) = verify(users, &nonce, token)?;
                Ok((format!("rspauth={rspauth}").into_bytes(), Some(user)))
            }
            ServerExchange::Done => Err("a token after the exchange completed".into()),
        }
    }
}

/// Checks the client's digest response to the challenge with `nonce`:
/// the user, and the `rspauth` to answer with.
fn verify(users: &Users, nonce: &str, token: &[u8]) -> Result<(String, String), String> {
    let fields = Directives::parse(token)?;
    let user = fields.required("username")?;
    if fields.required("nonce")? != nonce {
        return Err("nonce mismatch".into());
    }
    let password = users
        .get(user)
        .ok_or_else(|| format!("unknown user {user}"))?;
    let inputs = DigestInputs {
        user,
        realm: fields.get("realm").unwrap_or(""),
        password,
        nonce,
        cnonce: fields.required("cnonce")?,
        nc: fields.required("nc")?,
        qop: fields.get("qop").unwrap_or("auth"),
        digest_uri: fields.required("digest-uri")?,
        authzid: fields.get("authzid"),
    };
    if inputs.response() != fields.required("response")? {
        return Err(format!("wrong password for {user}"));
    }
    if let Some(authzid) = inputs.authzid.filter(|&z| z != user) {
        return Err(format!("{user} may not act as {authzid}"));
    }
    Ok((user.to_string(), inputs.rspauth()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_as_javas_digest_md5_server() {
        let users = Users::new();
        let mut exchange = ServerExchange::default();
        let (challenge, user) = exchange.respond(&users, b"ignored").unwrap();
        assert!(challenge.starts_with(b"realm=\"zk-sasl-md5\",nonce=\""));
        assert_eq!(user, None);
        let long = vec![b'x'; TOKEN_BYTES_MAX + 1];
        assert!(exchange.respond(&users, &long).is_err());
        let mut done = ServerExchange::Done;
        assert!(done.respond(&users, b"").is_err());
    }

    /// The RFC 2831 §4 example response, accepted with its `rspauth`.
    #[test]
    fn rfc_2831_example_verifies() {
        let users = HashMap::from([("chris".to_string(), "secret".to_string())]);
        let mut exchange = ServerExchange::Challenged {
            nonce: "OA6MG9tEQGm2hh".into(),
        };
        let response = r#"charset=utf-8,username="chris",realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",nc=00000001,cnonce="OA6MHXh6VqTrRk",digest-uri="imap/elwood.innosoft.com",response=d388dad90d4bbd760a152321f2143af7,qop=auth"#;
        let (reply, user) = exchange.respond(&users, response.as_bytes()).unwrap();
        assert_eq!(user.as_deref(), Some("chris"));
        assert_eq!(reply, b"rspauth=ea40f60335c427b5527b84dbabcdfffd");
    }
}
