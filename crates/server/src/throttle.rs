//! The load limits at work (settings in `load_limits`), each as a client
//! of ZooKeeper would notice it:
//!
//! - [`RequestGate`]: requests in process. Past `globalOutstandingLimit`,
//!   a connection that has requests of its own in process stops being read
//!   until one is answered (its client only sees slower replies; a
//!   connection with nothing in process is always read, so nobody else
//!   stalls). With the request throttler on, a request waits before it runs
//!   while too many are in process; one whose connection closed meanwhile
//!   is dropped, and one that waited too long is answered `Throttled`.
//!   A large request (`largeRequestThreshold`) that would take the bytes
//!   of large requests in process past `largeRequestMaxBytes` closes its
//!   connection unanswered, as ZooKeeper does; its session lives on.
//! - [`ConnectionThrottle`]: ZooKeeper's BlueThrottle, a token bucket on
//!   new connections (and, with a freeze time, random early drops as the
//!   bucket runs dry). A refused connection is closed before its handshake
//!   is answered, and its client tries another server.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng as _;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::load_limits::{ConnectionThrottleConfig, RequestThrottleConfig};

/// Counts of what the limits did, for `mntr` and the metrics.
#[derive(Default)]
pub struct ThrottleCounts {
    /// Sleeps of requests held by the request throttler.
    pub request_throttle_wait_count: AtomicU64,
    /// Held requests that ran although their connection had closed.
    pub stale_requests: AtomicU64,
    /// Held requests dropped because their connection had closed.
    pub stale_requests_dropped: AtomicU64,
    /// Requests answered `Throttled` after waiting too long.
    pub throttled_ops: AtomicU64,
    /// Large requests refused, their connections closed.
    pub large_requests_rejected: AtomicU64,
}

/// `largeRequestThreshold` and `largeRequestMaxBytes` at work.
pub struct LargeRequests {
    threshold: i64,
    max_bytes: i64,
    in_process_bytes: AtomicI64,
}

impl LargeRequests {
    pub fn new(threshold: i64, max_bytes: i64) -> Self {
        Self {
            threshold,
            max_bytes,
            in_process_bytes: AtomicI64::new(0),
        }
    }

    /// Counts a request of `bytes` in; the bytes to give back when it is
    /// answered, or `Err` when it would pass the maximum.
    fn take(&self, bytes: usize) -> Result<i64, ()> {
        let bytes = bytes as i64;
        if self.threshold < 0 || bytes <= self.threshold {
            return Ok(0);
        }
        let total = self.in_process_bytes.fetch_add(bytes, Ordering::SeqCst) + bytes;
        if total > self.max_bytes {
            self.in_process_bytes.fetch_sub(bytes, Ordering::SeqCst);
            return Err(());
        }
        Ok(bytes)
    }
}

/// Requests in process on this server and the limits on them.
pub struct RequestGate {
    in_process: AtomicUsize,
    /// Requests held by the throttler (ZooKeeper's `inflight`).
    held: AtomicUsize,
    /// Readers waiting on a limit: only then does an answer wake them.
    waiting: AtomicUsize,
    released: Notify,
    /// `globalOutstandingLimit` as this server applies it, which depends
    /// on the membership (see [`RequestGate::set_outstanding_limit`]).
    outstanding_limit: AtomicI64,
    throttler: RequestThrottleConfig,
    large: LargeRequests,
    pub counts: ThrottleCounts,
}

/// What the request throttler decided for one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Run it.
    Run,
    /// It waited past `throttled_op_wait_time`: answer `Throttled`.
    Throttled,
    /// Its connection closed while it waited: forget it.
    Dropped,
}

/// One request in process, from its arrival until its answer is queued;
/// counted on the server and on its connection until dropped.
pub struct InProcess {
    gate: Arc<RequestGate>,
    connection: Arc<AtomicUsize>,
    /// Bytes counted against `largeRequestMaxBytes`.
    large_bytes: i64,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if self.large_bytes > 0 {
            self.gate
                .large
                .in_process_bytes
                .fetch_sub(self.large_bytes, Ordering::SeqCst);
        }
        self.gate.in_process.fetch_sub(1, Ordering::SeqCst);
        self.connection.fetch_sub(1, Ordering::SeqCst);
        self.gate.wake();
    }
}

