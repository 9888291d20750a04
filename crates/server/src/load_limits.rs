//! ZooKeeper's limits on load, read from zoo.cfg under ZooKeeper's keys
//! (which ZooKeeper takes as `zookeeper.`-prefixed system properties):
//!
//! - `globalOutstandingLimit` (1000): requests in process on this server,
//!   divided among the voters of an ensemble as ZooKeeper divides it
//!   (`limit / (voters - 1)` with more than two voters).
//! - `request_throttle_max_requests` (0: off), `request_throttle_stall_time`
//!   (100 ms), `request_throttle_drop_stale` (true), `throttled_op_wait_time`
//!   (0: off): ZooKeeper's RequestThrottler.
//! - `connection_throttle_*`: ZooKeeper's BlueThrottle, a token bucket
//!   on new connections with optional random early drops.
//! - `maxCnxns` (0: unlimited): connections to this server in all.
//! - `largeRequestThreshold` (-1: off) and `largeRequestMaxBytes` (100 MiB):
//!   requests over the threshold may hold at most that many bytes in
//!   process together; past it, the connection that sent one is closed.
//!
//! The runtime halves are `throttle::RequestGate` and
//! `throttle::ConnectionThrottle`.

use crate::config::{boolean, invalid, number, ConfigError};

#[derive(Debug, Clone, PartialEq)]
pub struct LoadLimits {
    /// `globalOutstandingLimit`, before the division among voters.
    pub global_outstanding_limit: i64,
    /// `maxCnxns`: connections in all; 0 for no limit.
    pub max_cnxns: usize,
    /// `largeRequestThreshold`: a request of more bytes is large; -1 for
    /// none.
    pub large_request_threshold: i64,
    /// `largeRequestMaxBytes`: bytes of large requests in process at once.
    pub large_request_max_bytes: i64,
    pub request_throttle: RequestThrottleConfig,
    pub connection_throttle: ConnectionThrottleConfig,
}

impl Default for LoadLimits {
    fn default() -> Self {
        Self {
            global_outstanding_limit: 1000,
            max_cnxns: 0,
            large_request_threshold: -1,
            large_request_max_bytes: LARGE_REQUEST_MAX_BYTES_DEFAULT,
            request_throttle: RequestThrottleConfig::default(),
            connection_throttle: ConnectionThrottleConfig::default(),
        }
    }
}

/// ZooKeeper's default `largeRequestMaxBytes`: 100 MiB.
const LARGE_REQUEST_MAX_BYTES_DEFAULT: i64 = 100 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestThrottleConfig {
    /// Requests in process past which new ones wait; 0 turns it off.
    pub max_requests: usize,
    /// How long a waiting request sleeps before it looks again, at most.
    pub stall_time_ms: u64,
    /// Drop a waiting request whose connection has closed.
    pub drop_stale: bool,
    /// A request that waited longer than this is answered `Throttled`
    /// (-127) and not run; 0 turns it off.
    pub throttled_op_wait_time_ms: u64,
}

impl Default for RequestThrottleConfig {
    fn default() -> Self {
        Self {
            max_requests: 0,
            stall_time_ms: 100,
            drop_stale: true,
            throttled_op_wait_time_ms: 0,
        }
    }
}

/// BlueThrottle's settings, as configured (see [`Self::effective`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionThrottleConfig {
    /// The bucket's size; 0 turns the throttle off.
    pub tokens: i64,
    /// The bucket gains `fill_count` tokens every `fill_time_ms`.
    pub fill_time_ms: i64,
    pub fill_count: i64,
    /// How often the drop probability may change; -1 turns random drops
    /// off.
    pub freeze_time_ms: i64,
    pub drop_increase: f64,
    pub drop_decrease: f64,
    /// The drop probability falls only while the bucket's deficit is at
    /// most this share of its size.
    pub decrease_ratio: f64,
    /// Weigh connections by kind: a new session, a local one, a renewal.
    pub weight_enabled: bool,
    pub global_session_weight: i64,
    pub local_session_weight: i64,
    pub renew_session_weight: i64,
}

