// SPDX-License-Identifier: GPL-2.0

//! The RC requester: PSN assignment, the send window, the retransmission and
//! RNR timers (IBA vol 1, 9.7.1 - 9.7.6).
//!
//! Work requests are posted with [`Requester::post`], which assigns their
//! PSNs at once (a SEND/WRITE of `len` bytes takes `ceil(len / pmtu)` PSNs,
//! at least 1; an RDMA READ one PSN per response packet; an ATOMIC one).
//! [`Requester::next_packet`] hands out the packets to transmit, in PSN
//! order, while fewer PSNs than the congestion window ([`super::cwnd`], at
//! most `window`) are unacknowledged and fewer than `max_rd_atomic` RDMA
//! READ / ATOMIC requests are outstanding.
//!
//! Recovery is go-back-N: on a timeout, a PSN sequence error NAK, or an
//! implicit NAK (see [`super::completer`]), transmission restarts from the
//! first unacknowledged PSN. Each such retry uses up one of `retry_cnt`; any
//! progress restores it, and so does an RNR NAK (the responder answered; RNR
//! NAKs count against `rnr_retry` instead). Repeated NAKs or implicit NAKs for
//! the PSN already being resent do not rewind again. An RNR NAK stops
//! transmission until the RNR timer of its code has expired
//! ([`Requester::deadline`], [`Requester::on_timer`]);
//! `rnr_retry == 7` retries forever, but never without that wait.

use super::super::psn::Psn;
use super::cwnd::Cwnd;
use super::{ack_timeout_us, psns_for, OpKind};

/// Static parameters of a requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequesterConfig {
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// The PSN of the first packet.
    pub initial_psn: Psn,
    /// The most PSNs that may be unacknowledged at once (at least 1 is used;
    /// keep it far below 2^23).
    pub window: u32,
    /// The most RDMA READ / ATOMIC requests outstanding at once (at least 1
    /// is used); must not exceed the peer's `max_dest_rd_atomic`.
    pub max_rd_atomic: u32,
    /// Local ACK timeout code: 4.096 us * 2^`timeout`; 0 disables the timer.
    pub timeout: u8,
    /// Retries (timeouts, sequence errors) allowed without progress, 0..=7.
    pub retry_cnt: u8,
    /// RNR NAK retries allowed without progress, 0..=6; 7 means unlimited.
    pub rnr_retry: u8,
}

/// Why a work request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RcError {
    /// The retry count was exhausted (timeouts or sequence errors).
    RetryExceeded,
    /// The RNR retry count was exhausted.
    RnrRetryExceeded,
    /// The responder returned a remote access error NAK.
    RemoteAccess,
    /// The responder returned an invalid request NAK.
    RemoteInvalidRequest,
    /// The responder returned a remote operational error NAK.
    RemoteOperation,
    /// Not executed: an earlier work request failed and the QP is in error.
    Flushed,
}

/// The status of a completed work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Completed successfully.
    Success,
    /// Failed.
    Error(RcError),
}

/// A completed work request, reported in posting order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The caller's work request id.
    pub wr_id: u64,
    /// Its operation.
    pub kind: OpKind,
    /// Its status.
    pub status: Status,
}

/// Why [`Requester::post`] refused a work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// All `N` slots hold work requests not yet taken by `poll_completion`.
    Full,
    /// The QP is in the error state.
    QpError,
    /// Posting it would put 2^22 or more PSNs between the first
    /// unacknowledged PSN and the end of the posted work (wait for
    /// completions, see [`Requester::must_wait`]; a single message this long
    /// can never be posted).
    TooLong,
}

/// The most PSNs that may lie between the first unacknowledged PSN and the
/// end of the posted work, far below the 2^23 limit of PSN comparisons.
pub const MAX_POSTED_PSNS: u32 = 1 << 22;