impl RequestGate {
    pub fn new(
        outstanding_limit: i64,
        throttler: RequestThrottleConfig,
        large: LargeRequests,
    ) -> Self {
        Self {
            large,
            in_process: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
            outstanding_limit: AtomicI64::new(outstanding_limit),
            throttler,
            counts: ThrottleCounts::default(),
        }
    }

    /// A new limit of requests in process, when a reconfig changed the
    /// membership it is divided by.
    pub fn set_outstanding_limit(&self, limit: i64) {
        self.outstanding_limit.store(limit, Ordering::Relaxed);
        self.wake();
    }

    /// Requests in process: ZooKeeper's `outstanding_requests`.
    pub fn in_process(&self) -> usize {
        self.in_process.load(Ordering::SeqCst)
    }

    /// Counts a request of `bytes` from a connection (whose count is
    /// `connection`) in process until the returned guard drops; `None`
    /// when it is a large request past `largeRequestMaxBytes`.
    pub fn enter(
        self: &Arc<Self>,
        connection: &Arc<AtomicUsize>,
        bytes: usize,
    ) -> Option<InProcess> {
        let Ok(large_bytes) = self.large.take(bytes) else {
            self.counts
                .large_requests_rejected
                .fetch_add(1, Ordering::Relaxed);
            return None;
        };
        self.in_process.fetch_add(1, Ordering::SeqCst);
        connection.fetch_add(1, Ordering::SeqCst);
        Some(InProcess {
            gate: self.clone(),
            connection: connection.clone(),
            large_bytes,
        })
    }

    /// ZooKeeper's `shouldThrottle`: whether a connection with `own`
    /// requests in process must not be read for now.
    pub fn must_pause(&self, own: usize) -> bool {
        let limit = self.outstanding_limit.load(Ordering::Relaxed);
        let over = |count: &AtomicUsize| limit < count.load(Ordering::SeqCst) as i64;
        own > 0 && (over(&self.in_process) || over(&self.held))
    }

    /// Waits until a connection whose in-process count is `own` may be
    /// read again; false if `cancelled` first.
    pub async fn paused(&self, own: &AtomicUsize, cancelled: &CancellationToken) -> bool {
        if !self.must_pause(own.load(Ordering::SeqCst)) {
            return true;
        }
        self.wait_until(
            || !self.must_pause(own.load(Ordering::SeqCst)),
            None,
            cancelled,
        )
        .await
        .is_ok()
    }

    /// The request throttler: holds a request while
    /// `request_throttle_max_requests` are in process, looking again at
    /// every answer and at least every stall time. Only a `throttlable`
    /// request can be answered `Throttled`, once held longer than
    /// `throttled_op_wait_time` since it `arrived`.
    pub async fn admit(
        &self,
        cancelled: &CancellationToken,
        throttlable: bool,
        arrived: Instant,
    ) -> Admission {
        let max = self.throttler.max_requests;
        if max == 0 || self.in_process() < max {
            return Admission::Run;
        }
        let stall = Duration::from_millis(self.throttler.stall_time_ms.max(1));
        self.held.fetch_add(1, Ordering::SeqCst);
        let stale = loop {
            match self
                .wait_until(|| self.in_process() < max, Some(stall), cancelled)
                .await
            {
                Ok(()) => break false,
                Err(Waited::Stalled) => {
                    self.counts
                        .request_throttle_wait_count
                        .fetch_add(1, Ordering::Relaxed);
                }
                Err(Waited::Cancelled) if self.throttler.drop_stale => {
                    self.held.fetch_sub(1, Ordering::SeqCst);
                    self.counts
                        .stale_requests_dropped
                        .fetch_add(1, Ordering::Relaxed);
                    return Admission::Dropped;
                }
                Err(Waited::Cancelled) => {
                    // Kept, as ZooKeeper keeps it: it runs when its turn
                    // comes, and only the answer is lost.
                    let _ = self
                        .wait_until(|| self.in_process() < max, None, &CancellationToken::new())
                        .await;
                    break true;
                }
            }
        };
        self.held.fetch_sub(1, Ordering::SeqCst);
        if stale {
            self.counts.stale_requests.fetch_add(1, Ordering::Relaxed);
        }
        let limit = self.throttler.throttled_op_wait_time_ms;
        if throttlable && limit > 0 && arrived.elapsed() > Duration::from_millis(limit) {
            self.counts.throttled_ops.fetch_add(1, Ordering::Relaxed);
            return Admission::Throttled;
        }
        Admission::Run
    }

