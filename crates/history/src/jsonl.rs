//! The on-disk form of a history: JSON lines, one event per line in time
//! order, so a failing run can be saved, read by a person, and re-checked
//! offline. Events rather than whole operations keep the file in the
//! shape Jepsen and Porcupine use and let a reader see the interleaving.

use std::collections::HashMap;
use std::io::{BufRead, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::history::{History, HistoryError};
use crate::operation::{Completion, OpId, Operation};

/// One line. `Out` is `Outcome<R>` when reading and `&Outcome<R>` when
/// writing, so writing borrows instead of cloning.
#[derive(Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Event<O, Out> {
    Invoke {
        id: OpId,
        client: u32,
        at: u64,
        op: O,
    },
    Complete {
        id: OpId,
        at: u64,
        outcome: Out,
    },
}

impl<O, R> History<O, R> {
    /// Writes one JSON object per line: `{"event":"invoke",...}` and
    /// `{"event":"complete",...}`, ordered by time (an invocation before a
    /// completion stamped at the same nanosecond).
    pub fn write_jsonl<W: Write>(&self, mut out: W) -> Result<(), HistoryError>
    where
        O: Serialize,
        R: Serialize,
    {
        let mut events = Vec::new();
        for op in self.ops() {
            let invoke = Event::Invoke {
                id: op.id,
                client: op.client,
                at: op.invoked_at,
                op: &op.op,
            };
            events.push((op.invoked_at, false, op.id, invoke));
            if let Some(Completion { at, outcome }) = &op.completion {
                let complete = Event::Complete {
                    id: op.id,
                    at: *at,
                    outcome,
                };
                events.push((*at, true, op.id, complete));
            }
        }
        events.sort_by_key(|(at, is_completion, id, _)| (*at, *is_completion, *id));
        for (_, _, _, event) in &events {
            serde_json::to_writer(&mut out, event).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(())
    }

    /// Reads what [`History::write_jsonl`] wrote. Blank lines are skipped;
    /// lines may come in any order. An invocation without a completion is
    /// an operation still in flight, i.e. of unknown outcome.
    pub fn read_jsonl<B: BufRead>(input: B) -> Result<Self, HistoryError>
    where
        O: DeserializeOwned,
        R: DeserializeOwned,
    {
        let mut ops = Vec::new();
        let mut completions = HashMap::new();
        for (index, line) in input.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let event = serde_json::from_str(&line).map_err(|source| HistoryError::Json {
                line: index + 1,
                source,
            })?;
            match event {
                Event::Invoke { id, client, at, op } => ops.push(Operation {
                    id,
                    client,
                    op,
                    invoked_at: at,
                    completion: None,
                }),
                Event::Complete { id, at, outcome } => {
                    let completion: Completion<R> = Completion { at, outcome };
                    if completions.insert(id, completion).is_some() {
                        return Err(HistoryError::DuplicateCompletion(id));
                    }
                }
            }
        }
        for op in &mut ops {
            op.completion = completions.remove(&op.id);
        }
        if let Some(id) = completions.into_keys().min() {
            return Err(HistoryError::CompletionWithoutInvocation(id));
        }
        History::from_ops(ops)
    }
}
