//! Who is signed in to the console, and the ZooKeeper session that acts
//! for each. A person signs in with a client certificate shown to the
//! admin port's HTTPS (an `x509` identity, as on a TLS client port), with
//! HTTP Basic credentials taken as a `digest` identity (`user:password`,
//! as `addauth digest` takes them), or both. Everything the console reads
//! or changes in the tree goes through a session of this server's own
//! client port with that identity, so the znode ACLs decide exactly as
//! they decide for any client. The session cannot show the person's
//! certificate, so it presents a token the server lends it for the
//! certificate's ids (`server::DELEGATED_SCHEME`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use client::{Client, ConnectOptions};
use jute::Id;
use server::Monitor;

use crate::connections::Peer;

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

/// A signed-in person: a certificate, digest credentials, or both.
pub struct User {
    /// The subject of the client certificate the browser showed.
    certificate: Option<String>,
    digest: Option<Digest>,
}

struct Digest {
    name: String,
    password: String,
}

impl User {
    /// Who sent a request, or `None` when it proves nobody.
    fn from_request(headers: &HeaderMap, peer: Option<&Peer>) -> Option<User> {
        let user = User {
            certificate: peer.and_then(|peer| peer.subject.clone()),
            digest: basic_credentials(headers),
        };
        (user.certificate.is_some() || user.digest.is_some()).then_some(user)
    }

    /// Names the identity: one session serves each.
    fn key(&self) -> String {
        let certificate = self.certificate.as_deref().unwrap_or_default();
        let digest = self.digest.as_ref().map(|d| d.credentials());
        format!(
            "{certificate}\n{}",
            digest.map_or_else(String::new, |c| server::digest_id(&c))
        )
    }

    /// The ids the server's providers grant this person, as a client's
    /// TLS handshake and `addauth digest` would grant them.
    pub fn ids(&self, monitor: &Monitor) -> Vec<Id> {
        let config = monitor.config();
        let mut ids = self.certificate_ids(monitor);
        if let Some(digest) = &self.digest {
            let credentials = digest.credentials();
            ids.extend(
                server::authenticate(
                    "digest",
                    Some(credentials.as_bytes()),
                    std::net::IpAddr::from([127, 0, 0, 1]),
                    config.super_digest.as_deref(),
                )
                .unwrap_or_default(),
            );
        }
        ids
    }

    fn certificate_ids(&self, monitor: &Monitor) -> Vec<Id> {
        let super_user = monitor.config().client_tls.super_user.clone();
        self.certificate
            .clone()
            .map(|subject| server::certificate_ids(subject, super_user.as_deref()))
            .unwrap_or_default()
    }

    /// The options of a session that acts as this person.
    fn connect_options(&self, monitor: &Monitor) -> ConnectOptions {
        let mut options = ConnectOptions::new()
            .session_timeout(SESSION_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT);
        if self.certificate.is_some() {
            let token = monitor.lend_identity(self.certificate_ids(monitor));
            options = options.auth(server::DELEGATED_SCHEME, &token);
        }
        if let Some(digest) = &self.digest {
            options = options.digest(&digest.name, &digest.password);
        }
        options
    }
}

impl Digest {
    /// The `digest` credentials, `user:password`.
    fn credentials(&self) -> String {
        format!("{}:{}", self.name, self.password)
    }
}

/// The credentials of a request's `Authorization: Basic` header.
fn basic_credentials(headers: &HeaderMap) -> Option<Digest> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (name, password) = text.split_once(':')?;
    (!name.is_empty()).then(|| Digest {
        name: name.to_string(),
        password: password.to_string(),
    })
}

/// A handler that takes a `User` runs only for a signed-in person; anyone
/// else is asked to sign in.
impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        User::from_request(&parts.headers, parts.extensions.get::<Peer>()).ok_or_else(sign_in)
    }
}

/// The answer to a request that proves nobody: the browser asks for a
/// user and password.
fn sign_in() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, HeaderValue::from_static(REALM))],
        "Sign in with a ZooKeeper digest user and password, or with a client certificate.",
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
        let key = user.key();
        let (live, ended) = self.live_and_ended(&key);
        for client in ended {
            client.close().await;
        }
        if let Some(client) = live {
            return Ok(client);
        }
        let options = user.connect_options(monitor);
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
        let digest = basic_credentials(&headers).unwrap();
        assert_eq!(
            (digest.name.as_str(), digest.password.as_str()),
            ("alice", "pw:with:colons")
        );
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!"));
        assert!(basic_credentials(&headers).is_none());
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(basic_credentials(&headers).is_none());
    }

    #[test]
    fn a_certificate_signs_in_and_names_its_own_session() {
        let peer = |subject: Option<&str>| Peer {
            remote: "127.0.0.1:1".parse().unwrap(),
            subject: subject.map(str::to_string),
        };
        let none = HeaderMap::new();
        assert!(User::from_request(&none, None).is_none());
        assert!(User::from_request(&none, Some(&peer(None))).is_none());
        let alice = User::from_request(&none, Some(&peer(Some("CN=alice")))).unwrap();
        let bob = User::from_request(&none, Some(&peer(Some("CN=bob")))).unwrap();
        assert_ne!(alice.key(), bob.key());
        let mut basic = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode("alice:pw");
        basic.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {encoded}")).unwrap(),
        );
        let both = User::from_request(&basic, Some(&peer(Some("CN=alice")))).unwrap();
        assert_ne!(
            both.key(),
            alice.key(),
            "a certificate and a password are another identity"
        );
    }
}
