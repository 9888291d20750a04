//! ZooKeeper 3.9's `snapshot` and `restore` commands.
//!
//! `snapshot` hands out the tree as last applied, in ZooKeeper's snapshot
//! format (uncompressed), so the file serves ZooKeeper's own tools and its
//! `restore`, and `paddock import` as `version-2/snapshot.<last_zxid>`.
//! The `last_zxid` and `snapshot_size` headers say what it is; with
//! `streaming=false` only they are sent. The tree is written to an
//! unlinked file in the data directory first, as its size is sent ahead.
//!
//! `restore` is refused: ZooKeeper's replaces one server's tree outside
//! its replication, which in a Raft ensemble would leave that server
//! different from the others for ever. The way in for a ZooKeeper
//! snapshot is `paddock import` on a stopped ensemble.
//!
//! `snapshot` is limited as ZooKeeper limits it (`admin.rateLimiterIntervalInMS`);
//! each can be turned off (`admin.snapshot.enabled`, `admin.restore.enabled`),
//! and their refusals carry ZooKeeper's status codes.

use std::fs::File;
use std::io::{self, BufWriter, Seek};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use server::Monitor;

use crate::commands::{answer, Arguments, Object};

const SNAPSHOT: &str = "snapshot";
const RESTORE: &str = "restore";
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// ZooKeeper's `RateLimiter` with one token: at most one success per
/// window, the window starting again at the first call after it ends.
pub struct RateLimiter {
    interval: Duration,
    window: Mutex<(Instant, bool)>,
}

impl RateLimiter {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            window: Mutex::new((Instant::now(), true)),
        }
    }

    /// ZooKeeper's snapshot limiter reads `admin.rateLimiterIntervalInMS`
    /// as microseconds (3.9.0 to 3.9.5): its window is a thousandth of the
    /// restore limiter's, 300 ms by default. Scripts written against it
    /// may take snapshots that often, so this one does the same.
    pub fn for_snapshot(interval_ms: u64) -> Self {
        Self::new(Duration::from_micros(interval_ms))
    }

    pub fn allow(&self) -> bool {
        let mut window = self.window.lock().expect("rate limiter poisoned");
        let now = Instant::now();
        if now.duration_since(window.0) >= self.interval {
            *window = (now, true);
        }
        std::mem::replace(&mut window.1, false)
    }
}

/// `GET snapshot[?streaming=false]`, once authorized.
pub async fn snapshot(monitor: &Monitor, limiter: &RateLimiter, arguments: &Arguments) -> Response {
    if !monitor.config().admin.snapshot_enabled {
        return refused(SNAPSHOT, StatusCode::SERVICE_UNAVAILABLE);
    }
    if !limiter.allow() {
        return refused(SNAPSHOT, StatusCode::TOO_MANY_REQUESTS);
    }
    // Java's Boolean.parseBoolean, with true when absent.
    let streaming = arguments
        .get("streaming")
        .is_none_or(|v| v.eq_ignore_ascii_case("true"));
    let (tree, zxid) = monitor.tree();
    let dir = monitor.config().data_dir.clone();
    let written = tokio::task::spawn_blocking(move || write_unlinked(&tree, &dir)).await;
    let (file, size) = match written {
        Ok(Ok(written)) => written,
        Ok(Err(error)) => {
            tracing::warn!("the snapshot command could not write the tree: {error}");
            return refused(SNAPSHOT, StatusCode::INTERNAL_SERVER_ERROR);
        }
        Err(error) => {
            tracing::warn!("the snapshot command's writer failed: {error}");
            return refused(SNAPSHOT, StatusCode::INTERNAL_SERVER_ERROR);
        }
    };
    let headers = [
        ("last_zxid", format!("{zxid:#x}")),
        ("snapshot_size", size.to_string()),
    ];
    let mut response = if streaming {
        let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
        let mut response = Body::from_stream(stream).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        response
    } else {
        crate::json(StatusCode::OK, &answer(SNAPSHOT, Object::new(), None))
    };
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The tree in ZooKeeper's snapshot format, in a file of `dir` that has no
/// name (it goes when closed), read from its start; and its size.
fn write_unlinked(tree: &tree::DataTree, dir: &std::path::Path) -> io::Result<(File, u64)> {
    let file = tempfile::tempfile_in(dir)?;
    let writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
    let mut file = migrate::write_zookeeper_snapshot(tree, writer)?
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    let size = file.stream_position()?;
    file.rewind()?;
    Ok((file, size))
}

/// `POST restore`, once authorized.
pub fn restore(monitor: &Monitor) -> Response {
    if !monitor.config().admin.restore_enabled {
        return refused(RESTORE, StatusCode::SERVICE_UNAVAILABLE);
    }
    let error = "restore would replace this server's tree outside replication and leave it apart from the rest of the ensemble; to start from a ZooKeeper snapshot, stop the servers and use `paddock import`";
    crate::json(
        StatusCode::SERVICE_UNAVAILABLE,
        &answer(RESTORE, Object::new(), Some(error.to_string())),
    )
}

/// ZooKeeper's refusals of these commands: the status says it all, the
/// `error` is null.
fn refused(command: &str, status: StatusCode) -> Response {
    let body: Value = answer(command, Object::new(), None);
    crate::json(status, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_success_per_window() {
        let limiter = RateLimiter::new(Duration::from_secs(3600));
        assert!(limiter.allow());
        assert!(!limiter.allow());
        let unlimited = RateLimiter::new(Duration::ZERO);
        assert!(unlimited.allow() && unlimited.allow());
    }

    #[test]
    fn the_snapshot_window_is_zookeepers() {
        assert_eq!(
            RateLimiter::for_snapshot(300_000).interval,
            Duration::from_millis(300)
        );
    }
}