    /// Waits until `ready`, for at most `stall`, or until `cancelled`.
    async fn wait_until(
        &self,
        ready: impl Fn() -> bool,
        stall: Option<Duration>,
        cancelled: &CancellationToken,
    ) -> Result<(), Waited> {
        // Registered as waiting before looking, so an answer that lands in
        // between either is seen by `ready` or wakes us.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _done = WaitingGuard(&self.waiting);
        let deadline = stall.map(|stall| tokio::time::Instant::now() + stall);
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready() {
                return Ok(());
            }
            let stalled = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            // Cancel safety: every branch only waits; dropping them loses
            // nothing.
            tokio::select! {
                () = notified => {}
                () = stalled => return Err(Waited::Stalled),
                () = cancelled.cancelled() => return Err(Waited::Cancelled),
            }
        }
    }

    fn wake(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.released.notify_waiters();
        }
    }
}

enum Waited {
    Stalled,
    Cancelled,
}

struct WaitingGuard<'a>(&'a AtomicUsize);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// ZooKeeper's BlueThrottle.
pub struct ConnectionThrottle {
    config: ConnectionThrottleConfig,
    /// The bucket's size and fill count in tokens.
    max_tokens: i64,
    fill_count: i64,
    state: Mutex<Bucket>,
}

struct Bucket {
    tokens: i64,
    last_fill: Instant,
    drop: f64,
    last_freeze: Instant,
}

/// What a connection asks of the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionKind {
    NewSession,
    Renewal,
}

impl ConnectionThrottle {
    pub fn new(config: ConnectionThrottleConfig) -> Self {
        Self::starting_at(config, Instant::now())
    }

    fn starting_at(config: ConnectionThrottleConfig, now: Instant) -> Self {
        let (max_tokens, fill_count) = config.effective_tokens();
        Self {
            config,
            max_tokens,
            fill_count,
            state: Mutex::new(Bucket {
                tokens: max_tokens,
                last_fill: now,
                drop: 0.0,
                last_freeze: now,
            }),
        }
    }

    /// Whether a connection of `kind` may go on; takes its tokens if so.
    pub fn admit(&self, kind: ConnectionKind) -> bool {
        self.admit_at(kind, Instant::now(), rand::thread_rng().gen())
    }

    /// [`Self::admit`] at `now`, with `chance` drawn uniformly from [0, 1).
    fn admit_at(&self, kind: ConnectionKind, now: Instant, chance: f64) -> bool {
        if self.max_tokens == 0 {
            return true;
        }
        let need = self.tokens_for(kind);
        let mut bucket = self.state.lock().expect("connection throttle poisoned");
        let since_fill = now.duration_since(bucket.last_fill).as_millis() as i64;
        if since_fill > self.config.fill_time_ms {
            let refill = since_fill * self.fill_count / self.config.fill_time_ms;
            bucket.tokens = (bucket.tokens + refill).min(self.max_tokens);
            bucket.last_fill = now;
        }
        if self.config.freeze_time_ms != -1 && !self.blue(&mut bucket, now, chance) {
            return false;
        }
        if bucket.tokens < need {
            return false;
        }
        bucket.tokens -= need;
        true
    }

