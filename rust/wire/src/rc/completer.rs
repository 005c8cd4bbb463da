// SPDX-License-Identifier: GPL-2.0

//! The RC completer: applies responses to the outstanding work requests of a
//! [`Requester`] in PSN order (IBA vol 1, 9.7.5 - 9.7.6).
//!
//! * An ACK with PSN `p` completes every SEND/WRITE whose last PSN is at or
//!   before `p`, in order. If it reaches an RDMA READ or ATOMIC that has not
//!   had all its responses, that is an implicit NAK: everything before the
//!   READ/ATOMIC completes, and transmission restarts from its first missing
//!   response PSN.
//! * A NAK or RNR NAK with PSN `p` acknowledges every PSN before `p`. A PSN
//!   sequence error restarts transmission at `p`; an RNR NAK waits the RNR
//!   timer of its code first; the other NAK codes fail the work request that
//!   holds `p` (and flush the rest).
//! * RDMA READ responses and atomic acknowledges are accepted only in PSN
//!   order; they acknowledge everything before their request.
//! * Responses whose PSN is outside the outstanding range are stale or
//!   bogus and ignored. Completion is PSN driven; the AETH MSN is not needed.

use super::super::headers::{rnr_timer_us, NakCode, Syndrome};
use super::super::psn::Psn;
use super::requester::{RcError, Requester, Status};
use super::OpKind;

/// The kind of a received response packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// Acknowledge (ACK, NAK or RNR NAK) with its AETH.
    Ack {
        /// The AETH syndrome.
        syndrome: Syndrome,
        /// The AETH MSN (informational).
        msn: u32,
    },
    /// An RDMA READ response packet (First, Middle, Last or Only).
    ReadResponse,
    /// An atomic acknowledge.
    AtomicAck,
}

/// The fields of a received response packet the completer decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The packet's PSN.
    pub psn: Psn,
    /// Its kind.
    pub kind: ResponseKind,
}

/// What a response led to. After any of them, take completions with
/// [`Requester::poll_completion`] and transmit with
/// [`Requester::next_packet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseAction {
    /// Stale, duplicate or out-of-range response: nothing changed.
    Ignored,
    /// Acknowledged PSNs; some work requests may have completed.
    Progress,
    /// An in-order READ response or atomic acknowledge: store its payload
    /// (READ data at byte `offset` of the work request's buffer, or the
    /// atomic's original value). The work request counts as done once its
    /// last response is placed: a READ response whose payload is not `len`
    /// bytes must fail it (a responder that sent less would otherwise leave
    /// part of the buffer unwritten behind a successful completion).
    Place {
        /// The work request the data belongs to.
        wr_id: u64,
        /// Byte offset of the data in the READ buffer (0 for an ATOMIC).
        offset: u32,
        /// The payload's length: the path MTU, the rest of the READ for its
        /// last response (8 for an ATOMIC).
        len: u32,
    },
    /// Go-back-N: a sequence error or implicit NAK; resend with
    /// `next_packet`.
    Retransmit,
    /// RNR NAK: transmission pauses until `until` (the new
    /// [`Requester::deadline`]).
    RnrWait {
        /// The end of the wait, in microseconds.
        until: u64,
    },
    /// A fatal NAK or exhausted retry count; the QP is in the error state.
    Error(RcError),
}

impl<const N: usize> Requester<N> {
    /// Processes a received response at time `now`.
    pub fn on_response(&mut self, now: u64, resp: &Response) -> ResponseAction {
        if self.error.is_some() {
            return ResponseAction::Ignored;
        }
        let p = resp.psn;
        // Only PSNs in [una, sent_end) acknowledge anything new.
        if p.is_before(self.una) || !p.is_before(self.sent_end) {
            return ResponseAction::Ignored;
        }
        let before = self.una;
        match resp.kind {
            ResponseKind::Ack { syndrome, .. } => match syndrome {
                Syndrome::Ack { .. } => {
                    let implicit_nak = self.ack_upto(p).is_some();
                    let moved = self.progress(now, before);
                    if implicit_nak {
                        match self.go_back(now) {
                            ResponseAction::Ignored if moved => ResponseAction::Progress,
                            a => a,
                        }
                    } else if moved {
                        ResponseAction::Progress
                    } else {
                        ResponseAction::Ignored
                    }
                }
                Syndrome::RnrNak { timer } => self.rnr_nak(now, p, timer),
                Syndrome::Nak(NakCode::PsnSequenceError) => {
                    self.ack_upto(p.prev());
                    self.progress(now, before);
                    self.go_back(now)
                }
                Syndrome::Nak(code) => {
                    self.ack_upto(p.prev());
                    let e = match code {
                        NakCode::RemoteAccessError => RcError::RemoteAccess,
                        NakCode::RemoteOperationalError => RcError::RemoteOperation,
                        _ => RcError::RemoteInvalidRequest,
                    };
                    self.fail(e);
                    ResponseAction::Error(e)
                }
            },
            ResponseKind::ReadResponse => self.data_response(now, p, OpKind::Read),
            ResponseKind::AtomicAck => self.data_response(now, p, OpKind::Atomic),
        }
    }

