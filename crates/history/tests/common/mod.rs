//! Test models shared by the integration tests.

use history::Model;

/// A register of small values without versions, to test the checker
/// apart from ZooKeeper's semantics.
#[derive(Debug)]
pub struct Register;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOp {
    Read,
    Write(u8),
}

impl Model for Register {
    type Op = RegisterOp;
    /// What a read saw; writes return nothing.
    type Ret = Option<u8>;
    type State = u8;
    type Key = ();

    fn key(&self, _: &RegisterOp) {}

    fn init(&self) -> u8 {
        0
    }

    fn step(&self, state: &u8, op: &RegisterOp, ret: Option<&Option<u8>>) -> Option<u8> {
        match (op, ret) {
            (RegisterOp::Write(value), _) => Some(*value),
            (RegisterOp::Read, None) => Some(*state),
            (RegisterOp::Read, Some(seen)) => (*seen == Some(*state)).then_some(*state),
        }
    }
}
