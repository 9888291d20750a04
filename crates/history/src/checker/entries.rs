//! Lowe's entry list: the calls and returns of one key's operations in
//! time order, as a doubly linked list from which a linearized operation
//! is lifted in O(1) and put back in O(1) when the search backtracks
//! (always in the reverse order of lifting, so the removed node's own
//! links still say where it belongs).

/// What a node of the list stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    /// An operation's invocation.
    Call(usize),
    /// A definite operation's return. Operations of unknown outcome have
    /// none: they return at +infinity, after everything in the list.
    Return(usize),
    /// The sentinels at both ends.
    End,
}

/// Nodes are indices: the head sentinel, the entries, the tail sentinel.
#[derive(Debug)]
pub(super) struct Entries {
    entries: Vec<Entry>,
    next: Vec<usize>,
    prev: Vec<usize>,
    call_node: Vec<usize>,
    return_node: Vec<Option<usize>>,
}

const HEAD: usize = 0;

impl Entries {
    /// `spans[op]` is the operation's invocation time and its return time,
    /// if definite. At equal times a call sorts before a return, so
    /// operations that touch count as concurrent: the lenient reading of
    /// clocks that cannot tell them apart.
    pub(super) fn new(spans: &[(u64, Option<u64>)]) -> Self {
        let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(spans.len() * 2);
        for (op, &(invoked, returned)) in spans.iter().enumerate() {
            order.push((invoked, false, op));
            if let Some(returned) = returned {
                order.push((returned, true, op));
            }
        }
        order.sort_unstable();

        let tail = order.len() + 1;
        let mut entries = Vec::with_capacity(tail + 1);
        let mut call_node = vec![0; spans.len()];
        let mut return_node = vec![None; spans.len()];
        entries.push(Entry::End);
        for (node, &(_, is_return, op)) in (1..).zip(&order) {
            if is_return {
                return_node[op] = Some(node);
                entries.push(Entry::Return(op));
            } else {
                call_node[op] = node;
                entries.push(Entry::Call(op));
            }
        }
        entries.push(Entry::End);
        Entries {
            entries,
            next: (1..=tail).chain([tail]).collect(),
            prev: [HEAD].into_iter().chain(0..tail).collect(),
            call_node,
            return_node,
        }
    }

    /// The first node still in the list (the tail if it is empty).
    pub(super) fn first(&self) -> usize {
        self.next[HEAD]
    }

    pub(super) fn next(&self, node: usize) -> usize {
        self.next[node]
    }

    pub(super) fn entry(&self, node: usize) -> Entry {
        self.entries[node]
    }

    /// Removes `op`'s call and return.
    pub(super) fn lift(&mut self, op: usize) {
        self.unlink(self.call_node[op]);
        if let Some(node) = self.return_node[op] {
            self.unlink(node);
        }
    }

    /// Undoes the latest [`Entries::lift`], which must have been of `op`.
    pub(super) fn unlift(&mut self, op: usize) {
        if let Some(node) = self.return_node[op] {
            self.relink(node);
        }
        self.relink(self.call_node[op]);
    }

    fn unlink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = next;
        self.prev[next] = prev;
    }

    fn relink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = node;
        self.prev[next] = node;
    }
}

#[cfg(test)]
mod tests {
    use super::{Entries, Entry};

    fn walk(entries: &Entries) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut node = entries.first();
        while entries.entry(node) != Entry::End {
            out.push(entries.entry(node));
            node = entries.next(node);
        }
        out
    }

    #[test]
    fn sorted_by_time_calls_first_and_lifts_undo_in_reverse() {
        // op 0: [0, 10]; op 1: [10, 20]; op 2: invoked at 5, unknown.
        let mut entries = Entries::new(&[(0, Some(10)), (10, Some(20)), (5, None)]);
        let all = vec![
            Entry::Call(0),
            Entry::Call(2),
            Entry::Call(1),
            Entry::Return(0),
            Entry::Return(1),
        ];
        assert_eq!(walk(&entries), all);

        entries.lift(0);
        assert_eq!(
            walk(&entries),
            [Entry::Call(2), Entry::Call(1), Entry::Return(1)]
        );
        entries.lift(1);
        entries.lift(2);
        assert_eq!(walk(&entries), []);
        entries.unlift(2);
        entries.unlift(1);
        assert_eq!(
            walk(&entries),
            [Entry::Call(2), Entry::Call(1), Entry::Return(1)]
        );
        entries.unlift(0);
        assert_eq!(walk(&entries), all);
    }
}