impl Default for ConnectionThrottleConfig {
    fn default() -> Self {
        Self {
            tokens: 0,
            fill_time_ms: 1,
            fill_count: 1,
            freeze_time_ms: -1,
            drop_increase: 0.02,
            drop_decrease: 0.002,
            decrease_ratio: 0.0,
            weight_enabled: false,
            global_session_weight: 3,
            local_session_weight: 1,
            renew_session_weight: 2,
        }
    }
}

/// The weights ZooKeeper settles on: a weight that is not positive falls
/// back to its default, and the global and renew weights are at least the
/// local one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWeights {
    pub global: i64,
    pub local: i64,
    pub renew: i64,
}

impl ConnectionThrottleConfig {
    pub fn weights(&self) -> SessionWeights {
        let local = if self.local_session_weight <= 0 {
            1
        } else {
            self.local_session_weight
        };
        let at_least_local = |weight: i64, default: i64| {
            if weight <= 0 {
                default
            } else {
                weight.max(local)
            }
        };
        SessionWeights {
            global: at_least_local(self.global_session_weight, 3),
            local,
            renew: at_least_local(self.renew_session_weight, 2),
        }
    }

    /// The bucket's size and fill count in tokens: with weights, the
    /// configured figures count new global sessions, which weigh more.
    pub fn effective_tokens(&self) -> (i64, i64) {
        if self.weight_enabled {
            let global = self.weights().global;
            (self.tokens * global, self.fill_count * global)
        } else {
            (self.tokens, self.fill_count)
        }
    }
}

impl LoadLimits {
    /// Takes `key` (without its `zookeeper.` prefix) if it is one of these
    /// limits'; `Ok(false)` if it is not.
    pub fn set(&mut self, key: &str, raw_key: &str, value: &str) -> Result<bool, ConfigError> {
        let request = &mut self.request_throttle;
        match key {
            "globalOutstandingLimit" => self.global_outstanding_limit = integer(raw_key, value)?,
            "maxCnxns" => self.max_cnxns = number(raw_key, value)?,
            // As ZooKeeper: 0 and values below -1 mean off, a maximum that is
            // not positive means the default.
            "largeRequestThreshold" => {
                let threshold = integer(raw_key, value)?;
                self.large_request_threshold = if threshold > 0 { threshold } else { -1 };
            }
            "largeRequestMaxBytes" => {
                let max = integer(raw_key, value)?;
                self.large_request_max_bytes = if max > 0 {
                    max
                } else {
                    LARGE_REQUEST_MAX_BYTES_DEFAULT
                };
            }
            "request_throttle_max_requests" => request.max_requests = number(raw_key, value)?,
            "request_throttle_stall_time" => request.stall_time_ms = number(raw_key, value)?,
            "request_throttle_drop_stale" => request.drop_stale = boolean(raw_key, value)?,
            "throttled_op_wait_time" => request.throttled_op_wait_time_ms = number(raw_key, value)?,
            _ => return self.set_connection_throttle(key, raw_key, value),
        }
        Ok(true)
    }

