//! The ensemble's membership as ZooKeeper publishes it in
//! `/zookeeper/config`, where clients read it (the Java client's
//! `getConfig`, Curator's ensemble tracker, zkCli's `config`): a
//! `server.N=` line per member as zoo.cfg spells it, then `version=` and
//! the configuration's version in hex, without a final newline. A
//! configuration read from zoo.cfg is version 0.

use bytes::Bytes;
use consensus::Membership;
use tree::DataTree;

use crate::config::{ConfigError, ServerConfig, ServerSpec};

/// Where the membership is published (`ZooDefs.CONFIG_NODE`).
pub const CONFIG_NODE: &str = "/zookeeper/config";

/// What `/zookeeper/config` says of `servers` at `version`.
pub fn config_text(servers: &[ServerSpec], version: i64) -> String {
    let mut text: String = servers
        .iter()
        .map(|server| format!("server.{}={server}\n", server.id))
        .collect();
    text.push_str(&format!("version={version:x}"));
    text
}

/// The servers and the version of a configuration as `config_text`
/// writes it (a `dynamicConfigFile` holds the same lines).
pub fn parse_config_text(text: &str) -> Result<(Vec<ServerSpec>, i64), String> {
    let mut servers = Vec::new();
    let mut version = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("{line:?} is not key=value"))?;
        if key == "version" {
            version = i64::from_str_radix(value, 16)
                .map_err(|_| format!("version {value:?} is not hexadecimal"))?;
            continue;
        }
        let id = key
            .strip_prefix("server.")
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| format!("{key:?} is not server.N"))?;
        servers.push(ServerSpec::parse(id, value)?);
    }
    servers.sort_by_key(|s| s.id);
    Ok((servers, version))
}

/// The membership `tree` records, which holds over the configuration
/// files once it has a version (a reconfig's, or a dynamic configuration
/// file's): from then on the membership changes through reconfig only.
/// `None` while the node holds zoo.cfg's version 0, or nothing.
pub fn reconfigured(tree: &DataTree) -> Option<Vec<ServerSpec>> {
    let (text, stat) = tree.get_data(CONFIG_NODE, &[]).ok()?;
    if stat.mzxid == 0 {
        return None;
    }
    let (servers, _) = parse_config_text(&String::from_utf8_lossy(&text?)).ok()?;
    (!servers.is_empty()).then_some(servers)
}

/// The servers a restart runs with after a reconfig: the membership the
/// tree records, and this server's own line from zoo.cfg when a reconfig
/// removed it. Such a server is in no quorum (raft's membership comes
/// from the snapshot, which leaves it out): it waits, as ZooKeeper's
/// non-voting follower does, for a reconfig to join it again.
pub fn with_self(
    members: &[ServerSpec],
    config: &ServerConfig,
) -> Result<Vec<ServerSpec>, ConfigError> {
    let my_id = config.my_id()?;
    let mut servers = members.to_vec();
    if !members.iter().any(|s| s.id == my_id) {
        let own = config.servers.iter().find(|s| s.id == my_id);
        servers.extend(own.cloned());
        tracing::warn!(
            "server.{my_id} is not in the ensemble's membership (a reconfig removed it): it takes no part in any quorum until a reconfig joins it again"
        );
    }
    Ok(servers)
}

/// The requests in process server `id` allows under `membership`:
/// `globalOutstandingLimit` divided among the voters as ZooKeeper divides
/// it, at start and after every change.
pub fn outstanding_limit(config: &ServerConfig, membership: &Membership, id: u64) -> i64 {
    let observer = membership.learners.contains(&id);
    config
        .limits
        .outstanding_limit(membership.voters.len(), observer)
}

/// Writes zoo.cfg's membership into `tree` as every server does when it
/// starts. Only a distributed server has one: with a single voter
/// ZooKeeper runs standalone (unless `standaloneEnabled=false`) and leaves
/// the node empty.
pub fn install(tree: &mut DataTree, config: &ServerConfig) {
    if reconfigured(tree).is_some() {
        return;
    }
    let voters = config.servers.iter().filter(|s| !s.observer).count();
    if voters > 1 || (voters == 1 && !config.standalone_enabled) {
        let version = config.servers_version;
        let text = config_text(&config.servers, version);
        tree.install_config(Bytes::from(text), version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_zookeeper_writes_it() {
        let servers = [
            ServerSpec::parse(1, "127.0.0.1:2888:3888;2181").unwrap(),
            ServerSpec::parse(2, "127.0.0.1:2889:3889:participant;127.0.0.1:2182").unwrap(),
            ServerSpec::parse(3, "127.0.0.1:2890:3890:observer").unwrap(),
        ];
        assert_eq!(
            config_text(&servers, 0x1_0000_000c),
            "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.3=127.0.0.1:2890:3890:observer\n\
             version=10000000c"
        );
    }

    #[test]
    fn only_a_distributed_server_fills_the_node() {
        let mut tree = DataTree::new();
        let one = ServerConfig::from_properties(&crate::config::parse_properties(
            "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889:observer\n",
        ))
        .unwrap();
        install(&mut tree, &one);
        assert_eq!(tree.exists("/zookeeper/config").unwrap().data_length, 0);
        let three = ServerConfig::from_properties(&crate::config::parse_properties(
            "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\nserver.3=127.0.0.1:2890:3890\n",
        ))
        .unwrap();
        install(&mut tree, &three);
        let (data, stat) = tree.get_data("/zookeeper/config", &[]).unwrap();
        assert_eq!(
            data.as_deref(),
            Some(config_text(&three.servers, 0).as_bytes())
        );
        assert_eq!((stat.version, stat.mzxid), (-1, 0));
    }

    #[test]
    fn the_text_parses_back() {
        let servers = [
            ServerSpec::parse(1, "127.0.0.1:2888:3888;2181").unwrap(),
            ServerSpec::parse(3, "127.0.0.1:2890:3890:observer").unwrap(),
        ];
        let text = config_text(&servers, 0x2_0000_0007);
        let (parsed, version) = parse_config_text(&text).unwrap();
        assert_eq!(
            (config_text(&parsed, version), version),
            (text, 0x2_0000_0007)
        );
        assert!(parse_config_text("server.x=a:1:2\nversion=0").is_err());
        assert!(parse_config_text("version=zz").is_err());
    }
}
