//! `paddock digest`: every znode of a running server (Paddock or Apache
//! ZooKeeper) read over the client protocol and summed up in one digest,
//! so that two servers' trees can be compared, before and after a
//! migration. With `--list`, a line per znode (path, data, stat, ACL) to
//! find where two trees differ. `/zookeeper/config` is left out: it lists
//! the servers of each deployment, not the data moved between them.

use std::collections::BTreeMap;
use std::io::Write as _;

use anyhow::Context as _;
use client::{Acl, Bytes, Client, ConnectOptions, Stat};
use sha1::{Digest as _, Sha1};

/// Znodes whose reads are in flight at once.
const ZNODES_IN_FLIGHT: usize = 2048;

/// The ensemble's membership, which differs between any two deployments.
const MEMBERSHIP_NODE: &str = "/zookeeper/config";

#[derive(clap::Args)]
pub struct DigestArgs {
    /// host:port[,host:port...] (default localhost:2181).
    #[arg(default_value = "localhost:2181")]
    server: String,
    /// The subtree to read.
    #[arg(long, default_value = "/")]
    path: String,
    /// Print a line per znode before the digest.
    #[arg(long)]
    list: bool,
    /// Credentials to add first, as `scheme:credentials`
    /// (`digest:super:secret` reads every znode); repeatable.
    #[arg(long, value_name = "SCHEME:AUTH")]
    auth: Vec<String>,
}

/// One znode as read.
struct Read {
    data: Option<Bytes>,
    stat: Stat,
    acl: Vec<Acl>,
}

impl Read {
    /// The znode's line: what the digest covers, readable.
    fn line(&self, path: &str) -> String {
        let data = match &self.data {
            None => "null".to_owned(),
            Some(d) => format!("{}:{}", d.len(), hex(&Sha1::digest(d)[..8])),
        };
        let s = &self.stat;
        let acl: Vec<String> = self
            .acl
            .iter()
            .map(|a| format!("{}:{}:{}", a.perms, a.id.scheme, a.id.id))
            .collect();
        format!(
            "{path} data={data} czxid={:#x} mzxid={:#x} pzxid={:#x} ctime={} mtime={} version={} cversion={} aversion={} owner={:#x} children={} acl={}",
            s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime, s.version, s.cversion, s.aversion,
            s.ephemeral_owner, s.num_children, acl.join(",")
        )
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn run(args: DigestArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(digest(args))
}

/// Connect options that add each `--auth scheme:credentials`.
pub fn with_auth(auth: &[String]) -> anyhow::Result<ConnectOptions> {
    let mut options = ConnectOptions::new();
    for auth in auth {
        let (scheme, credentials) = auth
            .split_once(':')
            .with_context(|| format!("--auth {auth:?}: write scheme:credentials"))?;
        options = options.auth(scheme, credentials.as_bytes());
    }
    Ok(options)
}

async fn digest(args: DigestArgs) -> anyhow::Result<()> {
    let options = with_auth(&args.auth)?;
    let zk = Client::connect(&args.server, options)
        .await
        .with_context(|| format!("connecting to {}", args.server))?;
    let tree = read_tree(&zk, &args.path).await?;
    zk.close().await;
    let mut out = std::io::stdout().lock();
    let mut sum = Sha1::new();
    for line in tree.values() {
        sum.update(line.as_bytes());
        sum.update(b"\n");
        if args.list {
            writeln!(out, "{line}")?;
        }
    }
    writeln!(out, "znodes {}", tree.len())?;
    writeln!(out, "digest {}", hex(&sum.finalize()))?;
    Ok(())
}

/// Every znode under `root` by path, as its line (the data only as its
/// length and hash), read level by level with reads pipelined; the
/// children of those whose stat says they have some.
async fn read_tree(zk: &Client, root: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut tree = BTreeMap::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let mut parents = Vec::new();
        for batch in level.chunks(ZNODES_IN_FLIGHT) {
            let calls: Vec<_> = batch
                .iter()
                .map(|p| (p, zk.get_data(p), zk.get_acl(p)))
                .collect();
            for (path, data, acl) in calls {
                let failed = |e: client::Error| anyhow::anyhow!("reading {path}: {e}");
                let (data, stat) = data.await.map_err(failed)?;
                let (acl, _) = acl.await.map_err(failed)?;
                if stat.num_children > 0 {
                    parents.push(path.clone());
                }
                let line = Read { data, stat, acl }.line(path);
                tree.insert(path.clone(), line);
            }
        }
        level = Vec::new();
        for batch in parents.chunks(ZNODES_IN_FLIGHT) {
            let calls: Vec<_> = batch.iter().map(|p| (p, zk.get_children(p))).collect();
            for (path, children) in calls {
                let children = children
                    .await
                    .map_err(|e| anyhow::anyhow!("listing {path}: {e}"))?;
                let parent = if path == "/" { "" } else { path };
                level.extend(
                    children
                        .into_iter()
                        .map(|c| format!("{parent}/{c}"))
                        .filter(|child| child != MEMBERSHIP_NODE),
                );
            }
        }
    }
    Ok(tree)
}