    fn set_connection_throttle(
        &mut self,
        key: &str,
        raw_key: &str,
        value: &str,
    ) -> Result<bool, ConfigError> {
        let Some(setting) = key.strip_prefix("connection_throttle_") else {
            return Ok(false);
        };
        let c = &mut self.connection_throttle;
        match setting {
            "tokens" => c.tokens = number(raw_key, value)?,
            "fill_time" => {
                c.fill_time_ms = number(raw_key, value)?;
                if c.fill_time_ms == 0 {
                    return Err(invalid(raw_key, value, "must be at least 1 millisecond"));
                }
            }
            "fill_count" => c.fill_count = number(raw_key, value)?,
            "freeze_time" => c.freeze_time_ms = integer(raw_key, value)?,
            "drop_increase" => c.drop_increase = probability(raw_key, value)?,
            "drop_decrease" => c.drop_decrease = probability(raw_key, value)?,
            "decrease_ratio" => c.decrease_ratio = probability(raw_key, value)?,
            "weight_enabled" => c.weight_enabled = boolean(raw_key, value)?,
            "global_session_weight" => c.global_session_weight = integer(raw_key, value)?,
            "local_session_weight" => c.local_session_weight = integer(raw_key, value)?,
            "renew_session_weight" => c.renew_session_weight = integer(raw_key, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The requests in process this server allows before it stops reading
    /// from connections that have some: ZooKeeper divides the limit among
    /// the followers of an ensemble of more than two voters.
    pub fn outstanding_limit(&self, voters: usize, observer: bool) -> i64 {
        let limit = self.global_outstanding_limit;
        if observer || voters <= 2 {
            limit
        } else {
            limit / (voters as i64 - 1)
        }
    }
}

/// A Java `int`, negative allowed.
fn integer(key: &str, value: &str) -> Result<i64, ConfigError> {
    value
        .parse::<i32>()
        .map(i64::from)
        .map_err(|_| invalid(key, value, "expected a whole number"))
}

fn probability(key: &str, value: &str) -> Result<f64, ConfigError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| invalid(key, value, "expected a number from 0 to 1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(pairs: &[(&str, &str)]) -> Result<LoadLimits, ConfigError> {
        let mut limits = LoadLimits::default();
        for (key, value) in pairs {
            assert!(limits.set(key, key, value)?, "{key} not taken");
        }
        Ok(limits)
    }

    #[test]
    fn reads_zookeepers_keys() {
        let l = limits(&[
            ("globalOutstandingLimit", "10"),
            ("maxCnxns", "5"),
            ("largeRequestThreshold", "0"),
            ("largeRequestMaxBytes", "-5"),
            ("request_throttle_max_requests", "3"),
            ("request_throttle_stall_time", "20"),
            ("request_throttle_drop_stale", "false"),
            ("throttled_op_wait_time", "7"),
            ("connection_throttle_tokens", "2"),
            ("connection_throttle_freeze_time", "-1"),
            ("connection_throttle_drop_increase", "0.5"),
        ])
        .unwrap();
        assert_eq!(l.global_outstanding_limit, 10);
        assert_eq!(l.max_cnxns, 5);
        assert_eq!(l.large_request_threshold, -1, "0 is off, as in ZooKeeper");
        assert_eq!(l.large_request_max_bytes, LARGE_REQUEST_MAX_BYTES_DEFAULT);
        assert_eq!(
            l.request_throttle,
            RequestThrottleConfig {
                max_requests: 3,
                stall_time_ms: 20,
                drop_stale: false,
                throttled_op_wait_time_ms: 7
            }
        );
        assert_eq!(l.connection_throttle.tokens, 2);
        assert_eq!(l.connection_throttle.drop_increase, 0.5);
        assert!(!LoadLimits::default()
            .set("tickTime", "tickTime", "1")
            .unwrap());
        assert!(!LoadLimits::default()
            .set("connection_throttle_nope", "x", "1")
            .unwrap());
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        for (key, value) in [
            ("connection_throttle_fill_time", "0"),
            ("connection_throttle_drop_increase", "1.5"),
            ("request_throttle_max_requests", "-1"),
            ("request_throttle_drop_stale", "maybe"),
            ("globalOutstandingLimit", "lots"),
        ] {
            assert!(limits(&[(key, value)]).is_err(), "{key}={value}");
        }
    }

    #[test]
    fn divides_the_outstanding_limit_as_zookeeper() {
        let l = LoadLimits::default();
        assert_eq!(l.outstanding_limit(1, false), 1000);
        assert_eq!(l.outstanding_limit(2, false), 1000);
        assert_eq!(l.outstanding_limit(3, false), 500);
        assert_eq!(l.outstanding_limit(5, false), 250);
        assert_eq!(l.outstanding_limit(5, true), 1000);
    }

    #[test]
    fn weights_settle_as_zookeepers() {
        let mut c = ConnectionThrottleConfig::default();
        assert_eq!(
            c.weights(),
            SessionWeights {
                global: 3,
                local: 1,
                renew: 2
            }
        );
        c.local_session_weight = 4;
        c.global_session_weight = 0;
        c.renew_session_weight = 2;
        assert_eq!(
            c.weights(),
            SessionWeights {
                global: 3,
                local: 4,
                renew: 4
            }
        );
        c = ConnectionThrottleConfig {
            tokens: 10,
            fill_count: 2,
            weight_enabled: true,
            ..Default::default()
        };
        assert_eq!(c.effective_tokens(), (30, 6));
    }
}
