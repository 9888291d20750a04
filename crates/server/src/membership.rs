//! The ensemble's membership as ZooKeeper publishes it in
//! `/zookeeper/config`, where clients read it (the Java client's
//! `getConfig`, Curator's ensemble tracker, zkCli's `config`): a
//! `server.N=` line per member as zoo.cfg spells it, then `version=` and
//! the configuration's version in hex, without a final newline. A
//! configuration read from zoo.cfg is version 0.

use bytes::Bytes;
use tree::DataTree;

use crate::config::{ServerConfig, ServerSpec};

/// What `/zookeeper/config` says of `servers` at `version`.
pub fn config_text(servers: &[ServerSpec], version: i64) -> String {
    let mut text: String = servers
        .iter()
        .map(|server| format!("server.{}={server}\n", server.id))
        .collect();
    text.push_str(&format!("version={version:x}"));
    text
}

/// Writes zoo.cfg's membership into `tree` as every server does when it
/// starts. Only a distributed server has one: with a single voter
/// ZooKeeper runs standalone (`standaloneEnabled`) and leaves the node
/// empty.
pub fn install(tree: &mut DataTree, config: &ServerConfig) {
    let voters = config.servers.iter().filter(|s| !s.observer).count();
    if voters > 1 {
        let text = config_text(&config.servers, 0);
        tree.install_config(Bytes::from(text), 0);
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
}
