//! The `paddock` binary: argument parsing and wiring only.

mod cluster;
mod digest;
mod migration;
mod takeover;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use server::ServerConfig;

/// jemalloc, as TiKV uses, rather than glibc's malloc: once a server has
/// freed gigabytes (znodes set from 10 KB to 1 KB, then deleted), glibc's
/// allocator spent 65% of the server's CPU searching its free lists
/// (`_int_malloc` in a perf profile of the delete phase of `paddock bench
/// crud --preset 10gb`), and that phase took 3.5 times as long.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts: return freed pages to the
/// system from a thread of its own rather than on the request path.
#[export_name = "_rjem_malloc_conf"]
pub static JEMALLOC_CONF: &[u8; 23] = b"background_thread:true\0";

#[derive(Parser)]
#[command(
    name = "paddock",
    version,
    about = "A coordination service that speaks ZooKeeper's protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a server. With no options: standalone on port 2181, data in
    /// ./paddock-data.
    Serve(ServeArgs),
    /// Run a local ensemble on loopback ports (one process per server) and
    /// print its connect string; Ctrl-C stops it.
    Cluster(cluster::ClusterArgs),
    /// A zkCli-compatible shell: interactive with no command; otherwise
    /// runs the -c commands (or the trailing command words) and exits,
    /// non-zero if one failed.
    Shell(ShellArgs),
    /// Benchmarks against any ZooKeeper-protocol server, and `bench compare`:
    /// Paddock and Apache ZooKeeper side by side on this machine.
    Bench(bench::BenchArgs),
    /// Read a stopped Apache ZooKeeper's data directory (snapshot and logs)
    /// into a new Paddock data directory: same znodes, stats, ACLs and
    /// sessions; zxids go on from ZooKeeper's last.
    Import(migration::ImportArgs),
    /// Write a stopped Paddock server's tree as a snapshot Apache ZooKeeper
    /// starts from: the way back.
    Export(migration::ExportArgs),
    /// Follow a running Apache ZooKeeper ensemble as an observer (its
    /// learner protocol, its zxids) and, once it stops, write its tree as
    /// a new Paddock data directory, as `import` would.
    Mirror(migration::MirrorArgs),
    /// End the move from a running Apache ZooKeeper ensemble: the Paddock
    /// servers that observe it (observeZooKeeper) follow it up to this
    /// point of its history and go on as an ensemble of their own, with
    /// every session; then stop the ZooKeeper servers.
    Takeover(takeover::TakeoverArgs),
    /// Read every znode of a running server (Paddock or ZooKeeper) and
    /// print their count and one digest of paths, data, stats and ACLs:
    /// equal digests, equal trees.
    Digest(digest::DigestArgs),
}

