//! Random operation sequences on the data tree, every step checked against
//! the naive reference model in `tree-model`: each op's outcome and watch
//! triggers, then the whole tree (paths, data, ACLs, every stat field,
//! sessions, ephemerals, reaper candidates); a snapshot round trip at the
//! end. Any disagreement panics with the commands that led to it.
//!
//! The input is read as steps until it runs out, or `MAX_STEPS` of them to
//! keep each input fast. Steps name few paths, so that creates, deletes and
//! multis collide.
#![no_main]

use libfuzzer_sys::arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use tree_model::{Checker, Step};

const MAX_STEPS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let mut input = Unstructured::new(data);
    let mut checker = Checker::new();
    for _ in 0..MAX_STEPS {
        if input.is_empty() {
            break;
        }
        let Ok(step) = Step::arbitrary(&mut input) else {
            break;
        };
        if let Err(disagreement) = checker.step(&step) {
            panic!("{disagreement}");
        }
    }
    if let Err(disagreement) = checker.check_snapshot() {
        panic!("{disagreement}");
    }
});
