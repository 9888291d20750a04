//! `zoo.cfg`: ZooKeeper's configuration file, read with ZooKeeper's keys.
//!
//! ZooKeeper turns keys it does not know into `zookeeper.`-prefixed system
//! properties, so users also set things like `jute.maxbuffer` or
//! `DigestAuthenticationProvider.superDigest` there. We accept every key we
//! honour with or without that prefix, check relations between fields up
//! front, and name the key and the fix when something is wrong.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::load_limits::LoadLimits;
use crate::tls_config::{ClientTls, QuorumTls};

/// ZooKeeper's default `jute.maxbuffer`: 1 MiB less one byte's worth of
/// headroom, as `0xfffff`.
pub const JUTE_MAX_BUFFER_DEFAULT: usize = 0xfffff;

/// The four-letter words ZooKeeper 3.9 enables when no whitelist is given.
/// The `initLimit` and `syncLimit` of zoo.cfg's sample, for an observed
/// ZooKeeper ensemble that zoo.cfg does not time.
const INIT_LIMIT_TICKS_DEFAULT: u32 = 10;
const SYNC_LIMIT_TICKS_DEFAULT: u32 = 5;
const FOUR_LETTER_DEFAULT: &[&str] = &["srvr"];
/// The client ports' accept queue when `clientPortListenBacklog` is unset
/// (the kernel caps it at `net.core.somaxconn`). ZooKeeper's JVM default
/// is 50; a herd of clients reconnecting after a restart overflows a short
/// queue, and each connection the kernel drops waits a second or more for
/// its SYN to be sent again.
pub const DEFAULT_LISTEN_BACKLOG: u32 = 4096;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub client_port: u16,
    pub client_port_address: Option<IpAddr>,
    /// Whether `client_port` takes plain text: false when zoo.cfg gives a
    /// `secureClientPort` and no `clientPort`, as in ZooKeeper.
    pub plain_client_port: bool,
    /// TLS for clients: `secureClientPort`, `client.portUnification`, `ssl.*`.
    pub client_tls: ClientTls,
    /// TLS between servers: `sslQuorum`, `portUnification`, `ssl.quorum.*`.
    pub quorum_tls: QuorumTls,
    pub data_dir: PathBuf,
    /// Where the write-ahead log lives; `data_dir` unless set.
    pub data_log_dir: PathBuf,
    pub tick_time_ms: u32,
    /// Bounds of the negotiated session timeout. As in ZooKeeper, a
    /// negative bound other than -1 (the default) is taken as given.
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// Connections allowed from one IP address; 0 means unlimited.
    pub max_client_cnxns: usize,
    /// `clientPortListenBacklog`: connections the kernel queues for the
    /// client ports before they are accepted; `None` (the key unset, or -1
    /// as ZooKeeper writes it) for [`DEFAULT_LISTEN_BACKLOG`].
    pub client_port_listen_backlog: Option<u32>,
    /// Applied transactions between snapshots (ZooKeeper's `snapCount`).
    pub snap_count: u64,
    /// KiB of log between snapshots, whatever the count; <= 0 for no limit
    /// (ZooKeeper's `snapSizeLimitInKb`).
    pub snap_size_limit_kb: i64,
    /// A log sync slower than this many milliseconds is logged as a
    /// warning (ZooKeeper's `fsync.warningthresholdms`).
    pub fsync_warning_threshold_ms: u64,
    pub autopurge_snap_retain_count: u32,
    pub extended_types_enabled: bool,
    /// Refuse a create or setData past a hard quota limit with
    /// `QuotaExceeded`, and log every limit passed
    /// (`zookeeper.enforceQuota`). Off, quotas are bookkeeping only.
    pub enforce_quota: bool,
    /// ZooKeeper's audit log (`zookeeper.audit.enable`): see `audit`.
    pub audit_enabled: bool,
    /// `readonlymode.enabled`: a server of an ensemble without a leader
    /// serves read-only clients.
    pub read_only_mode: bool,
    /// `reconfigEnabled`: whether the reconfig request may change the
    /// ensemble's membership (off by default since ZooKeeper 3.5.3).
    pub reconfig_enabled: bool,
    /// `standaloneEnabled`: with one voter, run standalone (true, the
    /// default) or as an ensemble of one that reconfig can grow.
    pub standalone_enabled: bool,
    /// `dynamicConfigFile`: where the `server.N` lines are, as ZooKeeper
    /// 3.5+ writes them; its name's `.dynamic.<hex>` suffix is their
    /// version.
    pub dynamic_config_file: Option<PathBuf>,
    /// `observeZooKeeper`: the quorum addresses (`host:port`) of a running
    /// Apache ZooKeeper ensemble this server follows as an observer,
    /// instead of replicating with Paddock servers; empty otherwise.
    pub observe_zookeeper: Vec<String>,
    /// That ensemble's `initLimit` and `syncLimit`.
    pub init_limit_ticks: u32,
    pub sync_limit_ticks: u32,
    /// The version of the `server.N` lines: 0 in zoo.cfg, the suffix of a
    /// dynamic configuration file's name.
    pub servers_version: i64,
    /// Enabled four-letter words; `None` means all of them (`*`).
    pub four_letter_words: Option<HashSet<String>>,
    pub jute_max_buffer: usize,
    /// `user:base64(sha1(user:password))` of the superuser. Taken as given,
    /// as ZooKeeper does: one without a colon never matches (see
    /// [`ServerConfig::warnings`]).
    pub super_digest: Option<String>,
    /// A JAAS file with a `Server` section listing SASL users.
    pub jaas_config: Option<PathBuf>,
    pub container_check_interval_ms: u64,
    pub container_max_never_used_interval_ms: i64,
    /// The ensemble (`server.N=...` lines), in id order; empty when
    /// standalone.
    pub servers: Vec<ServerSpec>,
    /// ZooKeeper's AdminServer: HTTP commands.
    pub admin: AdminConfig,
    /// The Prometheus endpoint; `None` unless `metricsProvider.className`
    /// names ZooKeeper's Prometheus provider.
    pub metrics: Option<MetricsConfig>,
    /// ZooKeeper's limits on load: outstanding requests, the request and
    /// connection throttles, `maxCnxns`.
    pub limits: LoadLimits,
    /// Keys we read but do not act on, reported once at start-up.
    pub ignored_keys: Vec<String>,
    /// The text of the zoo.cfg the server started from, for the
    /// AdminServer's `initial_configuration`; empty without one.
    pub initial_configuration: String,
}

