//! The znodes of the store's cluster metadata and what they hold, shared
//! by the workload (which sets them up and routes by them) and the
//! rebalancer process (which changes them).
//!
//! Under the run's root:
//! - `nodes/node-<n>`: ephemeral, one per live storage node;
//! - `map`: the partition map, the owner of every partition; its data
//!   version is the map's version, which every routing client caches;
//! - `partitions/p<j>`: partition j's owner, as the owner itself would
//!   check it before serving (its data version counts the moves);
//! - `data/p<j>`: the znode a client writes when it writes to partition j;
//! - `plan`: the rebalancing plan, its moves and how many are done;
//! - `election`: the rebalancers' leader election.

use anyhow::{bail, Context as _};

#[derive(Clone, Debug)]
pub struct Layout {
    pub root: String,
}

impl Layout {
    pub fn nodes(&self) -> String {
        format!("{}/nodes", self.root)
    }

    pub fn node(&self, n: usize) -> String {
        format!("{}/nodes/node-{n}", self.root)
    }

    pub fn map(&self) -> String {
        format!("{}/map", self.root)
    }

    pub fn partitions(&self) -> String {
        format!("{}/partitions", self.root)
    }

    pub fn partition(&self, j: usize) -> String {
        format!("{}/partitions/p{j}", self.root)
    }

    pub fn data(&self) -> String {
        format!("{}/data", self.root)
    }

    pub fn data_of(&self, j: usize) -> String {
        format!("{}/data/p{j}", self.root)
    }

    pub fn plan(&self) -> String {
        format!("{}/plan", self.root)
    }

    pub fn election(&self) -> String {
        format!("{}/election", self.root)
    }
}

/// The owner (storage node) of every partition, written as the owners'
/// numbers separated by commas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMap {
    pub owners: Vec<usize>,
}

impl PartitionMap {
    /// Partitions dealt round-robin over the first `nodes` storage nodes.
    pub fn round_robin(partitions: usize, nodes: usize) -> PartitionMap {
        PartitionMap {
            owners: (0..partitions).map(|j| j % nodes).collect(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let owners: Vec<String> = self.owners.iter().map(usize::to_string).collect();
        owners.join(",").into_bytes()
    }

    pub fn decode(data: &[u8]) -> anyhow::Result<PartitionMap> {
        let text = std::str::from_utf8(data).context("the partition map is not text")?;
        let owners = text
            .split(',')
            .map(|owner| owner.parse::<usize>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("the partition map {text:?} is not a list of owners"))?;
        Ok(PartitionMap { owners })
    }
}

/// One step of a plan: partition `partition` goes from `from` to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub partition: usize,
    pub from: usize,
    pub to: usize,
}

/// The rebalancing plan: its moves in order and how many are done. Written
/// as `done` on the first line, then one `partition:from:to` per line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub moves: Vec<Move>,
    pub done: usize,
}

impl Plan {
    /// The moves that give node `joining` its share of the partitions
    /// (an equal share, rounded down), taken in turn from whichever node
    /// owns the most, so that the others stay balanced too.
    pub fn for_joining(map: &PartitionMap, nodes: usize, joining: usize) -> Plan {
        let share = map.owners.len() / nodes;
        let mut owned = vec![0usize; nodes];
        for &owner in &map.owners {
            owned[owner] += 1;
        }
        let mut owners = map.owners.clone();
        let mut moves = Vec::with_capacity(share);
        while owned[joining] < share {
            let busiest = (0..nodes)
                .max_by_key(|&n| (owned[n], std::cmp::Reverse(n)))
                .expect("at least one node");
            let partition = owners
                .iter()
                .position(|&owner| owner == busiest)
                .expect("the busiest node owns a partition");
            moves.push(Move {
                partition,
                from: busiest,
                to: joining,
            });
            owners[partition] = joining;
            owned[busiest] -= 1;
            owned[joining] += 1;
        }
        Plan { moves, done: 0 }
    }

    pub fn is_finished(&self) -> bool {
        self.done == self.moves.len()
    }

    /// The plan with one more move done.
    pub fn advanced(&self) -> Plan {
        Plan {
            moves: self.moves.clone(),
            done: self.done + 1,
        }
    }

    /// The map once every move is done.
    pub fn apply_all(&self, map: &PartitionMap) -> PartitionMap {
        let mut owners = map.owners.clone();
        for step in &self.moves {
            owners[step.partition] = step.to;
        }
        PartitionMap { owners }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut text = self.done.to_string();
        for step in &self.moves {
            text += &format!("\n{}:{}:{}", step.partition, step.from, step.to);
        }
        text.into_bytes()
    }

    pub fn decode(data: &[u8]) -> anyhow::Result<Plan> {
        let text = std::str::from_utf8(data).context("the plan is not text")?;
        let mut lines = text.lines();
        let done = lines
            .next()
            .unwrap_or_default()
            .parse()
            .with_context(|| format!("the plan {text:?} does not start with a count"))?;
        let moves = lines.map(decode_move).collect::<anyhow::Result<Vec<_>>>()?;
        if done > moves.len() {
            bail!("the plan says {done} moves are done of {}", moves.len());
        }
        Ok(Plan { moves, done })
    }
}

fn decode_move(line: &str) -> anyhow::Result<Move> {
    let fields: Vec<usize> = line
        .split(':')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("the plan's move {line:?} is not partition:from:to"))?;
    match fields[..] {
        [partition, from, to] => Ok(Move {
            partition,
            from,
            to,
        }),
        _ => bail!("the plan's move {line:?} is not partition:from:to"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_round_trips() {
        let map = PartitionMap::round_robin(7, 3);
        assert_eq!(map.encode(), b"0,1,2,0,1,2,0");
        assert_eq!(PartitionMap::decode(&map.encode()).unwrap(), map);
        assert!(PartitionMap::decode(b"0,x").is_err());
    }

    #[test]
    fn a_joining_node_gets_an_equal_share_from_the_busiest() {
        let map = PartitionMap::round_robin(64, 3);
        let plan = Plan::for_joining(&map, 4, 3);
        assert_eq!(plan.moves.len(), 16);
        let after = plan.apply_all(&map);
        for node in 0..4 {
            let owned = after.owners.iter().filter(|&&o| o == node).count();
            assert_eq!(owned, 16, "node {node} owns {owned}");
        }
        for step in &plan.moves {
            assert_eq!(map.owners[step.partition], step.from);
        }
    }

    #[test]
    fn plan_round_trips_and_advances() {
        let plan = Plan::for_joining(&PartitionMap::round_robin(8, 3), 4, 3);
        let next = plan.advanced();
        assert_eq!(Plan::decode(&next.encode()).unwrap(), next);
        assert_eq!(next.done, 1);
        assert!(!next.is_finished());
        assert!(Plan::decode(b"3\n1:0:3").is_err());
        assert!(Plan::decode(b"0\n1:0").is_err());
    }
}
