//! The web console (`console.enabled=true`), on the AdminServer's port at
//! `/console`: the tree to browse and edit, sessions and watches, recipe
//! queues, and the ensemble with live charts.
//!
//! - `users`: sign-in (a client certificate, HTTP Basic as a digest
//!   identity, or both) and the ZooKeeper session that acts for each
//!   person, so the znode ACLs decide.
//! - `tree_api`: znodes, children a page at a time, and their changes.
//! - `server_api`: sessions, watches, recipe queues, the ensemble and the
//!   live figures, read from the server's `Monitor`.
//!
//! The page, its script and its style are compiled into the binary.

mod server_api;
mod tree_api;
mod users;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use server::Monitor;

use tree_api::{Answer, Failure, NewNode};
use users::{Sessions, User};

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");

struct Console {
    monitor: Monitor,
    sessions: Sessions,
}

type Params = Query<HashMap<String, String>>;

/// The console's routes under `/console`.
pub fn routes(monitor: Monitor) -> Router {
    let console = Arc::new(Console {
        monitor,
        sessions: Sessions::default(),
    });
    Router::new()
        .route("/console", get(page))
        .route("/console/console.js", get(script))
        .route("/console/console.css", get(style))
        .route("/console/api/me", get(me))
        .route("/console/api/node", get(node))
        .route("/console/api/children", get(children))
        .route("/console/api/subtree-size", get(subtree_size))
        .route("/console/api/recipe", get(recipe))
        .route("/console/api/create", post(create))
        .route("/console/api/set", post(set))
        .route("/console/api/delete", post(delete))
        .route("/console/api/sessions", get(sessions))
        .route("/console/api/close-session", post(close_session))
        .route("/console/api/watches", get(watches))
        .route("/console/api/ensemble", get(ensemble))
        .route("/console/api/live", get(live))
        .with_state(console)
}

async fn page(_: User) -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Runs `act` with the signed-in person's ZooKeeper client.
async fn as_user<F, Fut>(console: &Console, user: User, act: F) -> Response
where
    F: FnOnce(Arc<client::Client>) -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    match console.sessions.client(&console.monitor, &user).await {
        Ok(zk) => reply(act(zk).await),
        Err(message) => reply(Err(Failure {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message,
        })),
    }
}

fn reply(answer: Answer) -> Response {
    match answer {
        Ok(body) => json(StatusCode::OK, &body),
        Err(failure) => json(
            failure.status,
            &serde_json::json!({ "error": failure.message }),
        ),
    }
}

fn json(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> &'a str {
    params.get(name).map_or("", String::as_str)
}

/// The path a request names, `/` when it names none.
fn path_of(params: &HashMap<String, String>) -> String {
    match param(params, "path") {
        "" => "/".to_string(),
        path => path.to_string(),
    }
}

async fn node(State(c): State<Arc<Console>>, user: User, Query(q): Params) -> Response {
    let path = path_of(&q);
    as_user(
        &c,
        user,
        |zk| async move { tree_api::node(&zk, &path).await },
    )
    .await
}

async fn children(State(c): State<Arc<Console>>, user: User, Query(q): Params) -> Response {
    let path = path_of(&q);
    let (after, prefix) = (
        param(&q, "after").to_string(),
        param(&q, "prefix").to_string(),
    );
    as_user(&c, user, |zk| async move {
        tree_api::children(&zk, &path, &after, &prefix).await
    })
    .await
}

async fn subtree_size(State(c): State<Arc<Console>>, user: User, Query(q): Params) -> Response {
    let path = path_of(&q);
    as_user(&c, user, |zk| async move {
        tree_api::subtree_size(&zk, &path).await
    })
    .await
}

async fn recipe(State(c): State<Arc<Console>>, user: User, Query(q): Params) -> Response {
    let path = path_of(&q);
    as_user(&c, user, |zk| async move {
        server_api::recipe_queue(&zk, &path).await
    })
    .await
}

/// A POST's JSON body, or what is wrong with it.
fn body_of(body: &Bytes) -> Result<Value, Failure> {
    serde_json::from_slice(body)
        .map_err(|e| Failure::bad_request(format!("the body is not JSON: {e}")))
}

fn field<'a>(body: &'a Value, name: &str) -> &'a str {
    body.get(name).and_then(Value::as_str).unwrap_or("")
}

/// A number field, or the failure that names it.
fn number(body: &Value, name: &str) -> Result<i64, Failure> {
    body.get(name)
        .and_then(Value::as_i64)
        .ok_or_else(|| Failure::bad_request(format!("{name} must be a number")))
}

async fn create(State(c): State<Arc<Console>>, user: User, body: Bytes) -> Response {
    as_user(&c, user, |zk| async move {
        let body = body_of(&body)?;
        let new = NewNode {
            path: field(&body, "path"),
            data: field(&body, "data"),
            mode: field(&body, "mode"),
        };
        tree_api::create(&zk, new).await
    })
    .await
}

async fn set(State(c): State<Arc<Console>>, user: User, body: Bytes) -> Response {
    as_user(&c, user, |zk| async move {
        let body = body_of(&body)?;
        let version = i32::try_from(number(&body, "version")?)
            .map_err(|_| Failure::bad_request("version out of range"))?;
        tree_api::set(&zk, field(&body, "path"), field(&body, "data"), version).await
    })
    .await
}

async fn delete(State(c): State<Arc<Console>>, user: User, body: Bytes) -> Response {
    as_user(&c, user, |zk| async move {
        let body = body_of(&body)?;
        let path = field(&body, "path");
        if body.get("recursive").and_then(Value::as_bool) == Some(true) {
            let expected = usize::try_from(number(&body, "count")?)
                .map_err(|_| Failure::bad_request("count out of range"))?;
            return tree_api::delete_recursive(&zk, path, expected).await;
        }
        let version = i32::try_from(number(&body, "version")?)
            .map_err(|_| Failure::bad_request("version out of range"))?;
        tree_api::delete(&zk, path, version).await
    })
    .await
}

/// Who the console acts as: the ids of the signed-in person, as the
/// server's providers grant them (a digest id shows its user and hash).
async fn me(State(c): State<Arc<Console>>, user: User) -> Response {
    let ids: Vec<String> = user
        .ids(&c.monitor)
        .into_iter()
        .map(|id| format!("{}:{}", id.scheme, id.id))
        .collect();
    json(StatusCode::OK, &serde_json::json!({ "ids": ids }))
}

async fn sessions(State(c): State<Arc<Console>>, _: User) -> Response {
    json(StatusCode::OK, &server_api::sessions(&c.monitor))
}

async fn watches(State(c): State<Arc<Console>>, _: User) -> Response {
    json(StatusCode::OK, &server_api::watches(&c.monitor))
}

async fn live(State(c): State<Arc<Console>>, _: User) -> Response {
    json(StatusCode::OK, &server_api::live(&c.monitor))
}

async fn ensemble(State(c): State<Arc<Console>>, _: User) -> Response {
    json(StatusCode::OK, &server_api::ensemble(&c.monitor).await)
}

async fn close_session(State(c): State<Arc<Console>>, user: User, body: Bytes) -> Response {
    let body = match body_of(&body) {
        Ok(body) => body,
        Err(failure) => return reply(Err(failure)),
    };
    let id = field(&body, "id");
    let Ok(id) = i64::from_str_radix(id.trim_start_matches("0x"), 16) else {
        return reply(Err(Failure::bad_request(format!(
            "{id:?} is not a session id"
        ))));
    };
    reply(server_api::close_session(&c.monitor, &user.ids(&c.monitor), id).await)
}