    /// Acknowledges every PSN up to and including `p`. Returns `Some` on an
    /// implicit NAK (an unfinished READ/ATOMIC at or before `p`).
    fn ack_upto(&mut self, p: Psn) -> Option<()> {
        for i in 0..self.count {
            let s = self.idx(i);
            let w = &mut self.wqes[s];
            if w.done.is_some() {
                continue;
            }
            if w.first_psn.is_after(p) {
                break;
            }
            if w.kind.is_read_or_atomic() {
                self.update_una();
                return Some(());
            }
            let last = w.end().prev();
            if last.is_after(p) {
                w.next = p.next();
                break;
            }
            w.next = w.end();
            w.done = Some(Status::Success);
        }
        self.update_una();
        None
    }

    fn update_una(&mut self) {
        let una = (0..self.count)
            .map(|i| &self.wqes[self.idx(i)])
            .find(|w| w.done.is_none())
            .map_or(self.next_psn, |w| w.next);
        // Never move backwards (a partial ACK is recorded in `next`).
        if una.is_after(self.una) {
            self.una = una;
        }
    }

    /// After PSNs were acknowledged: restore the retry counts and restart
    /// the retransmission timer. Returns whether `una` moved.
    fn progress(&mut self, now: u64, before: Psn) -> bool {
        if self.una == before {
            return false;
        }
        self.cwnd.on_ack(self.una.diff(before) as u32);
        self.retry_left = self.cfg.retry_cnt & 7;
        self.rnr_left = self.cfg.rnr_retry & 7;
        self.recovering = None;
        if self.cursor.is_before(self.una) {
            self.cursor = self.una;
        }
        if self.sent_end.is_before(self.una) {
            self.sent_end = self.una;
        }
        self.timer = if self.una == self.sent_end {
            None
        } else {
            self.retransmit_timeout_us().map(|t| now.saturating_add(t))
        };
        true
    }

    /// Restarts transmission at `una`, once per point, using up one retry. The
    /// retransmission timer starts again at `now` (with the backoff of the retry
    /// just used): the resent packets get their full time to be acknowledged.
    fn go_back(&mut self, now: u64) -> ResponseAction {
        let to = self.una;
        if self.recovering == Some(to) {
            return ResponseAction::Ignored;
        }
        if self.retry_left == 0 {
            let e = RcError::RetryExceeded;
            self.fail(e);
            return ResponseAction::Error(e);
        }
        self.retry_left -= 1;
        self.recovering = Some(to);
        self.cursor = to;
        self.cwnd.on_nak();
        self.timer = self.retransmit_timeout_us().map(|t| now.saturating_add(t));
        ResponseAction::Retransmit
    }

    fn rnr_nak(&mut self, now: u64, p: Psn, timer: u8) -> ResponseAction {
        if self.rnr_until.is_some() {
            return ResponseAction::Ignored;
        }
        let before = self.una;
        self.ack_upto(p.prev());
        self.progress(now, before);
        // The responder is alive: the transport retry count only counts
        // requests that got no answer.
        self.retry_left = self.cfg.retry_cnt & 7;
        if self.rnr_left == 0 {
            let e = RcError::RnrRetryExceeded;
            self.fail(e);
            return ResponseAction::Error(e);
        }
        if self.cfg.rnr_retry & 7 != 7 {
            self.rnr_left -= 1;
        }
        let until = now.saturating_add(u64::from(rnr_timer_us(timer)));
        self.rnr_until = Some(until);
        self.timer = None;
        self.recovering = None;
        self.cursor = self.una;
        ResponseAction::RnrWait { until }
    }

