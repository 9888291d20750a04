//! Identities the server's own tools lend to sessions they open on its
//! client port. The web console signs a person in by a client certificate
//! on the admin port, then acts for them through an ordinary session, so
//! that the znode ACLs decide as for any client; that session cannot show
//! the person's certificate, so the console asks for a token here and the
//! session presents it in an `auth` packet of the [`DELEGATED_SCHEME`].
//!
//! A token is 32 random bytes that never leave the process except over the
//! loopback connection it is made for; it is good for one `auth` packet
//! within a minute. No ZooKeeper client sends this scheme, and to one that
//! did it is as unknown as any scheme without a provider: `AuthFailed`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jute::Id;
use rand::RngCore as _;

/// The `auth` packet scheme whose credentials are a token from
/// [`Delegations::lend`].
pub const DELEGATED_SCHEME: &str = "paddock-delegated";
const TOKEN_BYTES: usize = 32;
/// How long a token waits for its session to present it.
const TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// The most tokens waiting at once; the oldest give way.
const WAITING_MAX: usize = 64;

/// Tokens lent and not yet presented.
#[derive(Default)]
pub struct Delegations {
    waiting: Mutex<HashMap<Vec<u8>, Lent>>,
}

struct Lent {
    ids: Vec<Id>,
    at: Instant,
}

impl Delegations {
    /// A token that grants `ids` to the one session that presents it.
    pub fn lend(&self, ids: Vec<Id>) -> Vec<u8> {
        let mut token = vec![0u8; TOKEN_BYTES];
        rand::thread_rng().fill_bytes(&mut token);
        let now = Instant::now();
        let mut waiting = self.waiting.lock().expect("delegations poisoned");
        waiting.retain(|_, lent| now.duration_since(lent.at) < TOKEN_LIFETIME);
        if waiting.len() >= WAITING_MAX {
            let oldest = waiting.iter().min_by_key(|(_, lent)| lent.at);
            if let Some(oldest) = oldest.map(|(token, _)| token.clone()) {
                waiting.remove(&oldest);
            }
        }
        waiting.insert(token.clone(), Lent { ids, at: now });
        token
    }

    /// The ids `token` grants, once; `None` for a token not lent, spent
    /// or expired.
    pub fn redeem(&self, token: &[u8]) -> Option<Vec<Id>> {
        let lent = self
            .waiting
            .lock()
            .expect("delegations poisoned")
            .remove(token)?;
        (lent.at.elapsed() < TOKEN_LIFETIME).then_some(lent.ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_grants_its_ids_once() {
        let delegations = Delegations::default();
        let ids = vec![Id::new("x509", "CN=alice")];
        let token = delegations.lend(ids.clone());
        assert_eq!(token.len(), TOKEN_BYTES);
        assert_eq!(delegations.redeem(&token), Some(ids));
        assert_eq!(delegations.redeem(&token), None, "spent");
        assert_eq!(delegations.redeem(b"made up"), None);
        assert_eq!(delegations.redeem(&[]), None);
    }

    #[test]
    fn the_oldest_tokens_give_way() {
        let delegations = Delegations::default();
        let first = delegations.lend(vec![Id::new("x509", "CN=first")]);
        let rest: Vec<_> = (0..WAITING_MAX)
            .map(|n| delegations.lend(vec![Id::new("x509", format!("CN={n}"))]))
            .collect();
        assert_eq!(delegations.redeem(&first), None);
        assert!(rest.iter().all(|token| delegations.redeem(token).is_some()));
    }
}
