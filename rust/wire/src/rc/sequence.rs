// SPDX-License-Identifier: GPL-2.0

//! The opcode sequence of the request messages an RC responder executes (IBA 9.8.3.1.1): a
//! message is one ONLY packet, or a FIRST packet, any number of MIDDLE packets and a LAST
//! packet, all of one operation; the next message starts only after the previous one's LAST
//! or ONLY. An in-sequence packet (by PSN) that breaks this, such as a SEND or a new WRITE
//! FIRST between a WRITE FIRST and its LAST, is an invalid request: the responder NAKs it and
//! executes none of it, rather than mixing two messages.

use super::super::opcode::{Operation, Position};

/// Where the responder is in the message stream: between messages, or inside one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageSequence {
    /// The operation of the message in progress (its FIRST executed, its LAST not yet).
    open: Option<Operation>,
}

impl MessageSequence {
    /// Between messages.
    pub const fn new() -> Self {
        Self { open: None }
    }

    /// Whether an in-sequence request packet of `op` at `pos` may come next.
    pub fn allows(&self, op: Operation, pos: Position) -> bool {
        match (self.open, pos) {
            (None, Position::First | Position::Only) => true,
            (Some(open), Position::Middle | Position::Last) => open == op,
            _ => false,
        }
    }

    /// Records that the packet [`MessageSequence::allows`] accepted was executed.
    pub fn advance(&mut self, op: Operation, pos: Position) {
        self.open = match pos {
            Position::First | Position::Middle => Some(op),
            Position::Last | Position::Only => None,
        };
    }

    /// The operation of the message in progress, if any.
    pub const fn open(&self) -> Option<Operation> {
        self.open
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;
    use Operation::*;
    use Position::*;

    const OPS: [Operation; 5] = [Send, RdmaWrite, RdmaReadRequest, CompareSwap, FetchAdd];
    const POS: [Position; 4] = [First, Middle, Last, Only];

    /// Runs `packets` through a sequence; the index of the first refused one, if any.
    fn first_refused(packets: &[(Operation, Position)]) -> Option<usize> {
        let mut s = MessageSequence::new();
        for (i, &(op, pos)) in packets.iter().enumerate() {
            if !s.allows(op, pos) {
                return Some(i);
            }
            s.advance(op, pos);
        }
        None
    }

    #[test]
    fn well_formed_streams_pass() {
        let stream = [
            (Send, Only),
            (RdmaWrite, First),
            (RdmaWrite, Middle),
            (RdmaWrite, Middle),
            (RdmaWrite, Last),
            (RdmaReadRequest, Only),
            (Send, First),
            (Send, Last),
            (FetchAdd, Only),
            (RdmaWrite, Only),
            (CompareSwap, Only),
        ];
        assert_eq!(first_refused(&stream), None);
    }

    #[test]
    fn the_issue_example_is_refused() {
        // WRITE FIRST, then a SEND (with invalidate), then WRITE MIDDLE and LAST.
        let stream = [
            (RdmaWrite, First),
            (Send, Only),
            (RdmaWrite, Middle),
            (RdmaWrite, Last),
        ];
        assert_eq!(first_refused(&stream), Some(1));
    }

    #[test]
    fn every_violation_kind() {
        // Nothing may continue a message that was never started.
        for op in OPS {
            assert_eq!(first_refused(&[(op, Middle)]), Some(0));
            assert_eq!(first_refused(&[(op, Last)]), Some(0));
        }
        // Inside a message only its own MIDDLE or LAST may come.
        for open in [Send, RdmaWrite] {
            for op in OPS {
                for pos in POS {
                    let ok = op == open && matches!(pos, Middle | Last);
                    let r = first_refused(&[(open, First), (op, pos)]);
                    assert_eq!(r.is_none(), ok, "{open:?} FIRST then {op:?} {pos:?}");
                }
            }
        }
    }

    proptest! {
        /// Against an independent model: a stream is accepted exactly while it is a
        /// concatenation of well-formed messages (plus one unfinished message at the end).
        #[test]
        fn matches_the_model(stream in prop::collection::vec((0usize..5, 0usize..4), 0..40)) {
            let packets: Vec<(Operation, Position)> =
                stream.iter().map(|&(o, p)| (OPS[o], POS[p])).collect();
            let mut expected = None;
            let mut open: Option<Operation> = None;
            for (i, &(op, pos)) in packets.iter().enumerate() {
                let fine = match pos {
                    First | Only => open.is_none(),
                    Middle | Last => open == Some(op),
                };
                if !fine {
                    expected = Some(i);
                    break;
                }
                open = if matches!(pos, First | Middle) { Some(op) } else { None };
            }
            prop_assert_eq!(first_refused(&packets), expected);
        }
    }
}