    fn data_response(&mut self, now: u64, p: Psn, kind: OpKind) -> ResponseAction {
        let Some(i) = self.find(p) else {
            return ResponseAction::Ignored;
        };
        let s = self.idx(i);
        let w = self.wqes[s];
        if w.kind != kind || p.is_before(w.next) {
            return ResponseAction::Ignored;
        }
        // The response acknowledges everything before its request.
        let before = self.una;
        let implicit_nak = self.ack_upto(w.first_psn.prev()).is_some();
        self.progress(now, before);
        if implicit_nak {
            return self.go_back(now);
        }
        if p != w.next {
            // A response is missing (una is now w.next).
            return self.go_back(now);
        }
        let w = &mut self.wqes[s];
        w.next = p.next();
        if w.next == w.end() {
            w.done = Some(Status::Success);
        }
        let offset = p.diff(w.first_psn) as u32 * self.cfg.pmtu;
        let len = w.len.saturating_sub(offset).min(self.cfg.pmtu);
        let wr_id = w.wr_id;
        let before = self.una;
        self.update_una();
        self.progress(now, before);
        ResponseAction::Place { wr_id, offset, len }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::headers::CREDITS_INVALID;
    use super::super::requester::{Completion, RequesterConfig, TimerAction};
    use super::*;

    const CFG: RequesterConfig = RequesterConfig {
        pmtu: 1024,
        initial_psn: Psn::new(10),
        window: 64,
        max_rd_atomic: 4,
        timeout: 10,
        retry_cnt: 2,
        rnr_retry: 2,
    };

    fn ack(psn: u32) -> Response {
        nak(
            psn,
            Syndrome::Ack {
                credit_code: CREDITS_INVALID,
            },
        )
    }

    fn nak(psn: u32, syndrome: Syndrome) -> Response {
        Response {
            psn: Psn::new(psn),
            kind: ResponseKind::Ack { syndrome, msn: 0 },
        }
    }

    fn data(psn: u32, kind: ResponseKind) -> Response {
        Response {
            psn: Psn::new(psn),
            kind,
        }
    }

    fn setup(ops: &[(OpKind, u32)]) -> Requester<8> {
        let mut r = Requester::<8>::new(CFG);
        for (i, &(k, len)) in ops.iter().enumerate() {
            r.post(i as u64, k, len).unwrap();
        }
        while r.next_packet(0).is_some() {}
        r
    }

    fn completions(r: &mut Requester<8>) -> ([Option<Completion>; 8], usize) {
        let mut out = [None; 8];
        let mut n = 0;
        while let Some(c) = r.poll_completion() {
            out[n] = Some(c);
            n += 1;
        }
        (out, n)
    }

    #[test]
    fn ack_completes_in_order_and_partially() {
        // PSNs: send 10..=11, write 12, send 13..=15.
        let mut r = setup(&[
            (OpKind::Send, 2000),
            (OpKind::Write, 5),
            (OpKind::Send, 3000),
        ]);
        assert_eq!(r.on_response(0, &ack(11)), ResponseAction::Progress);
        let (c, n) = completions(&mut r);
        assert_eq!((n, c[0].unwrap().wr_id), (1, 0));
        // A coalesced ACK inside the last message.
        assert_eq!(r.on_response(0, &ack(14)), ResponseAction::Progress);
        assert_eq!(r.una(), Psn::new(15));
        let (c, n) = completions(&mut r);
        assert_eq!(
            (n, c[0].unwrap().wr_id, c[0].unwrap().status),
            (1, 1, Status::Success)
        );
        // Stale and beyond-sent ACKs are ignored.
        assert_eq!(r.on_response(0, &ack(12)), ResponseAction::Ignored);
        assert_eq!(r.on_response(0, &ack(16)), ResponseAction::Ignored);
        assert_eq!(r.on_response(0, &ack(15)), ResponseAction::Progress);
        assert_eq!(completions(&mut r).1, 1);
        assert!(r.is_idle());
        assert_eq!(r.deadline(), None);
    }

    #[test]
    fn implicit_nak_resends_the_read() {
        // send 10, read 11..=13, send 14.
        let mut r = setup(&[(OpKind::Send, 8), (OpKind::Read, 3000), (OpKind::Send, 8)]);
        assert_eq!(
            r.on_response(0, &data(11, ResponseKind::ReadResponse)),
            ResponseAction::Place {
                wr_id: 1,
                offset: 0,
                len: 1024
            }
        );
        // The read response acknowledged the first send.
        assert_eq!(completions(&mut r).1, 1);
        assert_eq!(r.on_response(0, &ack(14)), ResponseAction::Retransmit);
        let p = r.next_packet(1).unwrap();
        assert_eq!(
            (p.kind, p.psn, p.offset, p.len),
            (OpKind::Read, Psn::new(12), 1024, 1976)
        );
        assert!(p.retransmit);
        // A duplicate ACK does not rewind again.
        assert_eq!(r.on_response(0, &ack(14)), ResponseAction::Ignored);
        // Every response but the last is a path MTU long; the last the rest.
        for (psn, offset, len) in [(12, 1024, 1024), (13, 2048, 952)] {
            assert_eq!(
                r.on_response(0, &data(psn, ResponseKind::ReadResponse)),
                ResponseAction::Place {
                    wr_id: 1,
                    offset,
                    len
                }
            );
        }
        // Duplicate response ignored.
        assert_eq!(
            r.on_response(0, &data(13, ResponseKind::ReadResponse)),
            ResponseAction::Ignored
        );
        assert_eq!(r.on_response(0, &ack(14)), ResponseAction::Progress);
        assert_eq!(completions(&mut r).1, 2);
    }

    #[test]
    fn timeout_goes_back_to_first_unacked() {
        // send 10..=12, send 13.
        let mut r = setup(&[(OpKind::Send, 3000), (OpKind::Send, 1)]);
        let t = super::super::ack_timeout_us(CFG.timeout).unwrap();
        assert_eq!(r.deadline(), Some(t));
        assert_eq!(r.on_response(50, &ack(10)), ResponseAction::Progress);
        // Progress restarts the timer.
        assert_eq!(r.deadline(), Some(50 + t));
        assert_eq!(r.on_timer(50 + t), TimerAction::Retransmit);
        let psns: [u32; 3] = core::array::from_fn(|_| r.next_packet(50 + t).unwrap().psn.get());
        assert_eq!(psns, [11, 12, 13]);
        assert_eq!(r.next_packet(50 + t), None);
    }

    #[test]
    fn progress_restores_retry_count() {
        let mut r = setup(&[(OpKind::Send, 1), (OpKind::Send, 1), (OpKind::Send, 1)]);
        let mut now = 0;
        // Two timeouts (retry_cnt = 2), then progress, then two more.
        for round in 0..2 {
            for _ in 0..2 {
                now = r.deadline().unwrap();
                assert_eq!(r.on_timer(now), TimerAction::Retransmit);
                while r.next_packet(now).is_some() {}
            }
            assert_eq!(
                r.on_response(now, &ack(10 + round)),
                ResponseAction::Progress
            );
        }
        now = r.deadline().unwrap();
        assert_eq!(r.on_timer(now), TimerAction::Retransmit);
        while r.next_packet(now).is_some() {}
        now = r.deadline().unwrap();
        assert_eq!(r.on_timer(now), TimerAction::Retransmit);
        while r.next_packet(now).is_some() {}
        now = r.deadline().unwrap();
        assert_eq!(r.on_timer(now), TimerAction::Error(RcError::RetryExceeded));
        let (c, n) = completions(&mut r);
        assert_eq!(n, 3);
        assert_eq!(c[2].unwrap().status, Status::Error(RcError::RetryExceeded));
    }

    #[test]
    fn read_response_gap_goes_back() {
        let mut r = setup(&[(OpKind::Read, 3000)]);
        assert_eq!(
            r.on_response(0, &data(11, ResponseKind::ReadResponse)),
            ResponseAction::Retransmit
        );
        assert_eq!(r.next_packet(0).unwrap().psn, Psn::new(10));
    }

    #[test]
    fn atomic_ack_completes() {
        let mut r = setup(&[(OpKind::Atomic, 8), (OpKind::Send, 1)]);
        assert_eq!(
            r.on_response(0, &data(10, ResponseKind::ReadResponse)),
            ResponseAction::Ignored
        );
        assert_eq!(
            r.on_response(0, &data(10, ResponseKind::AtomicAck)),
            ResponseAction::Place {
                wr_id: 0,
                offset: 0,
                len: 8
            }
        );
        assert_eq!(completions(&mut r).1, 1);
    }

    #[test]
    fn sequence_nak_acks_before_and_goes_back() {
        let mut r = setup(&[(OpKind::Send, 1), (OpKind::Send, 1), (OpKind::Send, 1)]);
        assert_eq!(
            r.on_response(0, &nak(11, Syndrome::Nak(NakCode::PsnSequenceError))),
            ResponseAction::Retransmit
        );
        assert_eq!(completions(&mut r).1, 1);
        assert_eq!(r.next_packet(0).unwrap().psn, Psn::new(11));
        // Repeated NAKs for the same PSN do not use up retries.
        for _ in 0..5 {
            r.on_response(0, &nak(11, Syndrome::Nak(NakCode::PsnSequenceError)));
        }
        assert_eq!(r.error(), None);
    }

    #[test]
    fn go_back_restarts_the_timer() {
        let mut r = setup(&[(OpKind::Send, 1), (OpKind::Send, 1), (OpKind::Send, 1)]);
        let t = r.deadline().unwrap();
        // A NAK just before the timer would fire: the resent packets get a whole
        // (backed-off) timeout, not what was left of the old one.
        // The NAK acknowledges nothing (its PSN is the first sent), so only the
        // go-back can restart the timer.
        let now = t - 1;
        assert_eq!(
            r.on_response(now, &nak(10, Syndrome::Nak(NakCode::PsnSequenceError))),
            ResponseAction::Retransmit
        );
        let t2 = r.deadline().unwrap();
        assert!(t2 >= now + t, "deadline {t2}, NAK at {now}, timeout {t}");
        assert_eq!(r.on_timer(t), TimerAction::Nothing);
        assert_eq!(r.on_timer(t2), TimerAction::Retransmit);
    }

    #[test]
    fn fatal_nak_fails_and_flushes() {
        let mut r = setup(&[(OpKind::Send, 1), (OpKind::Write, 1), (OpKind::Send, 1)]);
        assert_eq!(
            r.on_response(0, &nak(11, Syndrome::Nak(NakCode::RemoteAccessError))),
            ResponseAction::Error(RcError::RemoteAccess)
        );
        let (c, n) = completions(&mut r);
        assert_eq!(n, 3);
        assert_eq!(c[0].unwrap().status, Status::Success);
        assert_eq!(c[1].unwrap().status, Status::Error(RcError::RemoteAccess));
        assert_eq!(c[2].unwrap().status, Status::Error(RcError::Flushed));
        assert_eq!(r.next_packet(0), None);
    }

    #[test]
    fn rnr_nak_waits_and_counts() {
        let mut r = setup(&[(OpKind::Send, 1), (OpKind::Send, 1)]);
        let rnr = nak(11, Syndrome::RnrNak { timer: 14 }); // 1.28 ms
        assert_eq!(
            r.on_response(100, &rnr),
            ResponseAction::RnrWait { until: 1380 }
        );
        assert_eq!(completions(&mut r).1, 1);
        assert_eq!(r.next_packet(200), None);
        assert_eq!(r.deadline(), Some(1380));
        // A duplicate RNR NAK during the wait changes nothing.
        assert_eq!(r.on_response(200, &rnr), ResponseAction::Ignored);
        assert_eq!(r.on_timer(1379), TimerAction::Nothing);
        assert_eq!(r.on_timer(1380), TimerAction::Resume);
        assert_eq!(r.next_packet(1380).unwrap().psn, Psn::new(11));
        assert_eq!(
            r.on_response(1400, &rnr),
            ResponseAction::RnrWait { until: 2680 }
        );
        assert_eq!(r.on_timer(2680), TimerAction::Resume);
        r.next_packet(2680).unwrap();
        // rnr_retry = 2: the third RNR NAK without progress fails.
        assert_eq!(
            r.on_response(2700, &rnr),
            ResponseAction::Error(RcError::RnrRetryExceeded)
        );
        let c = r.poll_completion().unwrap();
        assert_eq!(c.status, Status::Error(RcError::RnrRetryExceeded));
    }

    #[test]
    fn rnr_retry_seven_is_unlimited_but_waits() {
        let mut r = Requester::<8>::new(RequesterConfig {
            rnr_retry: 7,
            ..CFG
        });
        r.post(0, OpKind::Send, 1).unwrap();
        let rnr = nak(10, Syndrome::RnrNak { timer: 1 }); // 10 us
        let mut now = 0;
        for _ in 0..1000 {
            assert!(r.next_packet(now).is_some());
            let ResponseAction::RnrWait { until } = r.on_response(now, &rnr) else {
                panic!("no wait");
            };
            assert_eq!(until, now + 10);
            assert_eq!(r.next_packet(now), None);
            now = r.deadline().unwrap();
            assert_eq!(r.on_timer(now), TimerAction::Resume);
        }
        assert_eq!(now, 10_000);
        assert_eq!(r.error(), None);
    }

    #[test]
    fn read_limit_released_by_completion() {
        let mut r = Requester::<8>::new(RequesterConfig {
            max_rd_atomic: 1,
            ..CFG
        });
        r.post(0, OpKind::Atomic, 8).unwrap();
        r.post(1, OpKind::Read, 10).unwrap();
        assert!(r.next_packet(0).is_some());
        assert_eq!(r.next_packet(0), None);
        r.on_response(0, &data(10, ResponseKind::AtomicAck));
        assert_eq!(r.next_packet(0).unwrap().kind, OpKind::Read);
    }
}
