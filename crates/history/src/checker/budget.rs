//! Bounds on the search. Deciding linearizability is NP-complete, and a
//! history with many operations of unknown outcome can make the search
//! explode; a checker that answers "don't know" beats one that hangs a
//! test run.

use std::fmt;
use std::time::{Duration, Instant};

/// How much searching [`check`](super::check) may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Model steps tried per key (each is one operation tried in one
    /// state), so a key's verdict does not depend on the keys before it.
    pub max_steps: u64,
    /// Wall-clock limit for the whole check.
    pub timeout: Option<Duration>,
}

impl Default for Budget {
    /// Ten million steps per key, a few seconds for the largest keys the
    /// harness produces; no time limit, so verdicts are reproducible.
    fn default() -> Self {
        Budget {
            max_steps: 10_000_000,
            timeout: None,
        }
    }
}

/// Which limit of the [`Budget`] ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhausted {
    Steps,
    Deadline,
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exhausted::Steps => "step budget exhausted",
            Exhausted::Deadline => "deadline passed",
        })
    }
}

/// Counts one key's steps against the budget.
#[derive(Debug)]
pub(super) struct Meter {
    steps: u64,
    max_steps: u64,
    deadline: Option<Instant>,
}

/// Reading the clock on every step would cost more than the step.
const CLOCK_EVERY: u64 = 1024;

impl Meter {
    pub(super) fn new(max_steps: u64, deadline: Option<Instant>) -> Self {
        Meter {
            steps: 0,
            max_steps,
            deadline,
        }
    }

    /// Accounts for one step, or says why there may be none.
    pub(super) fn tick(&mut self) -> Result<(), Exhausted> {
        if self.steps >= self.max_steps {
            return Err(Exhausted::Steps);
        }
        if self.steps.is_multiple_of(CLOCK_EVERY)
            && self.deadline.is_some_and(|d| Instant::now() >= d)
        {
            return Err(Exhausted::Deadline);
        }
        self.steps += 1;
        Ok(())
    }

    pub(super) fn steps(&self) -> u64 {
        self.steps
    }
}