/// A packet to transmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The work request it belongs to.
    pub wr_id: u64,
    /// Its operation.
    pub kind: OpKind,
    /// The packet's PSN.
    pub psn: Psn,
    /// Byte offset in the message: of the payload for SEND/WRITE, of the
    /// data still to read for an RDMA READ request (add it to the remote
    /// address and the local buffer).
    pub offset: u32,
    /// Payload bytes (SEND/WRITE), bytes to read (READ), or the posted
    /// length (ATOMIC).
    pub len: u32,
    /// Whether it is the first packet of the message (opcode First/Only).
    pub first: bool,
    /// Whether it is the last packet of the message (opcode Last/Only).
    pub last: bool,
    /// The AckReq bit.
    pub ack_req: bool,
    /// Whether this PSN was transmitted before.
    pub retransmit: bool,
}

/// What a timer expiry led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerAction {
    /// Nothing (not yet due, or no timer running).
    Nothing,
    /// Retransmission timeout: resend with `next_packet`, from the first
    /// unacknowledged PSN.
    Retransmit,
    /// The RNR wait is over: resume with `next_packet`.
    Resume,
    /// The retry count is exhausted; the QP is in the error state.
    Error(RcError),
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Wqe {
    pub(super) wr_id: u64,
    pub(super) kind: OpKind,
    pub(super) len: u32,
    pub(super) first_psn: Psn,
    pub(super) npsn: u32,
    /// The first PSN of this WQE not yet acknowledged (or, for READ /
    /// ATOMIC, the next response PSN expected).
    pub(super) next: Psn,
    pub(super) done: Option<Status>,
}

impl Wqe {
    const EMPTY: Wqe = Wqe {
        wr_id: 0,
        kind: OpKind::Send,
        len: 0,
        first_psn: Psn::ZERO,
        npsn: 0,
        next: Psn::ZERO,
        done: None,
    };

    pub(super) fn end(&self) -> Psn {
        self.first_psn.add(self.npsn as i32)
    }

    pub(super) fn contains(&self, psn: Psn) -> bool {
        let d = psn.diff(self.first_psn);
        d >= 0 && (d as u32) < self.npsn
    }
}

/// The send side of an RC QP (requester and completer); `N` is the number
/// of work requests it can hold, from posting until `poll_completion`.
#[derive(Debug, Clone)]
pub struct Requester<const N: usize> {
    pub(super) cfg: RequesterConfig,
    pub(super) wqes: [Wqe; N],
    pub(super) head: usize,
    pub(super) count: usize,
    /// The PSN the next posted work request gets.
    pub(super) next_psn: Psn,
    /// The first unacknowledged PSN.
    pub(super) una: Psn,
    /// The next PSN to transmit.
    pub(super) cursor: Psn,
    /// One past the highest PSN ever transmitted.
    pub(super) sent_end: Psn,
    pub(super) retry_left: u8,
    pub(super) rnr_left: u8,
    /// The retransmission deadline.
    pub(super) timer: Option<u64>,
    /// The end of the current RNR wait.
    pub(super) rnr_until: Option<u64>,
    /// The PSN of the last NAK-driven rewind, until progress is made.
    pub(super) recovering: Option<Psn>,
    /// The PSNs that may be unacknowledged now (at most `cfg.window`).
    pub(super) cwnd: Cwnd,
    pub(super) error: Option<RcError>,
}

impl<const N: usize> Requester<N> {
    /// An empty requester in the ready-to-send state.
    pub const fn new(cfg: RequesterConfig) -> Self {
        Requester {
            cfg,
            wqes: [Wqe::EMPTY; N],
            head: 0,
            count: 0,
            next_psn: cfg.initial_psn,
            una: cfg.initial_psn,
            cursor: cfg.initial_psn,
            sent_end: cfg.initial_psn,
            retry_left: cfg.retry_cnt & 7,
            rnr_left: cfg.rnr_retry & 7,
            timer: None,
            rnr_until: None,
            recovering: None,
            cwnd: Cwnd::new(cfg.window),
            error: None,
        }
    }

    /// The error that moved the QP to the error state, if any.
    pub const fn error(&self) -> Option<RcError> {
        self.error
    }

    /// The first unacknowledged PSN.
    pub const fn una(&self) -> Psn {
        self.una
    }

    /// The PSN the next posted work request will get.
    pub const fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// One past the highest PSN transmitted so far.
    pub const fn sent_end(&self) -> Psn {
        self.sent_end
    }

    /// Whether no work request is held (all were completed and taken).
    pub const fn is_idle(&self) -> bool {
        self.count == 0
    }