/// The `admin.*` keys of ZooKeeper's AdminServer, with its defaults: on, at
/// 0.0.0.0:8080, commands under `/commands`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    pub enabled: bool,
    pub address: IpAddr,
    pub port: u16,
    /// Where the command listing lives; each command at `{url}/{name}`.
    pub command_url: String,
    /// `admin.forceHttps`: HTTPS only, with the `ssl.quorum.*` stores.
    pub force_https: bool,
    /// `admin.portUnification`: HTTPS and HTTP on the one port.
    pub port_unification: bool,
    /// `admin.needClientAuth`: an HTTPS client must show a certificate the
    /// `ssl.quorum` trust store trusts (x509 authentication needs it).
    pub need_client_auth: bool,
    /// `admin.rateLimiterIntervalInMS`: at most one `snapshot` or `restore`
    /// per interval.
    pub rate_limit_interval_ms: u64,
    /// `admin.snapshot.enabled`.
    pub snapshot_enabled: bool,
    /// `admin.restore.enabled`.
    pub restore_enabled: bool,
    /// `console.enabled`: Paddock's web console at `/console` on this port.
    pub console_enabled: bool,
}

impl AdminConfig {
    /// Whether the port speaks HTTPS (only, or beside HTTP).
    pub fn https(&self) -> bool {
        self.force_https || self.port_unification
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            address: IpAddr::from([0, 0, 0, 0]),
            port: 8080,
            command_url: "/commands".to_string(),
            force_https: false,
            port_unification: false,
            need_client_auth: false,
            rate_limit_interval_ms: 300_000,
            snapshot_enabled: true,
            restore_enabled: true,
            console_enabled: false,
        }
    }
}

/// ZooKeeper's Prometheus provider, and the only metrics provider Paddock
/// has; the one of ZooKeeper's default configuration exports nothing.
pub const PROMETHEUS_PROVIDER: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const DEFAULT_METRICS_PROVIDER: &str = "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider";

/// The `metricsProvider.*` keys, with the Prometheus provider's defaults:
/// `/metrics` on 0.0.0.0:7000.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    pub host: IpAddr,
    pub port: u16,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            host: IpAddr::from([0, 0, 0, 0]),
            port: 7000,
        }
    }
}

/// One `server.N=host:peerPort:electionPort[:participant|:observer][;[clientAddress:]clientPort]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// `N`, the server's `myid`.
    pub id: u64,
    pub host: String,
    /// Where this server's peers reach it: raft traffic, all of it. The
    /// election port is accepted for compatibility and not used, because
    /// raft elects its leader over the same connections.
    pub peer_port: u16,
    pub election_port: u16,
    pub observer: bool,
    pub client_port: Option<u16>,
    /// The host before the client port, when the line gives one.
    pub client_host: Option<String>,
}

