//! The client's side, answering as Java's `DigestMD5Client` does.

use crate::digest::DigestInputs;
use crate::directives::{quote, Directives};
use crate::{fresh_nonce, SERVER_NAME, SERVICE};

/// One connection's exchange for `user`. Send [`ClientExchange::INITIAL`],
/// then pass each server token to [`ClientExchange::respond`] until it
/// answers `None`: the server proved it knows the password too.
#[derive(Debug)]
pub struct ClientExchange {
    user: String,
    password: String,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Waiting for the challenge.
    Start,
    /// Answered the challenge; waiting for the server's `rspauth`.
    Answered {
        rspauth: String,
    },
    Done,
    /// An error ended the exchange.
    Failed,
}

impl ClientExchange {
    /// DIGEST-MD5 has no initial response: the first token is empty.
    pub const INITIAL: &'static [u8] = b"";

    pub fn new(user: &str, password: &str) -> Self {
        Self {
            user: user.to_owned(),
            password: password.to_owned(),
            state: State::Start,
        }
    }

    /// Whether the server has authenticated us and proved itself.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The token answering the server's `token`, or `None` once the
    /// exchange is complete. An error says why the server is not trusted
    /// or could not be understood.
    pub fn respond(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::Start => {
                let (response, rspauth) = self.answer(token)?;
                self.state = State::Answered { rspauth };
                Ok(Some(response.into_bytes()))
            }
            State::Answered { rspauth } => {
                let fields = Directives::parse(token)?;
                if fields.required("rspauth")? != rspauth {
                    return Err(
                        "the server's rspauth is wrong: it does not know the password".into(),
                    );
                }
                self.state = State::Done;
                Ok(None)
            }
            State::Done => Err("a token after the exchange completed".into()),
            State::Failed => Err("a token after the exchange failed".into()),
        }
    }

    /// The response to a challenge, and the `rspauth` the server must send.
    fn answer(&self, challenge: &[u8]) -> Result<(String, String), String> {
        let fields = Directives::parse(challenge)?;
        let nonce = fields.required("nonce")?;
        if !fields
            .get("qop")
            .unwrap_or("auth")
            .split(',')
            .any(|qop| qop.trim() == "auth")
        {
            return Err("the server does not offer qop=auth".into());
        }
        if fields.get("algorithm") != Some("md5-sess") {
            return Err("the challenge lacks algorithm=md5-sess".into());
        }
        let cnonce = fresh_nonce();
        let digest_uri = format!("{SERVICE}/{SERVER_NAME}");
        let inputs = DigestInputs {
            user: &self.user,
            realm: fields.get("realm").unwrap_or(""),
            password: &self.password,
            nonce,
            cnonce: &cnonce,
            nc: "00000001",
            qop: "auth",
            digest_uri: &digest_uri,
            authzid: None,
        };
        let mut response = String::from("charset=utf-8,");
        response.push_str(&format!("username={},", quote(inputs.user)));
        if let Some(realm) = fields.get("realm") {
            response.push_str(&format!("realm={},", quote(realm)));
        }
        response.push_str(&format!(
            "nonce={},nc={},cnonce={},digest-uri={},maxbuf=65536,response={},qop=auth",
            quote(nonce),
            inputs.nc,
            quote(&cnonce),
            quote(&digest_uri),
            inputs.response(),
        ));
        Ok((response, inputs.rspauth()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ServerExchange, Users};

    fn users() -> Users {
        Users::from([("alice".to_string(), "sec\"ret".to_string())])
    }

    /// Runs the exchange to its end: the user the server authenticated, or
    /// the first side's error.
    fn exchange(user: &str, password: &str) -> Result<String, String> {
        let users = users();
        let mut server = ServerExchange::default();
        let mut client = ClientExchange::new(user, password);
        let (mut token, _) = server.respond(&users, ClientExchange::INITIAL)?;
        loop {
            match client.respond(&token)? {
                None => break,
                Some(answer) => {
                    let (reply, authenticated) = server.respond(&users, &answer)?;
                    token = reply;
                    if let Some(user) = authenticated {
                        assert_eq!(client.respond(&token)?, None);
                        assert!(client.is_complete());
                        return Ok(user);
                    }
                }
            }
        }
        Err("the exchange ended without a user".into())
    }

    #[test]
    fn authenticates_against_the_server_side() {
        assert_eq!(exchange("alice", "sec\"ret").as_deref(), Ok("alice"));
    }

    #[test]
    fn a_wrong_password_or_user_is_refused_by_the_server() {
        assert_eq!(
            exchange("alice", "wrong"),
            Err("wrong password for alice".into())
        );
        assert_eq!(exchange("bob", "x"), Err("unknown user bob".into()));
    }

    #[test]
    fn a_server_that_does_not_know_the_password_is_not_trusted() {
        let mut client = ClientExchange::new("alice", "secret");
        let challenge =
            br#"realm="zk-sasl-md5",nonce="n",qop="auth",charset=utf-8,algorithm=md5-sess"#;
        assert!(client.respond(challenge).unwrap().is_some());
        let forged = b"rspauth=00000000000000000000000000000000";
        assert!(client.respond(forged).unwrap_err().contains("rspauth"));
        assert!(!client.is_complete());
    }

    #[test]
    fn refuses_challenges_it_cannot_answer() {
        for challenge in [
            &br#"realm="r",qop="auth",algorithm=md5-sess"#[..],
            br#"nonce="n",qop="auth-conf",algorithm=md5-sess"#,
            br#"nonce="n",qop="auth""#,
        ] {
            let mut client = ClientExchange::new("alice", "secret");
            assert!(client.respond(challenge).is_err());
        }
    }
}