    /// BLUE: once per freeze time, raise the drop probability if the
    /// bucket is empty, lower it if the bucket is near full; then drop at
    /// random with that probability.
    fn blue(&self, bucket: &mut Bucket, now: Instant, chance: f64) -> bool {
        let deficit = self.max_tokens - bucket.tokens;
        let since_freeze = now.duration_since(bucket.last_freeze).as_millis() as i64;
        let threshold = (self.max_tokens as f64 * self.config.decrease_ratio).round() as i64;
        if since_freeze > self.config.freeze_time_ms {
            if deficit == self.max_tokens && bucket.drop < 1.0 {
                bucket.drop = (bucket.drop + self.config.drop_increase).min(1.0);
            } else if deficit <= threshold && bucket.drop > 0.0 {
                bucket.drop = (bucket.drop - self.config.drop_decrease).max(0.0);
            }
            bucket.last_freeze = now;
        }
        chance >= bucket.drop
    }

    fn tokens_for(&self, kind: ConnectionKind) -> i64 {
        if !self.config.weight_enabled {
            return 1;
        }
        let weights = self.config.weights();
        match kind {
            // Paddock has no local sessions: every new session is global.
            ConnectionKind::NewSession => weights.global,
            ConnectionKind::Renewal => weights.renew,
        }
    }