impl ServerSpec {
    /// Parses the value of a `server.N` key.
    pub fn parse(id: u64, value: &str) -> Result<Self, String> {
        let (addresses, client) = match value.split_once(';') {
            Some((addresses, client)) => (addresses, Some(client.trim())),
            None => (value, None),
        };
        let parts: Vec<&str> = addresses.trim().split(':').collect();
        let (host, peer, election, role) = match parts.as_slice() {
            [host, peer, election] => (*host, *peer, *election, "participant"),
            [host, peer, election, role] => (*host, *peer, *election, *role),
            _ => return Err("expected host:peerPort:electionPort[:participant|:observer]".into()),
        };
        let port = |p: &str, what: &str| {
            p.parse::<u16>()
                .map_err(|_| format!("{what} {p:?} is not a port number"))
        };
        let observer = match role {
            "participant" => false,
            "observer" => true,
            other => return Err(format!("role {other:?} must be participant or observer")),
        };
        let (client_host, client_port) = match client.map(|c| c.rsplit_once(':')) {
            Some(Some((host, p))) => (Some(host.to_string()), Some(port(p, "client port")?)),
            Some(None) => (None, client.map(|p| port(p, "client port")).transpose()?),
            None => (None, None),
        };
        Ok(Self {
            id,
            host: host.to_string(),
            peer_port: port(peer, "peer port")?,
            election_port: port(election, "election port")?,
            observer,
            client_port,
            client_host,
        })
    }
}

/// The line's value as ZooKeeper writes it back (`QuorumServer.toString`):
/// the role always named, and the client address only when the line gave
/// one, a bare port as the wildcard address.
impl std::fmt::Display for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = if self.observer {
            "observer"
        } else {
            "participant"
        };
        write!(
            f,
            "{}:{}:{}:{role}",
            self.host, self.peer_port, self.election_port
        )?;
        if let Some(port) = self.client_port {
            let host = self.client_host.as_deref().unwrap_or("0.0.0.0");
            write!(f, ";{host}:{port}")?;
        }
        Ok(())
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let tick_time_ms = 2000;
        Self {
            client_port: 2181,
            client_port_address: None,
            data_dir: PathBuf::from("paddock-data"),
            data_log_dir: PathBuf::from("paddock-data"),
            tick_time_ms,
            min_session_timeout_ms: 2 * tick_time_ms as i32,
            max_session_timeout_ms: 20 * tick_time_ms as i32,
            max_client_cnxns: 60,
            client_port_listen_backlog: None,
            snap_count: 100_000,
            // ZooKeeper's default is 4 GiB of log on disk; Paddock reads
            // the log since the last snapshot into memory once on restart.
            snap_size_limit_kb: 256 * 1024,
            fsync_warning_threshold_ms: 1000,
            autopurge_snap_retain_count: 3,
            extended_types_enabled: false,
            enforce_quota: false,
            audit_enabled: false,
            read_only_mode: false,
            reconfig_enabled: false,
            standalone_enabled: true,
            dynamic_config_file: None,
            observe_zookeeper: Vec::new(),
            init_limit_ticks: INIT_LIMIT_TICKS_DEFAULT,
            sync_limit_ticks: SYNC_LIMIT_TICKS_DEFAULT,
            servers_version: 0,
            four_letter_words: Some(FOUR_LETTER_DEFAULT.iter().map(|s| s.to_string()).collect()),
            jute_max_buffer: JUTE_MAX_BUFFER_DEFAULT,
            super_digest: None,
            jaas_config: None,
            container_check_interval_ms: 60_000,
            container_max_never_used_interval_ms: 0,
            servers: Vec::new(),
            admin: AdminConfig::default(),
            metrics: None,
            limits: LoadLimits::default(),
            plain_client_port: true,
            client_tls: ClientTls::default(),
            quorum_tls: QuorumTls::default(),
            ignored_keys: Vec::new(),
            initial_configuration: String::new(),
        }
    }
}

/// A comma-separated list of `host:port`.
fn addresses(key: &str, value: &str) -> Result<Vec<String>, ConfigError> {
    let list: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    match list.iter().find(|a| {
        a.rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
    }) {
        Some(bad) => Err(invalid(key, value, format!("{bad:?} is not host:port"))),
        None if list.is_empty() => Err(invalid(key, value, "expected host:port,...")),
        None => Ok(list),
    }
}

/// A configuration problem, phrased for the operator who must fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{key}={value} in the configuration is invalid: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
}

pub(crate) fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Reads a Java properties file: `key=value` or `key: value` or `key value`,
/// `#` and `!` comments, surrounding whitespace ignored.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('!'))
        .map(|line| {
            let split = line
                .find(['=', ':'])
                .or_else(|| line.find(char::is_whitespace));
            match split {
                Some(at) => (
                    line[..at].trim().to_string(),
                    line[at + 1..].trim().to_string(),
                ),
                None => (line.to_string(), String::new()),
            }
        })
        .collect()
}

