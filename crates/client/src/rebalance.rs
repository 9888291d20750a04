//! Whether a client moves when its list of servers changes, as ZooKeeper's
//! `StaticHostProvider.updateServerList` decides it: each client moves
//! with the probability that leaves the load even across the new list, so
//! that after an ensemble grows (or a server is replaced) the clients
//! spread over the servers without all of them reconnecting at once.
//!
//! With `old` servers before and `new` after (`both` in both lists,
//! `fresh` only in the new one): a client whose server stays moves only
//! if the list grew, with probability `1 - old/new`, and then to a fresh
//! server; a client whose server left always moves, to a fresh server if
//! the list grew, else to one of `both` with the probability that keeps
//! their share even, `both * (old - new) / (new * (old - both))`.

use rand::Rng;

/// A server of a connect string.
pub type Host = (String, u16);

/// Where a client goes when its list becomes `new`: `None` to stay on
/// `current`, or the servers to try first.
pub fn plan(old: &[Host], new: &[Host], current: &Host, rng: &mut impl Rng) -> Option<Vec<Host>> {
    let (both, fresh): (Vec<Host>, Vec<Host>) = new.iter().cloned().partition(|h| old.contains(h));
    let (old_len, new_len) = (old.len() as f64, new.len() as f64);
    let grew = new.len() > old.len();
    let to_fresh_or_any = || {
        if fresh.is_empty() {
            new.to_vec()
        } else {
            fresh.clone()
        }
    };
    if new.contains(current) {
        let moves = grew && rng.gen::<f64>() < 1.0 - old_len / new_len;
        return moves.then(to_fresh_or_any);
    }
    if grew || both.is_empty() {
        return Some(to_fresh_or_any());
    }
    let both_len = both.len() as f64;
    let to_both = both_len * (old_len - new_len) / (new_len * (old_len - both_len));
    if fresh.is_empty() || rng.gen::<f64>() < to_both {
        Some(both)
    } else {
        Some(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn hosts(ports: &[u16]) -> Vec<Host> {
        ports.iter().map(|&p| ("10.0.0.1".to_string(), p)).collect()
    }

    /// Where `clients` end up, by port, when each starts on its share of
    /// `old` (round robin) and the list becomes `new`.
    fn spread(
        old: &[Host],
        new: &[Host],
        clients: usize,
    ) -> std::collections::BTreeMap<u16, usize> {
        let mut rng = StdRng::seed_from_u64(7);
        let mut on = std::collections::BTreeMap::new();
        for i in 0..clients {
            let current = &old[i % old.len()];
            let server = match plan(old, new, current, &mut rng) {
                None => current.clone(),
                Some(pool) => pool[rng.gen_range(0..pool.len())].clone(),
            };
            *on.entry(server.1).or_default() += 1;
        }
        on
    }

    #[test]
    fn growing_spreads_the_clients_evenly() {
        let on = spread(&hosts(&[1, 2, 3]), &hosts(&[1, 2, 3, 4, 5]), 50_000);
        for (port, count) in &on {
            assert!(
                (9_000..=11_000).contains(count),
                "{port}: {count} of 50,000 ({on:?})"
            );
        }
    }

    #[test]
    fn a_client_whose_server_stays_stays_when_the_list_does_not_grow() {
        let mut rng = StdRng::seed_from_u64(1);
        let old = hosts(&[1, 2, 3]);
        assert_eq!(plan(&old, &old, &old[0], &mut rng), None);
        assert_eq!(plan(&old, &hosts(&[1, 2]), &old[0], &mut rng), None);
    }

    #[test]
    fn clients_of_a_removed_server_spread_over_the_rest() {
        let on = spread(&hosts(&[1, 2, 3]), &hosts(&[1, 2]), 30_000);
        assert_eq!(on.keys().copied().collect::<Vec<_>>(), [1, 2]);
        for count in on.values() {
            assert!((14_000..=16_000).contains(count), "{on:?}");
        }
    }

    #[test]
    fn a_replaced_server_s_clients_go_to_its_replacement_in_proportion() {
        // 1, 2, 3 become 1, 2, 4: server 3's clients must fill server 4.
        let on = spread(&hosts(&[1, 2, 3]), &hosts(&[1, 2, 4]), 30_000);
        for (port, count) in &on {
            assert!((9_000..=11_000).contains(count), "{port}: {on:?}");
        }
    }
}