    /// The chance a connection is dropped at random now.
    pub fn drop_probability(&self) -> f64 {
        self.state
            .lock()
            .expect("connection throttle poisoned")
            .drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(config: ConnectionThrottleConfig) -> (ConnectionThrottle, Instant) {
        let start = Instant::now();
        (ConnectionThrottle::starting_at(config, start), start)
    }

    fn ms(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn off_by_default() {
        let (t, start) = throttle(ConnectionThrottleConfig::default());
        assert!((0..1000).all(|_| t.admit_at(ConnectionKind::NewSession, start, 0.0)));
    }

    #[test]
    fn a_bucket_refills_at_its_rate() {
        let (t, start) = throttle(ConnectionThrottleConfig {
            tokens: 3,
            fill_time_ms: 100,
            fill_count: 2,
            ..Default::default()
        });
        let admit = |at| t.admit_at(ConnectionKind::NewSession, at, 0.5);
        assert!(admit(start) && admit(start) && admit(start));
        assert!(!admit(start));
        // Only once more than the fill time has passed.
        assert!(!admit(ms(start, 100)));
        assert!(admit(ms(start, 101)) && admit(ms(start, 101)));
        assert!(!admit(ms(start, 101)));
    }

    #[test]
    fn weighed_connections_take_their_weight() {
        let (t, start) = throttle(ConnectionThrottleConfig {
            tokens: 2,
            fill_time_ms: 1000,
            weight_enabled: true,
            ..Default::default()
        });
        // 6 tokens: two new sessions (3 each), or three renewals (2 each).
        assert!(t.admit_at(ConnectionKind::NewSession, start, 0.5));
        assert!(t.admit_at(ConnectionKind::Renewal, start, 0.5));
        assert!(!t.admit_at(ConnectionKind::NewSession, start, 0.5));
    }

    #[test]
    fn blue_raises_the_drop_chance_while_the_bucket_is_empty() {
        let (t, start) = throttle(ConnectionThrottleConfig {
            tokens: 1,
            fill_time_ms: 1_000_000,
            freeze_time_ms: 10,
            drop_increase: 0.25,
            drop_decrease: 0.1,
            ..Default::default()
        });
        assert!(t.admit_at(ConnectionKind::NewSession, start, 0.99));
        for step in 1..=4 {
            t.admit_at(ConnectionKind::NewSession, ms(start, 11 * step), 0.99);
        }
        assert_eq!(t.drop_probability(), 1.0);
        // Certain to drop now, whatever the draw.
        assert!(!t.admit_at(ConnectionKind::NewSession, ms(start, 50), 0.999));
    }

    #[tokio::test]
    async fn a_connection_with_requests_pauses_past_the_limit() {
        let gate = Arc::new(RequestGate::new(
            1,
            RequestThrottleConfig::default(),
            LargeRequests::new(-1, 0),
        ));
        let (a, b) = (Arc::default(), Arc::default());
        let first = gate.enter(&a, 10).unwrap();
        let _second = gate.enter(&a, 10).unwrap();
        // Two in process, over the limit of one: a pauses, b (none of its
        // own) does not.
        assert!(gate.must_pause(2) && !gate.must_pause(0));
        let never = CancellationToken::new();
        assert!(gate.paused(&b, &never).await);
        let waiter = paused_in_background(&gate, &a).await;
        drop(first);
        assert!(waiter.await.unwrap());
    }

    /// A task waiting until connection `own` may be read again, checked to
    /// be still waiting.
    async fn paused_in_background(
        gate: &Arc<RequestGate>,
        own: &Arc<AtomicUsize>,
    ) -> tokio::task::JoinHandle<bool> {
        let waiter = {
            let (gate, own) = (gate.clone(), own.clone());
            tokio::spawn(async move { gate.paused(&own, &CancellationToken::new()).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        waiter
    }

    #[tokio::test]
    async fn a_raised_limit_lets_a_paused_connection_go_on() {
        let gate = Arc::new(RequestGate::new(
            1,
            RequestThrottleConfig::default(),
            LargeRequests::new(-1, 0),
        ));
        let a: Arc<AtomicUsize> = Arc::default();
        let _first = gate.enter(&a, 10).unwrap();
        let _second = gate.enter(&a, 10).unwrap();
        let waiter = paused_in_background(&gate, &a).await;
        // A reconfig left fewer voters to divide the limit by.
        gate.set_outstanding_limit(2);
        assert!(waiter.await.unwrap());
        assert!(!gate.must_pause(2));
        gate.set_outstanding_limit(1);
        assert!(gate.must_pause(2));
    }

    #[tokio::test]
    async fn the_throttler_holds_drops_and_refuses() {
        let config = RequestThrottleConfig {
            max_requests: 1,
            stall_time_ms: 5,
            drop_stale: true,
            throttled_op_wait_time_ms: 1,
        };
        let gate = Arc::new(RequestGate::new(1000, config, LargeRequests::new(-1, 0)));
        let own = Arc::default();
        let busy = gate.enter(&own, 10).unwrap();
        let closed = CancellationToken::new();
        closed.cancel();
        assert_eq!(
            gate.admit(&closed, true, Instant::now()).await,
            Admission::Dropped
        );
        let open = CancellationToken::new();
        let held = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.admit(&open, true, Instant::now()).await })
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        drop(busy);
        // It waited longer than throttled_op_wait_time.
        assert_eq!(held.await.unwrap(), Admission::Throttled);
        let counts = &gate.counts;
        assert!(counts.request_throttle_wait_count.load(Ordering::Relaxed) >= 1);
        assert_eq!(counts.stale_requests_dropped.load(Ordering::Relaxed), 1);
        assert_eq!(counts.throttled_ops.load(Ordering::Relaxed), 1);
        assert_eq!(
            gate.admit(&CancellationToken::new(), true, Instant::now())
                .await,
            Admission::Run
        );
    }

    #[test]
    fn large_requests_share_their_maximum() {
        let gate = Arc::new(RequestGate::new(
            1000,
            RequestThrottleConfig::default(),
            LargeRequests::new(100, 300),
        ));
        let own = Arc::default();
        let small = gate.enter(&own, 100).unwrap();
        let first = gate.enter(&own, 200).unwrap();
        assert!(gate.enter(&own, 101).is_none(), "200 + 101 > 300");
        assert_eq!(
            gate.counts.large_requests_rejected.load(Ordering::Relaxed),
            1
        );
        drop(first);
        assert!(gate.enter(&own, 300).is_some(), "the bytes came back");
        drop(small);
    }
}