impl ServerConfig {
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Self::from_properties(&parse_properties(&text))?;
        config.initial_configuration = text;
        if let Some(dynamic) = config.dynamic_config_file.clone() {
            config.read_dynamic_config(&dynamic)?;
        }
        Ok(config)
    }

    /// The `server.N` lines of a dynamic configuration file, as ZooKeeper
    /// reads one: nothing else is allowed in it, nor are `server.N` lines
    /// in zoo.cfg beside it.
    fn read_dynamic_config(&mut self, path: &Path) -> Result<(), ConfigError> {
        let key = "dynamicConfigFile";
        let shown = path.display().to_string();
        if !self.servers.is_empty() {
            return Err(invalid(
                key,
                &shown,
                "server.N lines must be in the dynamic configuration file, not in zoo.cfg too",
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        for (name, value) in parse_properties(&text) {
            let id = name.strip_prefix("server.").and_then(|id| id.parse().ok());
            let Some(id) = id else {
                return Err(invalid(
                    key,
                    &shown,
                    format!("{name} has no place in a dynamic configuration file, which holds server.N lines only"),
                ));
            };
            let server =
                ServerSpec::parse(id, &value).map_err(|reason| invalid(&name, &value, reason))?;
            self.servers.push(server);
        }
        self.servers.sort_by_key(|s| s.id);
        check_participants(&self.servers)?;
        self.servers_version = path
            .file_name()
            .and_then(|name| {
                name.to_str()?
                    .rsplit_once(".dynamic.")
                    .map(|(_, v)| v.to_owned())
            })
            .and_then(|version| i64::from_str_radix(&version, 16).ok())
            .unwrap_or(0);
        Ok(())
    }

    /// `clientPortListenBacklog` as ZooKeeper reports it: -1 when unset.
    pub fn reported_listen_backlog(&self) -> i64 {
        self.client_port_listen_backlog.map_or(-1, i64::from)
    }

    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let mut min_timeout = None;
        let mut max_timeout = None;
        let mut data_log_dir = None;
        let mut metrics_provider = None;
        let mut metrics = MetricsConfig::default();
        for (raw_key, value) in props {
            let key = raw_key.strip_prefix("zookeeper.").unwrap_or(raw_key);
            if config.limits.set(key, raw_key, value)?
                || config.client_tls.set(key, raw_key, value)?
                || config.quorum_tls.set(key, raw_key, value)?
            {
                continue;
            }
            match key {
                "clientPort" => config.client_port = number(raw_key, value)?,
                "clientPortAddress" => config.client_port_address = Some(address(raw_key, value)?),
                "dataDir" => config.data_dir = PathBuf::from(value),
                "dataLogDir" => data_log_dir = Some(PathBuf::from(value)),
                "tickTime" => config.tick_time_ms = number(raw_key, value)?,
                "minSessionTimeout" => min_timeout = Some(session_timeout(raw_key, value)?),
                "maxSessionTimeout" => max_timeout = Some(session_timeout(raw_key, value)?),
                "maxClientCnxns" => config.max_client_cnxns = number(raw_key, value)?,
                "clientPortListenBacklog" => {
                    config.client_port_listen_backlog = listen_backlog(raw_key, value)?
                }
                "snapCount" => config.snap_count = number(raw_key, value)?,
                "snapSizeLimitInKb" => {
                    config.snap_size_limit_kb = value
                        .parse()
                        .map_err(|_| invalid(raw_key, value, "expected a number"))?
                }
                "fsync.warningthresholdms" => {
                    config.fsync_warning_threshold_ms = number(raw_key, value)?
                }
                "autopurge.snapRetainCount" => {
                    config.autopurge_snap_retain_count = number(raw_key, value)?
                }
                // Paddock prunes snapshots and log segments after every
                // snapshot, so there is no purge task to schedule; the key
                // is still checked so a typo is reported.
                "autopurge.purgeInterval" => {
                    number::<u32>(raw_key, value)?;
                }
                "extendedTypesEnabled" => config.extended_types_enabled = boolean(raw_key, value)?,
                "enforceQuota" => config.enforce_quota = boolean(raw_key, value)?,
                "audit.enable" => config.audit_enabled = boolean(raw_key, value)?,
                "readonlymode.enabled" => config.read_only_mode = boolean(raw_key, value)?,
                "reconfigEnabled" => config.reconfig_enabled = boolean(raw_key, value)?,
                "standaloneEnabled" => config.standalone_enabled = boolean(raw_key, value)?,
                "dynamicConfigFile" => config.dynamic_config_file = Some(PathBuf::from(value)),
                "observeZooKeeper" => config.observe_zookeeper = addresses(raw_key, value)?,
                "initLimit" => config.init_limit_ticks = number(raw_key, value)?,
                "syncLimit" => config.sync_limit_ticks = number(raw_key, value)?,
                "audit.impl.class" => audit_logger(raw_key, value)?,
                "4lw.commands.whitelist" => config.four_letter_words = whitelist(value),
                "jute.maxbuffer" => config.jute_max_buffer = number(raw_key, value)?,
                "DigestAuthenticationProvider.superDigest" => {
                    config.super_digest = Some(value.clone())
                }
                "jaasLoginConfig" | "java.security.auth.login.config" => {
                    config.jaas_config = Some(PathBuf::from(value))
                }
                "znode.container.checkIntervalMs" => {
                    config.container_check_interval_ms = number(raw_key, value)?
                }
                "znode.container.maxNeverUsedIntervalMs" => {
                    config.container_max_never_used_interval_ms = number(raw_key, value)?
                }
                "admin.enableServer" => config.admin.enabled = boolean(raw_key, value)?,
                "admin.serverAddress" => config.admin.address = address(raw_key, value)?,
                "admin.serverPort" => config.admin.port = number(raw_key, value)?,
                "admin.commandURL" => config.admin.command_url = command_url(raw_key, value)?,
                "admin.forceHttps" => config.admin.force_https = boolean(raw_key, value)?,
                "admin.portUnification" => config.admin.port_unification = boolean(raw_key, value)?,
                "admin.needClientAuth" => config.admin.need_client_auth = boolean(raw_key, value)?,
                "admin.rateLimiterIntervalInMS" => {
                    config.admin.rate_limit_interval_ms = number(raw_key, value)?
                }
                "admin.snapshot.enabled" => {
                    config.admin.snapshot_enabled = boolean(raw_key, value)?
                }
                "admin.restore.enabled" => config.admin.restore_enabled = boolean(raw_key, value)?,
                "console.enabled" => config.admin.console_enabled = boolean(raw_key, value)?,
                "metricsProvider.className" => metrics_provider = Some(value.as_str()),
                "metricsProvider.httpHost" => metrics.host = address(raw_key, value)?,
                "metricsProvider.httpPort" => metrics.port = number(raw_key, value)?,
                // The provider's JVM metrics have no counterpart here; the
                // process metrics Prometheus clients export are always on.
                "metricsProvider.exportJvmInfo" => {
                    boolean(raw_key, value)?;
                }
                _ => match key.strip_prefix("server.").map(str::parse::<u64>) {
                    Some(Ok(id)) => config.servers.push(
                        ServerSpec::parse(id, value)
                            .map_err(|reason| invalid(raw_key, value, reason))?,
                    ),
                    Some(Err(_)) => {
                        return Err(invalid(
                            raw_key,
                            value,
                            "the server id after `server.` must be a number",
                        ))
                    }
                    None => config.ignored_keys.push(raw_key.clone()),
                },
            }
        }
        config.metrics = match metrics_provider {
            Some(PROMETHEUS_PROVIDER) => Some(metrics),
            None | Some(DEFAULT_METRICS_PROVIDER) => None,
            Some(other) => {
                return Err(invalid(
                    "metricsProvider.className",
                    other,
                    format!("Paddock provides only {PROMETHEUS_PROVIDER}"),
                ))
            }
        };
        config.servers.sort_by_key(|s| s.id);
        check_participants(&config.servers)?;
        config.data_log_dir = data_log_dir.unwrap_or_else(|| config.data_dir.clone());
        config.plain_client_port =
            config.client_tls.port.is_none() || props.keys().any(|k| k == "clientPort");
        if config.tick_time_ms == 0 {
            return Err(invalid(
                "tickTime",
                "0",
                "must be a positive number of milliseconds",
            ));
        }
        // ZooKeeper: -1 (or absent) means the default of 2 and 20 ticks;
        // any other value, even a negative one, is taken as given.
        let tick = i64::from(config.tick_time_ms);
        let or_ticks = |timeout: Option<i32>, key: &str, ticks: i64| match timeout {
            Some(ms) if ms != -1 => Ok(ms),
            _ => i32::try_from(tick * ticks)
                .map_err(|_| invalid(key, "-1", format!("{ticks} ticks of tickTime is too long"))),
        };
        let min = or_ticks(min_timeout, "minSessionTimeout", 2)?;
        let max = or_ticks(max_timeout, "maxSessionTimeout", 20)?;
        if min > max {
            return Err(invalid(
                "minSessionTimeout",
                &min.to_string(),
                format!("must not exceed maxSessionTimeout ({max}); lower it or raise maxSessionTimeout"),
            ));
        }
        config.min_session_timeout_ms = min;
        config.max_session_timeout_ms = max;
        if config.snap_count < 2 {
            return Err(invalid(
                "snapCount",
                &config.snap_count.to_string(),
                "must be at least 2",
            ));
        }
        if config.jute_max_buffer < 1024 {
            return Err(invalid(
                "jute.maxbuffer",
                &config.jute_max_buffer.to_string(),
                "must be at least 1024 bytes",
            ));
        }
        Ok(config)
    }

    /// What is accepted, as ZooKeeper accepts it, but cannot be what the
    /// operator meant: one line each, to log at start-up.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self
            .super_digest
            .as_deref()
            .is_some_and(|d| !d.contains(':'))
        {
            warnings.push(
                "DigestAuthenticationProvider.superDigest has no colon, so no credentials will \
                 ever match it and there is no superuser; expected user:base64-sha1-digest"
                    .to_string(),
            );
        }
        if self.observe_zookeeper.is_empty()
            && (self.init_limit_ticks, self.sync_limit_ticks)
                != (INIT_LIMIT_TICKS_DEFAULT, SYNC_LIMIT_TICKS_DEFAULT)
        {
            warnings.push(
                "initLimit and syncLimit have no effect: Paddock's own servers elect with raft's \
                 timeouts; they time a ZooKeeper ensemble followed with observeZooKeeper"
                    .to_string(),
            );
        }
        warnings
    }

    /// Whether this server follows an Apache ZooKeeper ensemble as its
    /// observer (`observeZooKeeper`).
    pub fn observes_zookeeper(&self) -> bool {
        !self.observe_zookeeper.is_empty()
    }

    /// The timeout a client gets: what it asked for, within [min, max].
    pub fn negotiate_session_timeout(&self, requested_ms: i32) -> i32 {
        requested_ms.clamp(self.min_session_timeout_ms, self.max_session_timeout_ms)
    }

    /// How long a new connection may take to send its connect request: the
    /// longest session timeout, and at least a tick, so that a negative
    /// `maxSessionTimeout` does not close every connection at once.
    pub fn handshake_timeout(&self) -> Duration {
        let max_ms = u64::try_from(self.max_session_timeout_ms).unwrap_or(0);
        Duration::from_millis(max_ms.max(u64::from(self.tick_time_ms)))
    }

    /// The ensemble's voters (participants) and learners (observers) by
    /// id, from the `server.N` lines; a standalone server is the one voter
    /// 1.
    pub fn group(&self) -> (Vec<u64>, Vec<u64>) {
        if self.servers.is_empty() {
            return (vec![1], vec![]);
        }
        let (observers, participants): (Vec<_>, Vec<_>) =
            self.servers.iter().partition(|s| s.observer);
        (
            participants.iter().map(|s| s.id).collect(),
            observers.iter().map(|s| s.id).collect(),
        )
    }

    /// This server's id: ZooKeeper's `myid` file in the data directory.
    /// Standalone servers have none and use 1.
    pub fn my_id(&self) -> Result<u64, ConfigError> {
        if self.servers.is_empty() {
            return Ok(1);
        }
        let path = self.data_dir.join("myid");
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let id: u64 = text.trim().parse().map_err(|_| {
            invalid(
                "myid",
                text.trim(),
                format!(
                    "{} must hold this server's number from a server.N line",
                    path.display()
                ),
            )
        })?;
        if !self.servers.iter().any(|s| s.id == id) {
            return Err(invalid(
                "myid",
                &id.to_string(),
                "no server.N line has this id; add one or fix the myid file",
            ));
        }
        Ok(id)
    }

    /// Snapshots kept on disk: `autopurge.snapRetainCount`, at least 3 as
    /// ZooKeeper insists, so a damaged newest snapshot has older fallbacks.
    pub fn snapshots_retained(&self) -> usize {
        self.autopurge_snap_retain_count.max(3) as usize
    }

    pub fn four_letter_word_enabled(&self, word: &str) -> bool {
        self.four_letter_words
            .as_ref()
            .is_none_or(|words| words.contains(word))
    }
}

