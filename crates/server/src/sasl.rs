//! SASL over the `sasl` opcode: the `sasl` crate's DIGEST-MD5 exchange for
//! the users of a JAAS file's `Server` section (`user_NAME="password"`),
//! answered in ZooKeeper's records. An authenticated user's ACL id is
//! `sasl:NAME`.

use std::path::Path;

use bytes::Bytes;
use jute::SetSASLResponse;

pub use sasl::Users as SaslUsers;

/// One connection's exchange.
#[derive(Default)]
pub struct SaslExchange(sasl::ServerExchange);

impl SaslExchange {
    /// Answers one client token: the response, and the user once
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
        let (token, user) = self.0.respond(users, token)?;
        let response = SetSASLResponse {
            token: Some(Bytes::from(token)),
        };
        Ok((response, user))
    }
}

/// Users of the `Server` section of a JAAS file; `None` when there is no
/// such section, so no SASL.
pub fn read_jaas_users(path: &Path) -> Result<Option<SaslUsers>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    sasl::jaas::server_users(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_users_every_token_is_answered_with_null() {
        let mut exchange = SaslExchange::default();
        for token in [&b""[..], b"anything"] {
            let (reply, user) = exchange.respond(None, token).unwrap();
            assert_eq!((reply.token, user), (None, None));
        }
    }
}