    pub(super) fn idx(&self, i: usize) -> usize {
        (self.head + i) % N
    }

    /// Whether a work request of `kind` with `len` bytes must wait for
    /// completions before [`Self::post`] takes it: alone it would fit, but not
    /// behind the work outstanding (2^22 PSNs from the first unacknowledged
    /// one). One that can never fit is refused by `post` instead.
    pub fn must_wait(&self, kind: OpKind, len: u32) -> bool {
        let npsn = psns_for(kind, len, self.cfg.pmtu);
        let posted = self.next_psn.diff(self.una) as u32;
        npsn < MAX_POSTED_PSNS && posted.saturating_add(npsn) >= MAX_POSTED_PSNS
    }

    /// Posts a work request of `kind` with `len` bytes (for an ATOMIC, its
    /// length is only reported back); returns its first PSN.
    pub fn post(&mut self, wr_id: u64, kind: OpKind, len: u32) -> Result<Psn, PostError> {
        self.check_room()?;
        let npsn = psns_for(kind, len, self.cfg.pmtu);
        let posted = self.next_psn.diff(self.una) as u32;
        if posted.saturating_add(npsn) >= MAX_POSTED_PSNS {
            return Err(PostError::TooLong);
        }
        let first = self.next_psn;
        self.push(wr_id, kind, len, npsn, None);
        self.next_psn = first.add(npsn as i32);
        Ok(first)
    }

    /// Whether a work request may be posted now: the QP is not in error and there is room.
    fn check_room(&self) -> Result<(), PostError> {
        if self.error.is_some() {
            Err(PostError::QpError)
        } else if self.count == N {
            Err(PostError::Full)
        } else {
            Ok(())
        }
    }

    /// Appends a work request starting at the next PSN (after [`Self::check_room`]).
    fn push(&mut self, wr_id: u64, kind: OpKind, len: u32, npsn: u32, done: Option<Status>) {
        let slot = self.idx(self.count);
        self.wqes[slot] = Wqe {
            wr_id,
            kind,
            len,
            first_psn: self.next_psn,
            npsn,
            next: self.next_psn,
            done,
        };
        self.count += 1;
    }

    /// Posts a local operation (a memory registration or invalidation, which
    /// the caller has just executed, in order): it takes no PSN and is
    /// finished at once, but completes, like every work request, only after
    /// everything posted before it. Reported with `kind` [`OpKind::Send`] and
    /// length 0; if the QP enters the error state before it completes, it
    /// completes as [`RcError::Flushed`].
    pub fn post_local(&mut self, wr_id: u64) -> Result<(), PostError> {
        self.check_room()?;
        self.push(wr_id, OpKind::Send, 0, 0, Some(Status::Success));
        Ok(())
    }

