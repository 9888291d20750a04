//! `paddock import` and `paddock export`: a stopped Apache ZooKeeper's
//! data into a new Paddock data directory, and a stopped Paddock's data
//! into a snapshot ZooKeeper starts from. `paddock mirror`: a running
//! ZooKeeper ensemble followed as an observer, its tree written as a new
//! Paddock data directory once the ensemble stops.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use server::ServerConfig;
use tree::DataTree;

#[derive(clap::Args)]
pub struct ImportArgs {
    /// ZooKeeper's dataDir (or its version-2 directory), the server stopped.
    #[arg(long, value_name = "DIR")]
    from_zookeeper: PathBuf,
    /// ZooKeeper's dataLogDir, when its logs are not in its dataDir.
    #[arg(long, value_name = "DIR")]
    zookeeper_log_dir: Option<PathBuf>,
    #[command(flatten)]
    paddock: PaddockDirs,
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The dataDir Apache ZooKeeper will start from; its version-2
    /// directory must hold no snapshot or log yet.
    #[arg(long, value_name = "DIR")]
    to_zookeeper: PathBuf,
    #[command(flatten)]
    paddock: PaddockDirs,
}

#[derive(clap::Args)]
pub struct MirrorArgs {
    /// The ZooKeeper servers' quorum addresses (the first port of each
    /// server.N line), comma-separated: the leader is the one listening.
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        value_delimiter = ',',
        required = true
    )]
    from_zookeeper: Vec<String>,
    /// The id to register with: one no ZooKeeper server has (list it in
    /// the ensemble's config as `server.N=...:observer`).
    #[arg(long, value_name = "N")]
    server_id: i64,
    /// The ensemble's tickTime, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    tick_time: u64,
    /// The ensemble's initLimit, in ticks: the time to connect and sync.
    #[arg(long, value_name = "TICKS", default_value_t = 10)]
    init_limit: u32,
    /// The ensemble's syncLimit, in ticks: the longest silence from a
    /// live leader.
    #[arg(long, value_name = "TICKS", default_value_t = 5)]
    sync_limit: u32,
    /// How long no server may lead before the ensemble is taken as
    /// stopped and the tree is written, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    gone_after: u64,
    #[command(flatten)]
    paddock: PaddockDirs,
}

/// The Paddock side, as `paddock serve` takes it.
#[derive(clap::Args)]
struct PaddockDirs {
    /// The Paddock server's zoo.cfg: its dataDir, dataLogDir and, for an
    /// ensemble, its server.N lines (the voters an import records).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Paddock's dataDir (overrides the config's).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Paddock's dataLogDir (overrides the config's).
    #[arg(long, value_name = "DIR")]
    data_log_dir: Option<PathBuf>,
}

impl PaddockDirs {
    fn config(&self) -> anyhow::Result<ServerConfig> {
        let mut config = match &self.config {
            Some(path) => ServerConfig::from_file(path)?,
            None if self.data_dir.is_none() => {
                anyhow::bail!("say where Paddock's data is: --data-dir DIR or --config zoo.cfg")
            }
            None => ServerConfig::default(),
        };
        crate::set_data_dirs(
            &mut config,
            self.data_dir.clone(),
            self.data_log_dir.clone(),
        );
        Ok(config)
    }
}

pub fn import(args: ImportArgs) -> anyhow::Result<()> {
    let config = args.paddock.config()?;
    let zk = migrate::read_zookeeper(&args.from_zookeeper, args.zookeeper_log_dir.as_deref())?;
    println!(
        "read {} (zxid {:#x}) and {} log file(s): {} txns replayed{}",
        zk.snapshot.display(),
        zk.snapshot_zxid,
        zk.logs.len(),
        zk.txns_replayed,
        match zk.steps_skipped {
            0 => String::new(),
            n => format!(", {n} steps already in the snapshot skipped as ZooKeeper skips them"),
        }
    );
    for file in &zk.unfinished_snapshots {
        println!(
            "passed over {}: ZooKeeper stopped while writing it, and passes over it too",
            file.display()
        );
    }
    if let Some((file, offset)) = &zk.torn {
        println!(
            "{} ends in an entry cut short at offset {offset} (ZooKeeper stopped mid-write); what is before it is imported, as ZooKeeper would load it",
            file.display()
        );
    }
    write_imported(&config, &zk.tree, zk.zxid, zk.orphaned_ephemerals)
}

