// SPDX-License-Identifier: GPL-2.0

//! The receive side of Unreliable Connected (UC) QPs (IBA vol 1, 9.7.4 and 9.8.2): no
//! acknowledgements, no retransmission, no RDMA READ or ATOMIC. Packets of a message arrive in
//! PSN order or the message is lost: a gap in the PSNs, or a packet that does not continue the
//! message in progress, drops the rest of that message, and the responder waits for the first
//! packet of a new one (a FIRST or ONLY, whatever its PSN). The sender completes each work
//! request as soon as its last packet is sent.
//!
//! Nothing here reads a clock, does I/O or allocates; the caller executes what it is told to.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

use super::psn::Psn;

/// What to do with a received UC request packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UcAction {
    /// Execute it. `restart`: it starts a message while another was in progress, which is
    /// thereby abandoned (a receive WQE it was filling is filled again from the start).
    Execute {
        /// A message in progress was abandoned.
        restart: bool,
    },
    /// Drop it (and, if it belonged to one, the rest of its message).
    Drop,
}

/// The UC responder's sequence state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcReceiver {
    epsn: Psn,
    /// A message has started (its FIRST was executed) and not ended.
    in_msg: bool,
}

impl UcReceiver {
    /// A receiver expecting `epsn` next (the QP's RQ PSN), between messages.
    pub const fn new(epsn: Psn) -> Self {
        Self {
            epsn,
            in_msg: false,
        }
    }

    /// The PSN expected next.
    pub const fn epsn(&self) -> Psn {
        self.epsn
    }

    /// A request packet with `psn` arrived; `first` / `last`: it starts / ends its message
    /// (both for ONLY).
    pub fn on_packet(&mut self, psn: Psn, first: bool, last: bool) -> UcAction {
        if first {
            // A new message: accepted in or out of sequence (the packets between were lost).
            let restart = self.in_msg;
            self.epsn = psn.add(1);
            self.in_msg = !last;
            return UcAction::Execute { restart };
        }
        if !self.in_msg || psn != self.epsn {
            // A MIDDLE or LAST without its message, or after a gap: the message is lost.
            self.in_msg = false;
            return UcAction::Drop;
        }
        self.epsn = psn.add(1);
        self.in_msg = !last;
        UcAction::Execute { restart: false }
    }

    /// The caller could not execute a packet of the message in progress (its memory access
    /// failed, its receive WQE is too small): the rest of the message is dropped.
    pub fn abandon(&mut self) {
        self.in_msg = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXEC: UcAction = UcAction::Execute { restart: false };

    fn rx(psn: u32) -> UcReceiver {
        UcReceiver::new(Psn::new(psn))
    }

    #[test]
    fn in_order_messages() {
        let mut r = rx(100);
        assert_eq!(r.on_packet(Psn::new(100), true, true), EXEC);
        assert_eq!(r.on_packet(Psn::new(101), true, false), EXEC);
        assert_eq!(r.on_packet(Psn::new(102), false, false), EXEC);
        assert_eq!(r.on_packet(Psn::new(103), false, true), EXEC);
        assert_eq!(r.epsn(), Psn::new(104));
    }

    #[test]
    fn a_lost_packet_drops_the_rest_of_its_message_only() {
        let mut r = rx(0);
        assert_eq!(r.on_packet(Psn::new(0), true, false), EXEC);
        // PSN 1 lost.
        assert_eq!(r.on_packet(Psn::new(2), false, false), UcAction::Drop);
        assert_eq!(r.on_packet(Psn::new(3), false, true), UcAction::Drop);
        // The next message is received.
        assert_eq!(r.on_packet(Psn::new(4), true, true), EXEC);
        assert_eq!(r.epsn(), Psn::new(5));
    }

    #[test]
    fn a_lost_last_packet_makes_the_next_first_a_restart() {
        let mut r = rx(0);
        assert_eq!(r.on_packet(Psn::new(0), true, false), EXEC);
        // PSN 1 (the LAST) lost; a new message starts.
        assert_eq!(
            r.on_packet(Psn::new(2), true, true),
            UcAction::Execute { restart: true }
        );
        assert_eq!(r.on_packet(Psn::new(3), true, true), EXEC);
    }

    #[test]
    fn a_lost_first_packet_drops_its_message() {
        let mut r = rx(10);
        assert_eq!(r.on_packet(Psn::new(11), false, false), UcAction::Drop);
        assert_eq!(r.on_packet(Psn::new(12), false, true), UcAction::Drop);
        assert_eq!(r.on_packet(Psn::new(13), true, true), EXEC);
    }

    #[test]
    fn duplicates_and_abandon() {
        let mut r = rx(0);
        assert_eq!(r.on_packet(Psn::new(0), true, false), EXEC);
        assert_eq!(r.on_packet(Psn::new(0), false, false), UcAction::Drop);
        let mut r = rx(0);
        assert_eq!(r.on_packet(Psn::new(0), true, false), EXEC);
        r.abandon();
        assert_eq!(r.on_packet(Psn::new(1), false, true), UcAction::Drop);
        assert_eq!(r.on_packet(Psn::new(2), true, true), EXEC);
    }

    #[test]
    fn psn_wraps() {
        let mut r = rx(0xff_ffff);
        assert_eq!(r.on_packet(Psn::new(0xff_ffff), true, false), EXEC);
        assert_eq!(r.on_packet(Psn::new(0), false, true), EXEC);
        assert_eq!(r.epsn(), Psn::new(1));
    }
}
