//! The process's open files, shared between client sockets and the
//! server's own needs. A storm of connections must never take the last
//! file descriptors: the log then cannot open its next segment, nor a
//! snapshot its file, and a server that cannot write its log must stop.
//! So the soft limit is raised to the hard one at start (as Go's runtime
//! does for every program), and client sockets may use all of it but a
//! reserve; past that, a new connection is refused as past `maxCnxns`.

/// The open-files limit after raising the soft limit to the hard one, or
/// the soft limit as it was when it cannot be raised.
pub fn raise_to_hard_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 0;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    limit.rlim_cur
}

/// Client sockets allowed under an open-files `limit`: all but a reserve
/// for the log's segments, snapshots, peers, the admin port and the
/// process's own files — an eighth of the limit, at least 64 and at most
/// 512. `None` when the limit is unknown or unlimited.
pub fn client_sockets_max(limit: u64) -> Option<usize> {
    if limit == 0 || limit == libc::RLIM_INFINITY {
        return None;
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let reserve = (limit / 8).clamp(64, 512);
    Some(limit.saturating_sub(reserve))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_is_kept_for_the_server() {
        assert_eq!(client_sockets_max(1024), Some(896));
        assert_eq!(client_sockets_max(20_000), Some(19_488));
        assert_eq!(client_sockets_max(256), Some(192));
        assert_eq!(client_sockets_max(32), Some(0));
        assert_eq!(client_sockets_max(0), None);
        assert_eq!(client_sockets_max(libc::RLIM_INFINITY), None);
    }

    #[test]
    fn the_limit_is_raised_to_the_hard_one() {
        let raised = raise_to_hard_limit();
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert_eq!(raised, limit.rlim_cur);
        assert_eq!(limit.rlim_cur, limit.rlim_max);
    }
}
