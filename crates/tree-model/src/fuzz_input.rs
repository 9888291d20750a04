//! `Arbitrary` for the seeds, by hand where derive would pick enum variants
//! uniformly from four bytes and end a `Vec` at each element with even odds:
//! one byte picks the variant here, weighted as the tree's model test weights
//! its generator (mostly writes, existing paths), and multis and fresh paths
//! get that test's sizes, so that a fuzzer's early, random inputs test as
//! much as its cases do.

use arbitrary::{Arbitrary, Result, Unstructured};

use crate::seed::{PathSeed, Step};

impl<'a> Arbitrary<'a> for Step {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.arbitrary::<u8>()? % 19 {
            0..=9 => Step::Write {
                session: u.arbitrary()?,
                op: u.arbitrary()?,
            },
            10..=12 => Step::Multi {
                session: u.arbitrary()?,
                ops: some(u, 4)?,
            },
            13..=14 => Step::Read {
                path: u.arbitrary()?,
            },
            15..=16 => Step::OpenSession {
                session: u.arbitrary()?,
                timeout_ms: u.arbitrary()?,
            },
            17 => Step::CloseSession {
                session: u.arbitrary()?,
            },
            _ => Step::Sleep { ms: u.arbitrary()? },
        })
    }
}

impl<'a> Arbitrary<'a> for PathSeed {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.arbitrary::<u8>()? % 12 {
            0..=5 => PathSeed::Existing(u.arbitrary()?),
            6..=7 => PathSeed::Child(u.arbitrary()?, u.arbitrary()?),
            8..=10 => PathSeed::Fresh {
                absolute: u.ratio(19u8, 20)?,
                components: some(u, 3)?,
            },
            _ => PathSeed::Special(u.arbitrary()?),
        })
    }
}

/// One to `most` values.
fn some<'a, T: Arbitrary<'a>>(u: &mut Unstructured<'a>, most: u8) -> Result<Vec<T>> {
    (0..u.int_in_range(1..=most)?)
        .map(|_| u.arbitrary())
        .collect()
}