/// An ensemble needs a voter.
fn check_participants(servers: &[ServerSpec]) -> Result<(), ConfigError> {
    if !servers.is_empty() && servers.iter().all(|s| s.observer) {
        return Err(invalid(
            "server.N",
            "",
            "an ensemble needs at least one participant",
        ));
    }
    Ok(())
}

pub(crate) fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "expected a non-negative number"))
}

/// `clientPortListenBacklog`: a length; as for ZooKeeper's server socket,
/// one of 0 or less (-1 in its docs) leaves the default.
fn listen_backlog(key: &str, value: &str) -> Result<Option<u32>, ConfigError> {
    let length: i32 = value
        .parse()
        .map_err(|_| invalid(key, value, "expected a length, or -1 for the default"))?;
    Ok(u32::try_from(length).ok().filter(|length| *length > 0))
}

/// `minSessionTimeout` / `maxSessionTimeout`: Java's `Integer.parseInt`.
fn session_timeout(key: &str, value: &str) -> Result<i32, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "expected milliseconds, or -1 for the default"))
}

pub(crate) fn boolean(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" => Ok(true),
        "false" | "no" => Ok(false),
        _ => Err(invalid(key, value, "expected true or false")),
    }
}

/// ZooKeeper's audit logger classes, both of which write what the audit
/// log here writes; any other class is refused by name.
fn audit_logger(key: &str, value: &str) -> Result<(), ConfigError> {
    const KNOWN: [&str; 2] = [
        "org.apache.zookeeper.audit.Slf4jAuditLogger",
        "org.apache.zookeeper.audit.Log4jAuditLogger",
    ];
    if KNOWN.contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            key,
            value,
            format!(
                "Paddock writes the audit log as {} does; remove the key or name that class",
                KNOWN[0]
            ),
        ))
    }
}

