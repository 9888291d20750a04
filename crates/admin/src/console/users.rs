//! Who is signed in to the console, and the ZooKeeper session that acts
//! for each. A person signs in with HTTP Basic credentials, taken as a
//! `digest` identity (`user:password`, as `addauth digest` takes them);
//! everything the console reads or changes in the tree goes through a
//! session of this server's own client port with that identity, so the
//! znode ACLs decide exactly as they decide for any client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use client::{Client, ConnectOptions};
use server::Monitor;

/// A console session's timeout: it idles between page views.
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// A signed-in identity's session is closed after this long without a
/// request, so that neither idle people nor a stream of made-up
/// credentials keep sessions open.
const IDLE_SESSION_END: Duration = Duration::from_secs(300);
/// At most this many identities hold a session at once; the one idle
/// longest makes room for a new one. The sessions come from one address,
/// well within ZooKeeper's default `maxClientCnxns` (60).
const SESSIONS_MAX: usize = 16;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REALM: &str = "Basic realm=\"Paddock console\", charset=\"UTF-8\"";

/// A signed-in person.
pub struct User {
    pub name: String,
    pub password: String,
}

impl User {
    /// The credentials of a request's `Authorization: Basic` header.
    pub fn from_headers(headers: &HeaderMap) -> Option<User> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let encoded = value.strip_prefix("Basic ")?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (name, password) = text.split_once(':')?;
        (!name.is_empty()).then(|| User {
            name: name.to_string(),
            password: password.to_string(),
        })
    }

    /// The `digest` credentials, `user:password`.
    pub fn credentials(&self) -> String {
        format!("{}:{}", self.name, self.password)
    }
}

/// The answer to a request without credentials: the browser asks for them.
pub fn sign_in() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, HeaderValue::from_static(REALM))],
        "Sign in with a ZooKeeper digest user and password.",
    )
        .into_response()
}

/// One client per signed-in identity, made on first use and made again
/// when its session has ended.
#[derive(Default)]
pub struct Sessions {
    clients: Mutex<HashMap<String, Held>>,
}

struct Held {
    client: Arc<Client>,
    used: Instant,
}

impl Sessions {
    /// The client acting for `user`.
    pub async fn client(&self, monitor: &Monitor, user: &User) -> Result<Arc<Client>, String> {
        let key = server::digest_id(&user.credentials());
        let (live, ended) = self.live_and_ended(&key);
        for client in ended {
            client.close().await;
        }
        if let Some(client) = live {
            return Ok(client);
        }
        let options = ConnectOptions::new()
            .session_timeout(SESSION_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .digest(&user.name, &user.password);
        let client = Client::connect(&client_address(monitor), options)
            .await
            .map_err(|e| format!("the console cannot reach this server's client port: {e}"))?;
        let client = Arc::new(client);
        let held = Held {
            client: client.clone(),
            used: Instant::now(),
        };
        let mut clients = self.clients.lock().expect("console sessions poisoned");
        clients.insert(key, held);
        Ok(client)
    }

    /// The live client for `key`, marked used; and the clients to close:
    /// those idle too long, and the idlest when a new identity needs room.
    fn live_and_ended(&self, key: &str) -> (Option<Arc<Client>>, Vec<Arc<Client>>) {
        let mut clients = self.clients.lock().expect("console sessions poisoned");
        let now = Instant::now();
        let mut ended = Vec::new();
        clients.retain(|_, held| {
            let keep = !held.client.state().is_terminal()
                && now.duration_since(held.used) < IDLE_SESSION_END;
            if !keep {
                ended.push(held.client.clone());
            }
            keep
        });
        let live = clients.get_mut(key).map(|held| {
            held.used = now;
            held.client.clone()
        });
        if live.is_none() && clients.len() >= SESSIONS_MAX {
            let idlest = clients.iter().min_by_key(|(_, held)| held.used);
            if let Some(idlest) = idlest.map(|(key, _)| key.clone()) {
                ended.extend(clients.remove(&idlest).map(|held| held.client));
            }
        }
        (live, ended)
    }
}

/// This server's client port on loopback (or the address it listens on).
pub fn client_address(monitor: &Monitor) -> String {
    let config = monitor.config();
    let host = match config.client_port_address {
        Some(addr) if !addr.is_unspecified() => addr,
        _ => std::net::IpAddr::from([127, 0, 0, 1]),
    };
    std::net::SocketAddr::new(host, config.client_port).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read() {
        let mut headers = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode("alice:pw:with:colons");
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {encoded}")).unwrap(),
        );
        let user = User::from_headers(&headers).unwrap();
        assert_eq!(
            (user.name.as_str(), user.password.as_str()),
            ("alice", "pw:with:colons")
        );
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!"));
        assert!(User::from_headers(&headers).is_none());
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(User::from_headers(&headers).is_none());
    }
}