    /// Takes the oldest finished work request, if it is finished; work
    /// requests complete strictly in posting order.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        if self.count == 0 {
            return None;
        }
        let w = self.wqes[self.head];
        let status = w.done?;
        self.head = (self.head + 1) % N;
        self.count -= 1;
        Some(Completion {
            wr_id: w.wr_id,
            kind: w.kind,
            status,
        })
    }

    /// The index (from the head) of the unfinished WQE whose PSN range
    /// contains `psn`.
    pub(super) fn find(&self, psn: Psn) -> Option<usize> {
        (0..self.count).find(|&i| {
            let w = &self.wqes[self.idx(i)];
            w.done.is_none() && w.contains(psn)
        })
    }

    fn outstanding_reads(&self) -> u32 {
        (0..self.count)
            .map(|i| &self.wqes[self.idx(i)])
            .filter(|w| {
                w.done.is_none()
                    && w.kind.is_read_or_atomic()
                    && w.first_psn.is_before(self.sent_end)
            })
            .count() as u32
    }

    /// The next packet to transmit at time `now`, or `None` when nothing may
    /// be sent (all sent, window full, `max_rd_atomic` reached, RNR wait, or
    /// error). Call it until it returns `None` after every event.
    pub fn next_packet(&mut self, now: u64) -> Option<Transmit> {
        if self.error.is_some() || self.rnr_until.is_some() || self.cursor == self.next_psn {
            return None;
        }
        let window = self.cwnd.get() as i32;
        if self.cursor.diff(self.una) >= window {
            return None;
        }
        let i = self.find(self.cursor)?;
        let w = self.wqes[self.idx(i)];
        let fresh = !w.first_psn.is_before(self.sent_end);
        if w.kind.is_read_or_atomic()
            && fresh
            && self.outstanding_reads() >= self.cfg.max_rd_atomic.max(1)
        {
            return None;
        }
        let k = self.cursor.diff(w.first_psn) as u32;
        let offset = k.saturating_mul(self.cfg.pmtu);
        let rest = w.len.saturating_sub(offset);
        let (len, last, advance) = match w.kind {
            OpKind::Send | OpKind::Write => (rest.min(self.cfg.pmtu), k + 1 == w.npsn, 1),
            OpKind::Read => (rest, true, w.npsn - k),
            OpKind::Atomic => (w.len, true, 1),
        };
        let psn = self.cursor;
        let retransmit = psn.is_before(self.sent_end);
        self.cursor = psn.add(advance as i32);
        if self.cursor.is_after(self.sent_end) {
            self.sent_end = self.cursor;
        }
        if self.timer.is_none() {
            self.timer = self.retransmit_timeout_us().map(|t| now.saturating_add(t));
        }
        Some(Transmit {
            wr_id: w.wr_id,
            kind: w.kind,
            psn,
            offset,
            len,
            first: k == 0,
            last,
            ack_req: last || self.cursor.diff(self.una) >= window,
            retransmit,
        })
    }

    /// The time (microseconds) at which the caller must call
    /// [`on_timer`](Self::on_timer): the end of the RNR wait, or the
    /// retransmission deadline; `None` if no timer is running.
    pub const fn deadline(&self) -> Option<u64> {
        if self.error.is_some() {
            None
        } else if self.rnr_until.is_some() {
            self.rnr_until
        } else {
            self.timer
        }
    }

    /// Handles a timer expiry at time `now` (early calls do nothing).
    pub fn on_timer(&mut self, now: u64) -> TimerAction {
        if self.error.is_some() {
            return TimerAction::Nothing;
        }
        if let Some(until) = self.rnr_until {
            if now < until {
                return TimerAction::Nothing;
            }
            self.rnr_until = None;
            self.timer = None;
            return TimerAction::Resume;
        }
        match self.timer {
            Some(t) if now >= t => {
                self.timer = None;
                if self.una == self.sent_end {
                    return TimerAction::Nothing;
                }
                self.recovering = None;
                if self.retry_left == 0 {
                    let e = RcError::RetryExceeded;
                    self.fail(e);
                    return TimerAction::Error(e);
                }
                self.retry_left -= 1;
                self.cursor = self.una;
                self.cwnd.on_timeout();
                TimerAction::Retransmit
            }
            _ => TimerAction::Nothing,
        }
    }

    /// The retransmission timeout now: the local ACK timeout (4.096 us *
    /// 2^`timeout`), doubled for each retry already used without progress, up
    /// to 16 times. The backoff is not in the IBA, which only fixes the retry
    /// count: it keeps a go-back-N sender from burying a slow receiver under
    /// retransmissions of the whole window until the retries run out (seen on
    /// a KASAN kernel under emulation). Progress resets it.
    pub(super) fn retransmit_timeout_us(&self) -> Option<u64> {
        let used = (self.cfg.retry_cnt & 7)
            .saturating_sub(self.retry_left)
            .min(4);
        ack_timeout_us(self.cfg.timeout).map(|t| t << used)
    }

    /// Fails the first unfinished WQE with `e`, flushes the rest and enters
    /// the error state.
    pub(super) fn fail(&mut self, e: RcError) {
        let mut status = Status::Error(e);
        for i in 0..self.count {
            let s = self.idx(i);
            let w = &mut self.wqes[s];
            // A local operation (no PSN) behind the failure is flushed like the rest.
            let local_behind = w.npsn == 0 && status == Status::Error(RcError::Flushed);
            if w.done.is_none() || local_behind {
                w.done = Some(status);
                status = Status::Error(RcError::Flushed);
            }
        }
        self.error = Some(e);
        self.timer = None;
        self.rnr_until = None;
    }

    /// Moves the QP to the error state (e.g. on a local error); unfinished
    /// work requests complete as [`RcError::Flushed`].
    pub fn flush(&mut self) {
        self.fail(RcError::Flushed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const CFG: RequesterConfig = RequesterConfig {
        pmtu: 1024,
        initial_psn: Psn::new(0xFF_FFFE),
        window: 8,
        max_rd_atomic: 1,
        timeout: 10,
        retry_cnt: 2,
        rnr_retry: 3,
    };

    fn drain<const N: usize>(r: &mut Requester<N>, now: u64) -> usize {
        let mut n = 0;
        while r.next_packet(now).is_some() {
            n += 1;
        }
        n
    }

    #[test]
    fn psn_assignment_and_segmentation() {
        let mut r = Requester::<8>::new(CFG);
        assert_eq!(r.post(1, OpKind::Send, 2500), Ok(Psn::new(0xFF_FFFE)));
        assert_eq!(r.post(2, OpKind::Read, 4096), Ok(Psn::new(1)));
        assert_eq!(r.post(3, OpKind::Atomic, 8), Ok(Psn::new(5)));
        assert_eq!(r.post(4, OpKind::Write, 0), Ok(Psn::new(6)));
        assert_eq!(r.next_psn(), Psn::new(7));
        let p: [Transmit; 3] = core::array::from_fn(|_| r.next_packet(0).unwrap());
        assert_eq!(
            (p[0].offset, p[0].len, p[0].first, p[0].last),
            (0, 1024, true, false)
        );
        assert_eq!((p[1].psn, p[1].offset, p[1].len), (Psn::MAX, 1024, 1024));
        assert_eq!(
            (p[2].psn, p[2].len, p[2].last, p[2].ack_req),
            (Psn::ZERO, 452, true, true)
        );
        let rd = r.next_packet(0).unwrap();
        assert_eq!((rd.kind, rd.psn, rd.len), (OpKind::Read, Psn::new(1), 4096));
        // max_rd_atomic = 1: the atomic waits for the read.
        assert_eq!(r.next_packet(0), None);
    }

    #[test]
    fn window_bounds_outstanding_psns() {
        let mut r = Requester::<8>::new(CFG);
        r.post(1, OpKind::Write, 20 * 1024).unwrap();
        assert_eq!(drain(&mut r, 0), 8);
        // The packet that fills the window asks for an ACK.
        let mut r2 = Requester::<8>::new(CFG);
        r2.post(1, OpKind::Write, 20 * 1024).unwrap();
        let last = (0..8).map(|_| r2.next_packet(0).unwrap()).last().unwrap();
        assert!(last.ack_req && !last.last);
    }

    #[test]
    fn full_and_completion_order() {
        let mut r = Requester::<2>::new(CFG);
        r.post(1, OpKind::Send, 1).unwrap();
        r.post(2, OpKind::Send, 1).unwrap();
        assert_eq!(r.post(3, OpKind::Send, 1), Err(PostError::Full));
        let mut big = Requester::<2>::new(RequesterConfig { pmtu: 256, ..CFG });
        // 2^22 PSNs of 256 bytes: never fits; one PSN less fits, alone.
        assert!(!big.must_wait(OpKind::Write, 1 << 30));
        assert_eq!(big.post(1, OpKind::Write, 1 << 30), Err(PostError::TooLong));
        assert!(!big.must_wait(OpKind::Write, (1 << 30) - 256));
        assert!(big.post(1, OpKind::Write, (1 << 30) - 256).is_ok());
        // Behind it, even one more PSN waits for its completion.
        assert!(big.must_wait(OpKind::Read, 256));
        assert_eq!(big.post(2, OpKind::Read, 256), Err(PostError::TooLong));
        assert_eq!(r.poll_completion(), None);
        r.flush();
        assert_eq!(r.post(3, OpKind::Send, 1), Err(PostError::QpError));
        let c = r.poll_completion().unwrap();
        assert_eq!((c.wr_id, c.status), (1, Status::Error(RcError::Flushed)));
        assert_eq!(r.poll_completion().unwrap().wr_id, 2);
        assert!(r.is_idle());
    }

    #[test]
    fn timeout_retries_then_fails() {
        let mut r = Requester::<4>::new(CFG);
        r.post(7, OpKind::Send, 10).unwrap();
        let t = ack_timeout_us(CFG.timeout).unwrap();
        assert_eq!(r.deadline(), None);
        let mut sends = drain(&mut r, 0);
        // The timeout doubles with each retry used (up to 16x): t, 2t, 4t, 8t, 16t, 16t, ...
        let mut expected_end = t;
        let now = loop {
            let now = r.deadline().unwrap();
            assert_eq!(now, expected_end);
            assert_eq!(r.on_timer(now - 1), TimerAction::Nothing);
            match r.on_timer(now) {
                TimerAction::Retransmit => {
                    let p = r.next_packet(now).unwrap();
                    assert!(p.retransmit);
                    let backoff = (sends as u32).min(4);
                    sends += 1;
                    assert_eq!(r.deadline(), Some(now + (t << backoff)));
                    expected_end = now + (t << backoff);
                }
                TimerAction::Error(e) => {
                    assert_eq!(e, RcError::RetryExceeded);
                    break now;
                }
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(sends, usize::from(CFG.retry_cnt) + 1);
        let total: u64 = (0..=u32::from(CFG.retry_cnt)).map(|i| t << i.min(4)).sum();
        assert_eq!(now, total);
        let c = r.poll_completion().unwrap();
        assert_eq!(c.status, Status::Error(RcError::RetryExceeded));
        assert_eq!(r.deadline(), None);
    }

    #[test]
    fn timeout_zero_disables_timer() {
        let mut r = Requester::<4>::new(RequesterConfig { timeout: 0, ..CFG });
        r.post(7, OpKind::Send, 10).unwrap();
        assert_eq!(drain(&mut r, 0), 1);
        assert_eq!(r.deadline(), None);
        assert_eq!(r.on_timer(u64::MAX), TimerAction::Nothing);
    }

    #[test]
    fn local_operations_complete_in_order_and_flush_on_error() {
        let mut r = Requester::<8>::new(CFG);
        r.post(1, OpKind::Send, 100).unwrap();
        r.post_local(2).unwrap();
        r.post(3, OpKind::Send, 100).unwrap();
        r.post_local(4).unwrap();
        // The local operations take no PSN: the SENDs are back to back.
        let a = r.next_packet(0).unwrap();
        let b = r.next_packet(0).unwrap();
        assert_eq!((a.wr_id, b.wr_id), (1, 3));
        assert_eq!(b.psn, a.psn.next());
        assert!(r.next_packet(0).is_none());
        // Nothing completes before the first SEND does.
        assert!(r.poll_completion().is_none());
        let ack = super::super::completer::Response {
            psn: a.psn,
            kind: super::super::completer::ResponseKind::Ack {
                syndrome: crate::headers::Syndrome::Ack { credit_code: 31 },
                msn: 0,
            },
        };
        r.on_response(0, &ack);
        let c: [u64; 2] = [
            r.poll_completion().unwrap().wr_id,
            r.poll_completion().unwrap().wr_id,
        ];
        assert_eq!(c, [1, 2]);
        assert!(r.poll_completion().is_none());
        // The QP fails: the second SEND fails and the local operation behind it is flushed.
        r.flush();
        let c3 = r.poll_completion().unwrap();
        let c4 = r.poll_completion().unwrap();
        assert_eq!((c3.wr_id, c3.status), (3, Status::Error(RcError::Flushed)));
        assert_eq!((c4.wr_id, c4.status), (4, Status::Error(RcError::Flushed)));
        assert!(r.is_idle());
    }

    #[test]
    fn a_local_operation_needs_room_and_a_live_qp() {
        let mut r = Requester::<2>::new(CFG);
        r.post_local(1).unwrap();
        r.post_local(2).unwrap();
        assert_eq!(r.post_local(3), Err(PostError::Full));
        assert_eq!(r.poll_completion().map(|c| c.wr_id), Some(1));
        r.flush();
        assert_eq!(r.post_local(4), Err(PostError::QpError));
    }
}