pub(crate) fn address(key: &str, value: &str) -> Result<IpAddr, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "expected an IP address, such as 0.0.0.0"))
}

/// `admin.commandURL`: a path of its own, such as `/commands`.
fn command_url(key: &str, value: &str) -> Result<String, ConfigError> {
    let url = value.trim_end_matches('/');
    if !url.starts_with('/') || url.len() < 2 || url.contains(['?', '#', ' ']) {
        return Err(invalid(key, value, "expected a path such as /commands"));
    }
    Ok(url.to_string())
}

fn whitelist(value: &str) -> Option<HashSet<String>> {
    let words: HashSet<String> = value
        .split(',')
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty())
        .collect();
    if words.contains("*") {
        None
    } else {
        Some(words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<ServerConfig, ConfigError> {
        ServerConfig::from_properties(&parse_properties(text))
    }

    #[test]
    fn reads_zookeeper_keys_with_and_without_prefix() {
        let c = config(
            "# comment\ntickTime=100\nclientPort = 2999\ndataDir=/tmp/x\n\
             zookeeper.jute.maxbuffer=4096\nDigestAuthenticationProvider.superDigest=super:abc=\n\
             4lw.commands.whitelist=ruok, srvr\nsomething.unknown=1\n\
             zookeeper.enforceQuota=true\naudit.enable=true\n\
             zookeeper.audit.impl.class=org.apache.zookeeper.audit.Slf4jAuditLogger\n",
        )
        .unwrap();
        assert!(c.enforce_quota && c.audit_enabled);
        assert!(config("readonlymode.enabled=true").unwrap().read_only_mode);
        assert!(config("reconfigEnabled=true").unwrap().reconfig_enabled);
        assert!(config("audit.impl.class=com.example.Mine\n").is_err());
        assert_eq!(c.client_port, 2999);
        assert_eq!(c.data_log_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.jute_max_buffer, 4096);
        assert_eq!(c.min_session_timeout_ms, 200);
        assert_eq!(c.max_session_timeout_ms, 2000);
        assert_eq!(c.super_digest.as_deref(), Some("super:abc="));
        assert!(c.four_letter_word_enabled("ruok"));
        assert!(!c.four_letter_word_enabled("dump"));
        assert_eq!(c.ignored_keys, vec!["something.unknown".to_string()]);
        assert_eq!(c.negotiate_session_timeout(50), 200);
        assert_eq!(c.negotiate_session_timeout(100_000), 2000);
    }

    #[test]
    fn a_listen_backlog_of_zero_or_less_leaves_the_default() {
        let backlog = |text| config(text).map(|c| c.client_port_listen_backlog);
        assert_eq!(backlog("").unwrap(), None);
        assert_eq!(backlog("clientPortListenBacklog=-1").unwrap(), None);
        assert_eq!(backlog("clientPortListenBacklog=0").unwrap(), None);
        assert_eq!(backlog("clientPortListenBacklog=100").unwrap(), Some(100));
        let error = backlog("clientPortListenBacklog=lots")
            .unwrap_err()
            .to_string();
        assert!(error.contains("clientPortListenBacklog"), "{error}");
    }

    #[test]
    fn reads_server_lines_as_zookeeper_writes_them() {
        let c = config(
            "server.2=10.0.0.2:2888:3888\nserver.1=10.0.0.1:2888:3888:participant;2181\n\
             server.3=10.0.0.3:2889:3889:observer;0.0.0.0:2183\n",
        )
        .unwrap();
        assert_eq!(
            c.servers.iter().map(|s| s.id).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(c.servers[0].client_port, Some(2181));
        assert!(!c.servers[1].observer && c.servers[2].observer);
        assert_eq!(c.servers[2].client_port, Some(2183));
        assert_eq!(c.servers[2].peer_port, 2889);
        let written: Vec<String> = c.servers.iter().map(ToString::to_string).collect();
        assert_eq!(
            written,
            [
                "10.0.0.1:2888:3888:participant;0.0.0.0:2181",
                "10.0.0.2:2888:3888:participant",
                "10.0.0.3:2889:3889:observer;0.0.0.0:2183",
            ]
        );
        for bad in [
            "server.1=host:1",
            "server.x=a:1:2",
            "server.1=a:1:2:boss",
            "server.1=a:1:2:observer",
        ] {
            assert!(config(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn servers_come_from_a_dynamic_configuration_file() {
        let dir = tempfile::tempdir().unwrap();
        let dynamic = dir.path().join("zoo.cfg.dynamic.100000000");
        std::fs::write(
            &dynamic,
            "server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n\
             server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n",
        )
        .unwrap();
        let static_cfg = dir.path().join("zoo.cfg");
        let write_static = |extra: &str| {
            std::fs::write(
                &static_cfg,
                format!(
                    "dataDir=/tmp/x\ndynamicConfigFile={}\n{extra}",
                    dynamic.display()
                ),
            )
            .unwrap();
        };
        write_static("");
        let c = ServerConfig::from_file(&static_cfg).unwrap();
        assert_eq!(c.servers.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(c.servers_version, 0x1_0000_0000);
        assert!(c.ignored_keys.is_empty());
        write_static("server.3=127.0.0.1:2890:3890\n");
        assert!(
            ServerConfig::from_file(&static_cfg).is_err(),
            "server lines in both"
        );
        std::fs::write(&dynamic, "server.1=127.0.0.1:2888:3888\nversion=1\n").unwrap();
        write_static("");
        assert!(
            ServerConfig::from_file(&static_cfg).is_err(),
            "version inside"
        );
    }

    #[test]
    fn the_fsync_warning_threshold_is_zookeeper_s_key() {
        assert_eq!(config("").unwrap().fsync_warning_threshold_ms, 1000);
        let c = config("zookeeper.fsync.warningthresholdms=250").unwrap();
        assert_eq!(c.fsync_warning_threshold_ms, 250);
        assert!(c.ignored_keys.is_empty());
        assert!(config("fsync.warningthresholdms=soon").is_err());
    }

    #[test]
    fn admin_server_and_prometheus_keys_as_zookeeper_reads_them() {
        let c = config("").unwrap();
        assert_eq!(c.admin, AdminConfig::default());
        assert_eq!((c.admin.enabled, c.admin.port), (true, 8080));
        assert_eq!(c.metrics, None);
        let c = config(
            "admin.enableServer=false\nzookeeper.admin.serverPort=9090\n\
             admin.serverAddress=127.0.0.1\nadmin.commandURL=/cmds/\n\
             metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
             metricsProvider.httpPort=7001\nmetricsProvider.exportJvmInfo=false\n",
        )
        .unwrap();
        assert!(!c.admin.enabled);
        assert_eq!(c.admin.port, 9090);
        assert_eq!(c.admin.address, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(c.admin.command_url, "/cmds");
        assert_eq!(c.metrics.map(|m| m.port), Some(7001));
        assert!(c.ignored_keys.is_empty());
        let default_provider =
            "metricsProvider.className=org.apache.zookeeper.metrics.impl.DefaultMetricsProvider";
        assert_eq!(config(default_provider).unwrap().metrics, None);
        let c = config(
            "admin.portUnification=true\nzookeeper.admin.needClientAuth=true\n\
             admin.rateLimiterIntervalInMS=0\nadmin.snapshot.enabled=false\n",
        )
        .unwrap();
        assert!(c.admin.https() && c.admin.need_client_auth && !c.admin.force_https);
        assert_eq!(c.admin.rate_limit_interval_ms, 0);
        assert!(!c.admin.snapshot_enabled && c.admin.restore_enabled);
        assert!(c.ignored_keys.is_empty());
        for bad in [
            "metricsProvider.className=com.example.Other",
            "admin.forceHttps=maybe",
            "admin.rateLimiterIntervalInMS=-1",
            "admin.serverPort=http",
            "admin.serverAddress=localhost:1",
            "admin.commandURL=commands",
        ] {
            assert!(config(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn star_enables_every_word() {
        assert!(config("4lw.commands.whitelist=*")
            .unwrap()
            .four_letter_word_enabled("dump"));
    }

    #[test]
    fn only_minus_one_means_the_default_session_timeout() {
        let c = config("tickTime=100\nminSessionTimeout=-1\nmaxSessionTimeout=-1").unwrap();
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (200, 2000)
        );
        let c = config("tickTime=100\nminSessionTimeout=-5").unwrap();
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (-5, 2000)
        );
        assert_eq!(c.negotiate_session_timeout(-50), -5);
        assert_eq!(c.negotiate_session_timeout(30), 30);
        let c = config("tickTime=100\nminSessionTimeout=-9\nmaxSessionTimeout=-7").unwrap();
        assert_eq!(c.negotiate_session_timeout(1000), -7);
        assert_eq!(c.handshake_timeout(), Duration::from_millis(100));
        assert!(
            config("maxSessionTimeout=-7").is_err(),
            "below the default minimum"
        );
    }

    #[test]
    fn a_super_digest_without_a_colon_is_taken_with_a_warning() {
        let c = config("DigestAuthenticationProvider.superDigest=nocolon").unwrap();
        assert_eq!(c.super_digest.as_deref(), Some("nocolon"));
        let warnings = c.warnings();
        assert!(
            warnings.len() == 1 && warnings[0].contains("superDigest"),
            "{warnings:?}"
        );
        assert!(config("").unwrap().warnings().is_empty());
    }

    #[test]
    fn relations_are_checked() {
        let err = config("minSessionTimeout=5000\nmaxSessionTimeout=1000").unwrap_err();
        assert!(err.to_string().contains("maxSessionTimeout"), "{err}");
        assert!(config("clientPort=abc").is_err());
    }

    #[test]
    fn an_observed_zookeeper_ensemble_is_a_list_of_quorum_addresses() {
        let c = config("observeZooKeeper=10.0.0.1:2888, zk2.example:2888\ninitLimit=20").unwrap();
        assert_eq!(c.observe_zookeeper, ["10.0.0.1:2888", "zk2.example:2888"]);
        assert_eq!(c.init_limit_ticks, 20);
        assert!(c.observes_zookeeper() && c.warnings().is_empty());
        for bad in [
            "observeZooKeeper=zk1",
            "observeZooKeeper=zk1:port",
            "observeZooKeeper=,",
        ] {
            let err = config(bad).unwrap_err().to_string();
            assert!(err.contains("observeZooKeeper"), "{bad}: {err}");
        }
        let unused = config("syncLimit=2").unwrap().warnings();
        assert!(unused.iter().any(|w| w.contains("syncLimit")), "{unused:?}");
    }
}