/// Writes ZooKeeper's tree at `zxid` as a new Paddock data directory and
/// says what it holds.
fn write_imported(
    config: &ServerConfig,
    tree: &DataTree,
    zxid: i64,
    orphaned_ephemerals: usize,
) -> anyhow::Result<()> {
    if orphaned_ephemerals > 0 {
        println!(
            "{orphaned_ephemerals} ephemeral znodes of sessions that had ended were removed, as ZooKeeper removes them when it starts"
        );
    }
    let (voters, learners) = config.group();
    let written = migrate::write_paddock(
        tree,
        zxid,
        &config.data_dir,
        &config.data_log_dir,
        voters,
        learners,
    )
    .with_context(|| format!("writing Paddock's data in {}", config.data_dir.display()))?;
    println!(
        "wrote {}: {} znodes, {} sessions, last zxid {zxid:#x}; Paddock goes on from there",
        written.display(),
        tree.node_count() - 1,
        tree.sessions().count(),
    );
    Ok(())
}

pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let config = args.paddock.config()?;
    let state = migrate::read_paddock(&config.data_dir, &config.data_log_dir)?;
    if state.past_recorded_commit > 0 && state.voters.len() > 1 {
        println!(
            "note: the last {} log entries of this server were not yet recorded as committed; in an ensemble export from the last leader after all servers caught up",
            state.past_recorded_commit
        );
    }
    let foreign = state
        .tree
        .sessions()
        .filter(|(id, s)| s.password[..] != migrate::zookeeper_password(*id)[..])
        .count();
    if foreign > 0 {
        println!(
            "note: {foreign} session(s) began on Paddock; ZooKeeper derives a session's password from its id, so their clients cannot resume them there: they expire after their timeout and their ephemerals go with them"
        );
    }
    let written = migrate::write_zookeeper(&state.tree, state.zxid, &args.to_zookeeper)?;
    println!(
        "wrote {}: {} znodes, {} sessions, zxid {:#x}; start Apache ZooKeeper with dataDir={}",
        written.display(),
        state.tree.node_count() - 1,
        state.tree.sessions().count(),
        state.zxid,
        args.to_zookeeper.display()
    );
    Ok(())
}

/// Follows the ensemble until it stops (or until SIGINT or SIGTERM), then
/// writes what it followed as a new Paddock data directory, as `import`
/// writes a stopped ZooKeeper's.
pub fn mirror(args: MirrorArgs) -> anyhow::Result<()> {
    let config = args.paddock.config()?;
    migrate::ensure_new_paddock_dir(&config.data_dir, &config.data_log_dir)?;
    let tick = Duration::from_millis(args.tick_time);
    let learner = migrate::LearnerConfig {
        servers: args.from_zookeeper,
        server_id: args.server_id,
        init_limit: tick * args.init_limit,
        sync_limit: tick * args.sync_limit,
        give_up_after: Duration::from_secs(args.gone_after),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let on_signal = stop.clone();
    std::thread::spawn(move || {
        crate::wait_for_shutdown();
        on_signal.store(true, Ordering::Relaxed);
    });
    let mut mirror = migrate::Mirror::default();
    let ended = migrate::follow(&learner, &mut mirror, &stop, &mut print_event)?;
    match ended {
        migrate::Ended::Stopped => println!("stopped at zxid {:#x}", mirror.zxid()),
        migrate::Ended::EnsembleGone { last } => println!(
            "no ZooKeeper server led for {}s (last: {last}): the ensemble has stopped, at zxid {:#x}",
            args.gone_after,
            mirror.zxid()
        ),
    }
    let zxid = mirror.zxid();
    let (tree, orphaned) = mirror.into_data_tree()?;
    write_imported(&config, &tree, zxid, orphaned)
}

fn print_event(event: migrate::Event) {
    match event {
        migrate::Event::Synced { server, how, zxid } => {
            println!("synced by {how} from the leader at {server}: at zxid {zxid:#x}")
        }
        migrate::Event::Progress { zxid, txns } => {
            println!("at zxid {zxid:#x}, {txns} txns applied")
        }
        migrate::Event::Lost { server, reason } => {
            println!("lost the leader at {server} ({reason}); looking for the next")
        }
    }
}