#[derive(clap::Args)]
struct ShellArgs {
    /// host:port[,host:port...][/chroot] (default localhost:2181). A first
    /// word that names a command starts the command instead.
    server: Option<String>,
    /// A command line to run, as typed at the prompt; repeatable.
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    commands: Vec<String>,
    /// The session timeout to ask for, in milliseconds (zkCli's -timeout).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    timeout: u64,
    /// Log in with SASL DIGEST-MD5 as the `Client` section (or
    /// --jaas-section) of this JAAS file names, as zkCli does with
    /// `-Djava.security.auth.login.config=FILE`.
    #[arg(long, value_name = "FILE", conflicts_with = "sasl_user")]
    jaas: Option<PathBuf>,
    /// The JAAS section to log in with (zkCli's
    /// `zookeeper.sasl.clientconfig`).
    #[arg(long, value_name = "NAME", default_value = sasl::jaas::CLIENT_SECTION)]
    jaas_section: String,
    /// Log in with SASL DIGEST-MD5 as this user (with --sasl-password).
    #[arg(long, value_name = "USER", requires = "sasl_password")]
    sasl_user: Option<String>,
    #[arg(long, value_name = "PASSWORD", requires = "sasl_user")]
    sasl_password: Option<String>,
    /// A Java properties file of ZooKeeper client settings, as zkCli's
    /// -client-configuration: `zookeeper.client.secure=true` connects with
    /// TLS, configured by the `zookeeper.ssl.*` keys (keyStore.location,
    /// trustStore.location, hostnameVerification, ...).
    #[arg(long, value_name = "FILE")]
    client_configuration: Option<PathBuf>,
    /// One command as zkCli takes it after its options: `get -s /a`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD ARGS"
    )]
    words: Vec<String>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// A ZooKeeper `zoo.cfg`; the options below override its keys.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Client port (zoo.cfg `clientPort`).
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (zoo.cfg `clientPortAddress`).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// Snapshots and, unless --data-log-dir is given, the log (`dataDir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The write-ahead log (`dataLogDir`).
    #[arg(long)]
    data_log_dir: Option<PathBuf>,
    /// A JAAS file whose `Server` section lists SASL DIGEST-MD5 users
    /// (`user_NAME="password"`); zoo.cfg key `jaasLoginConfig`.
    #[arg(long)]
    jaas_config: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => {
            init_logging();
            serve(args)
        }
        Command::Cluster(args) => {
            init_logging();
            cluster::run(args, wait_for_shutdown)
        }
        Command::Bench(args) => {
            // The report is the output; the client's log (reconnects, lost
            // requests) only when asked for, to see where a gap comes from.
            if std::env::var_os("RUST_LOG").is_some() {
                init_logging();
            }
            bench::run(args)
        }
        Command::Import(args) => migration::import(args),
        Command::Export(args) => migration::export(args),
        Command::Mirror(args) => migration::mirror(args),
        Command::Takeover(args) => takeover::run(args),
        Command::Digest(args) => digest::run(args),
        // No logging: the shell's output is zkCli's, with nothing between.
        Command::Shell(args) => return shell(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The whole cause chain on one line, and no backtrace: this is
            // for the operator, who needs what happened and what to do.
            eprintln!("paddock: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

fn shell(args: ShellArgs) -> std::process::ExitCode {
    let sasl = match sasl_login(&args) {
        Ok(login) => login,
        Err(error) => {
            eprintln!("paddock shell: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let tls = match args
        .client_configuration
        .as_deref()
        .map(client_tls)
        .transpose()
    {
        Ok(tls) => tls.flatten(),
        Err(error) => {
            eprintln!("paddock shell: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let (server, words) = shell::resolve(args.server, args.words);
    let code = shell::run(shell::Invocation {
        server,
        commands: args.commands,
        words,
        session_timeout: std::time::Duration::from_millis(args.timeout),
        sasl,
        tls,
    });
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// TLS as a ZooKeeper client configuration file asks for it: `None`
/// unless `zookeeper.client.secure=true`.
fn client_tls(path: &Path) -> Result<Option<Arc<client::rustls::ClientConfig>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let properties = server::parse_properties(&text);
    let secure = properties
        .get("zookeeper.client.secure")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !secure {
        return Ok(None);
    }
    let mut settings = tls::TlsSettings::default();
    for (key, value) in &properties {
        if let Some(ssl_key) = key.strip_prefix("zookeeper.ssl.") {
            let known = settings
                .set(ssl_key, key, value)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if !known {
                eprintln!(
                    "paddock shell: {}: {key} is not supported; ignoring it",
                    path.display()
                );
            }
        }
    }
    tls::client_config(&settings)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The SASL login the shell's options ask for, if any.
fn sasl_login(args: &ShellArgs) -> Result<Option<sasl::jaas::Login>, String> {
    if let (Some(username), Some(password)) = (&args.sasl_user, &args.sasl_password) {
        return Ok(Some(sasl::jaas::Login {
            username: username.clone(),
            password: password.clone(),
        }));
    }
    let Some(path) = &args.jaas else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the JAAS file {}: {e}", path.display()))?;
    sasl::jaas::client_login(&text, &args.jaas_section)
        .map(Some)
        .map_err(|e| format!("the JAAS file {}: {e}", path.display()))
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => ServerConfig::from_file(path)?,
        None => ServerConfig::default(),
    };
    if let Some(port) = args.port {
        config.client_port = port;
    }
    if let Some(bind) = args.bind {
        config.client_port_address = Some(bind);
    }
    set_data_dirs(&mut config, args.data_dir, args.data_log_dir);
    if let Some(path) = args.jaas_config {
        config.jaas_config = Some(path);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let mut shutdown = std::pin::pin!(shutdown_signal());
        loop {
            let http = admin::Listeners::bind(&config).await?;
            let mut served = Vec::new();
            let stopped = server::run(
                config.clone(),
                |_, monitor| served = http.serve(monitor),
                &mut shutdown,
            )
            .await
            .context("the server stopped")?;
            // Closed before the server starts again on the same ports.
            server::stop_tasks(served).await;
            if stopped == server::Stopped::Shutdown {
                return Ok(());
            }
        }
    })
}

/// `--data-dir` and `--data-log-dir` over the config's: the log follows
/// the data directory unless the config or `--data-log-dir` put it apart.
fn set_data_dirs(
    config: &mut ServerConfig,
    data_dir: Option<PathBuf>,
    data_log_dir: Option<PathBuf>,
) {
    if let Some(dir) = data_dir {
        if data_log_dir.is_none() && config.data_log_dir == config.data_dir {
            config.data_log_dir = dir.clone();
        }
        config.data_dir = dir;
    }
    if let Some(dir) = data_log_dir {
        config.data_log_dir = dir;
    }
}

/// Blocks until Ctrl-C or SIGTERM.
fn wait_for_shutdown() {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(shutdown_signal()),
        Err(error) => eprintln!("paddock: cannot wait for signals ({error}); stopping"),
    }
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
