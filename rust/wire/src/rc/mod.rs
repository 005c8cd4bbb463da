// SPDX-License-Identifier: GPL-2.0

//! Reliable Connection (RC) reliability logic (IBA vol 1, ch. 9.7) as pure,
//! event-driven state machines.
//!
//! Nothing here reads a clock, does I/O or allocates. The caller feeds events
//! (a received packet's relevant fields, the current time in microseconds as a
//! `u64`, a new work request) and gets decisions back; timers are deadlines
//! the caller arms and reports with `on_timer(now)`.
//!
//! An RC QP uses three machines:
//!
//! * [`responder::Responder`] (receive side): checks each incoming request
//!   packet against the expected PSN (ePSN) and says whether to execute it
//!   ([`responder::ResponderAction::Execute`]), re-acknowledge or replay a
//!   duplicate, NAK a sequence gap once, or RNR-NAK when no receive WQE is
//!   available. It coalesces ACKs and keeps the ring of RDMA READ / ATOMIC
//!   responder resources used to replay duplicates.
//! * [`requester::Requester`] (send side): assigns PSNs to posted work
//!   requests, hands out the packets to transmit
//!   ([`requester::Requester::next_packet`]) within the congestion window
//!   ([`cwnd::Cwnd`], at most the PSN window) and the `max_rd_atomic` limit,
//!   and runs the retransmission and RNR timers (go-back-N, `retry_cnt`,
//!   `rnr_retry`; `rnr_retry == 7` retries forever but always waits the RNR
//!   timer first).
//! * The completer, [`requester::Requester::on_response`] (in
//!   [`completer`]): applies ACKs, NAKs, RDMA READ responses and atomic
//!   acknowledgements to the outstanding work requests in PSN order; finished
//!   work requests are then taken, in order, with
//!   [`requester::Requester::poll_completion`].
//!
//! [`sequence::MessageSequence`] checks that the in-sequence requests the
//! responder executes form whole messages (FIRST, MIDDLE, LAST of one
//! operation, or ONLY).
//!
//! A typical send path: `post` work requests, loop on `next_packet(now)` to
//! build and transmit packets, arm a timer at `deadline()`, and on expiry call
//! `on_timer(now)`. Each received response goes to `on_response(now, ..)`,
//! followed by `poll_completion` and `next_packet` again. The receive path
//! calls `Responder::on_request` for every request packet and acts on the
//! returned decision.

pub mod completer;
pub mod cwnd;
pub mod requester;
pub mod responder;
pub mod sequence;

/// The operation of an RC request message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// SEND (with or without immediate data or invalidate).
    Send,
    /// RDMA WRITE (with or without immediate data).
    Write,
    /// RDMA READ: one request packet, one response per path MTU of data.
    Read,
    /// ATOMIC (CmpSwap or FetchAdd): one request, one atomic acknowledge.
    Atomic,
}

impl OpKind {
    /// Whether the operation is answered by responses that carry data (RDMA
    /// READ, ATOMIC), which count against `max_rd_atomic`.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(self, OpKind::Read | OpKind::Atomic)
    }
}

/// Number of PSNs a message of `len` bytes consumes with path MTU `pmtu`:
/// `ceil(len / pmtu)`, at least 1 (also for zero-length messages). An RDMA
/// READ consumes one PSN per response packet, an ATOMIC exactly one.
///
/// A `pmtu` of 0 is treated as 1.
pub const fn packets_for(len: u32, pmtu: u32) -> u32 {
    let pmtu = if pmtu == 0 { 1 } else { pmtu };
    if len == 0 {
        1
    } else {
        (len - 1) / pmtu + 1
    }
}

/// The number of PSNs an operation of `kind` with `len` bytes consumes.
pub const fn psns_for(kind: OpKind, len: u32, pmtu: u32) -> u32 {
    match kind {
        OpKind::Atomic => 1,
        _ => packets_for(len, pmtu),
    }
}

/// The local ACK timeout of a 5-bit timeout code, in microseconds:
/// 4.096 us * 2^`code`, rounded up; `None` for code 0 (timer disabled).
pub const fn ack_timeout_us(code: u8) -> Option<u64> {
    let code = code & 0x1F;
    if code == 0 {
        None
    } else {
        // 4.096 us = 4096 ns.
        Some((4096u64 << code).div_ceil(1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_counts() {
        assert_eq!(packets_for(0, 1024), 1);
        assert_eq!(packets_for(1, 1024), 1);
        assert_eq!(packets_for(1024, 1024), 1);
        assert_eq!(packets_for(1025, 1024), 2);
        assert_eq!(packets_for(4096, 1024), 4);
        assert_eq!(packets_for(u32::MAX, 256), 1 << 24);
        assert_eq!(packets_for(5, 0), 5);
        assert_eq!(psns_for(OpKind::Atomic, 8, 256), 1);
        assert_eq!(psns_for(OpKind::Read, 3000, 1024), 3);
        assert_eq!(psns_for(OpKind::Send, 0, 1024), 1);
        assert!(OpKind::Read.is_read_or_atomic() && OpKind::Atomic.is_read_or_atomic());
        assert!(!OpKind::Send.is_read_or_atomic() && !OpKind::Write.is_read_or_atomic());
    }

    #[test]
    fn ack_timeouts() {
        assert_eq!(ack_timeout_us(0), None);
        assert_eq!(ack_timeout_us(1), Some(9)); // 8.192 us
        assert_eq!(ack_timeout_us(14), Some(67109)); // 67.108864 ms
        assert_eq!(ack_timeout_us(31), Some(8_796_093_023));
        assert_eq!(ack_timeout_us(32), None);
    }
}
