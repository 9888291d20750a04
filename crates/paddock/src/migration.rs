//! `paddock import` and `paddock export`: a stopped Apache ZooKeeper's
//! data into a new Paddock data directory, and a stopped Paddock's data
//! into a snapshot ZooKeeper starts from.

use std::path::PathBuf;

use anyhow::Context as _;
use server::ServerConfig;

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
    if zk.orphaned_ephemerals > 0 {
        println!(
            "{} ephemeral znodes of sessions that had ended were removed, as ZooKeeper removes them when it starts",
            zk.orphaned_ephemerals
        );
    }
    let (voters, learners) = config.group();
    let written = migrate::write_paddock(
        &zk.tree,
        zk.zxid,
        &config.data_dir,
        &config.data_log_dir,
        voters,
        learners,
    )
    .with_context(|| format!("writing Paddock's data in {}", config.data_dir.display()))?;
    println!(
        "wrote {}: {} znodes, {} sessions, last zxid {:#x}; Paddock goes on from there",
        written.display(),
        zk.tree.node_count() - 1,
        zk.tree.sessions().count(),
        zk.zxid
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
