// SPDX-License-Identifier: GPL-2.0

//! The RC responder: PSN checking, ACK coalescing, RNR NAKs and the ring of
//! RDMA READ / ATOMIC responder resources (IBA vol 1, 9.7.4 - 9.7.5).
//!
//! [`Responder::on_request`] classifies every incoming request packet
//! against the expected PSN (ePSN):
//!
//! * in sequence: [`ResponderAction::Execute`]; ePSN advances by one, or by
//!   the number of response packets of an RDMA READ;
//! * in the past (duplicate): SEND/WRITE are re-acknowledged with the
//!   current MSN; RDMA READ / ATOMIC are replayed from the resource ring, and
//!   a duplicate whose resource was evicted gets an invalid request NAK;
//! * ahead (a gap): one PSN sequence error NAK per gap, then silent drops
//!   until the ePSN packet arrives.

use super::super::headers::{NakCode, Syndrome, CREDITS_INVALID};
use super::super::psn::Psn;
use super::{psns_for, OpKind};

/// Static parameters of a responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Path MTU in bytes (for the number of RDMA READ response packets).
    pub pmtu: u32,
    /// Send an ACK at the latest after this many unacknowledged in-sequence
    /// packets (values below 1 count as 1).
    pub ack_every: u32,
    /// The RNR NAK timer code (`min_rnr_timer`) put in RNR NAKs.
    pub rnr_timer: u8,
    /// The first expected PSN.
    pub initial_psn: Psn,
    /// The responder resources granted (`max_dest_rd_atomic`): the RDMA READ and
    /// ATOMIC requests kept for replay, the oldest overwritten by a new one. At
    /// most the ring's capacity is used; with none, a READ or ATOMIC gets no
    /// resource slot and the caller refuses it as an invalid request.
    pub resources: usize,
}

/// The fields of a received request packet the responder decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The packet's PSN.
    pub psn: Psn,
    /// Its operation.
    pub kind: OpKind,
    /// The BTH AckReq bit.
    pub ack_req: bool,
    /// Whether it is the last (or only) packet of its message; RDMA READ and
    /// ATOMIC requests are always single packets.
    pub last: bool,
    /// Whether executing it needs a receive WQE (SEND First/Only, RDMA WRITE
    /// Last/Only with immediate).
    pub needs_rwqe: bool,
    /// For an RDMA READ request, the DMA length requested (0 otherwise).
    pub read_len: u32,
}

/// An acknowledge packet to send: AETH syndrome, MSN and the BTH PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// The PSN of the acknowledge packet.
    pub psn: Psn,
    /// The AETH syndrome.
    pub syndrome: Syndrome,
    /// The AETH MSN (24 bits).
    pub msn: u32,
}

/// A remembered RDMA READ or ATOMIC request, kept to answer duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// RDMA READ or ATOMIC.
    pub kind: OpKind,
    /// The request's PSN: the first response PSN.
    pub first_psn: Psn,
    /// The number of response PSNs.
    pub npsn: u32,
    /// The MSN the responses carry.
    pub msn: u32,
    /// Caller data: e.g. the original value an ATOMIC returned (replayed,
    /// never re-executed) or the read's address.
    pub data: u64,
}

impl Resource {
    fn contains(&self, psn: Psn) -> bool {
        let d = psn.diff(self.first_psn);
        d >= 0 && (d as u32) < self.npsn
    }
}

/// The responder's decision on one request packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponderAction {
    /// In sequence: execute the packet. For RDMA READ / ATOMIC a resource was
    /// recorded in `slot` (store the atomic's original value in its `data`)
    /// and the responses use PSNs from the request's PSN on with the current
    /// MSN; otherwise send `ack` if present.
    Execute {
        /// The ACK to send after executing, if one is due.
        ack: Option<Ack>,
        /// The resource slot of an RDMA READ / ATOMIC.
        slot: Option<usize>,
    },
    /// A duplicate SEND/WRITE packet: do not execute, send this ACK.
    ReAck(Ack),
    /// A duplicate RDMA READ / ATOMIC: resend `count` responses of the
    /// resource in `slot`, PSNs from `from` on (for a READ, data offset
    /// `(from - first_psn) * pmtu`); an ATOMIC returns the saved `data`.
    Replay {
        /// The resource slot.
        slot: usize,
        /// The first PSN to resend.
        from: Psn,
        /// The number of response packets to resend.
        count: u32,
    },
    /// Send this NAK (sequence error, or invalid request); do not execute.
    Nak(Ack),
    /// No receive WQE: send this RNR NAK; the ePSN is not advanced.
    RnrNak(Ack),
    /// Drop the packet silently.
    Drop,
}

/// The receive side of an RC QP; `R` is the capacity of the responder
/// resource ring, of which [`ResponderConfig::resources`] slots are used.
#[derive(Debug, Clone)]
pub struct Responder<const R: usize> {
    cfg: ResponderConfig,
    epsn: Psn,
    msn: u32,
    unacked: u32,
    nak_sent: bool,
    resources: [Option<Resource>; R],
    next_slot: usize,
}

const MSN_MASK: u32 = 0x00FF_FFFF;

impl<const R: usize> Responder<R> {
    /// A responder expecting `cfg.initial_psn`, MSN 0.
    pub const fn new(cfg: ResponderConfig) -> Self {
        Responder {
            cfg,
            epsn: cfg.initial_psn,
            msn: 0,
            unacked: 0,
            nak_sent: false,
            resources: [None; R],
            next_slot: 0,
        }
    }

    /// The expected PSN.
    pub const fn epsn(&self) -> Psn {
        self.epsn
    }

    /// Whether a sequence error (or RNR) NAK was sent for the current gap: later packets
    /// ahead of the ePSN are dropped silently until the ePSN packet arrives.
    pub const fn nak_sent(&self) -> bool {
        self.nak_sent
    }

    /// The current MSN: the number of completed messages, modulo 2^24.
    pub const fn msn(&self) -> u32 {
        self.msn
    }

    /// Grants `resources` responder resources from now on (`max_dest_rd_atomic`
    /// changed by a modify of a QP in SQD); the requests kept stay until overwritten.
    pub fn grant(&mut self, resources: usize) {
        self.cfg.resources = resources;
    }

    /// The resource in `slot`, if any.
    pub fn resource(&self, slot: usize) -> Option<&Resource> {
        self.resources.get(slot).and_then(|r| r.as_ref())
    }

    /// The resource in `slot` for update (e.g. to store an atomic result).
    pub fn resource_mut(&mut self, slot: usize) -> Option<&mut Resource> {
        self.resources.get_mut(slot).and_then(|r| r.as_mut())
    }

    fn ack(&self, psn: Psn, syndrome: Syndrome) -> Ack {
        Ack {
            psn,
            syndrome,
            msn: self.msn,
        }
    }

    fn positive(&self, psn: Psn) -> Ack {
        self.ack(
            psn,
            Syndrome::Ack {
                credit_code: CREDITS_INVALID,
            },
        )
    }

    /// Decides on one incoming request packet. `rwqe_available` says whether
    /// a receive WQE is available; it only matters for an in-sequence packet
    /// with `needs_rwqe`.
    pub fn on_request(&mut self, req: &Request, rwqe_available: bool) -> ResponderAction {
        let d = req.psn.diff(self.epsn);
        if d > 0 {
            // A gap: NAK it once, then drop until the ePSN packet arrives.
            if self.nak_sent {
                return ResponderAction::Drop;
            }
            self.nak_sent = true;
            self.unacked = 0;
            return ResponderAction::Nak(
                self.ack(self.epsn, Syndrome::Nak(NakCode::PsnSequenceError)),
            );
        }
        if d < 0 {
            return self.duplicate(req);
        }
        if req.needs_rwqe && !rwqe_available {
            // The RNR NAK also stands for this gap's NAK: later packets of
            // the burst are dropped silently.
            self.nak_sent = true;
            self.unacked = 0;
            return ResponderAction::RnrNak(self.ack(
                req.psn,
                Syndrome::RnrNak {
                    timer: self.cfg.rnr_timer,
                },
            ));
        }
        self.nak_sent = false;
        match req.kind {
            OpKind::Read | OpKind::Atomic => {
                let npsn = psns_for(req.kind, req.read_len, self.cfg.pmtu);
                self.msn = (self.msn + 1) & MSN_MASK;
                self.epsn = req.psn.add(npsn as i32);
                // The responses acknowledge everything before them.
                self.unacked = 0;
                let slot = self.record(Resource {
                    kind: req.kind,
                    first_psn: req.psn,
                    npsn,
                    msn: self.msn,
                    data: 0,
                });
                ResponderAction::Execute { ack: None, slot }
            }
            OpKind::Send | OpKind::Write => {
                self.epsn = req.psn.next();
                if req.last {
                    self.msn = (self.msn + 1) & MSN_MASK;
                }
                self.unacked += 1;
                let due = req.ack_req || req.last || self.unacked >= self.cfg.ack_every.max(1);
                let ack = if due {
                    self.unacked = 0;
                    Some(self.positive(req.psn))
                } else {
                    None
                };
                ResponderAction::Execute { ack, slot: None }
            }
        }
    }

    /// Keeps `res` in the next resource slot, overwriting the oldest once all
    /// granted slots are used; `None` if no resources were granted.
    fn record(&mut self, res: Resource) -> Option<usize> {
        let granted = self.cfg.resources.min(R);
        if granted == 0 {
            return None;
        }
        let slot = self.next_slot % granted;
        self.resources[slot] = Some(res);
        self.next_slot = (slot + 1) % granted;
        Some(slot)
    }

    fn duplicate(&mut self, req: &Request) -> ResponderAction {
        match req.kind {
            OpKind::Send | OpKind::Write => {
                self.unacked = 0;
                ResponderAction::ReAck(self.positive(self.epsn.prev()))
            }
            OpKind::Read | OpKind::Atomic => {
                let found = self
                    .resources
                    .iter()
                    .enumerate()
                    .find_map(|(i, r)| match r {
                        Some(r) if r.kind == req.kind && r.contains(req.psn) => Some((i, *r)),
                        _ => None,
                    });
                match found {
                    Some((slot, r)) if req.kind == OpKind::Read || r.first_psn == req.psn => {
                        let done = req.psn.diff(r.first_psn) as u32;
                        ResponderAction::Replay {
                            slot,
                            from: req.psn,
                            count: r.npsn - done,
                        }
                    }
                    _ => ResponderAction::Nak(
                        self.ack(req.psn, Syndrome::Nak(NakCode::InvalidRequest)),
                    ),
                }
            }
        }
    }

    /// Rejects the in-sequence packet `psn` that the caller found invalid
    /// (bad R_Key, length, opcode sequence, ...): returns the NAK to send
    /// with `code`. The ePSN does not advance; the QP is expected to enter
    /// the error state.
    pub fn reject(&mut self, psn: Psn, code: NakCode) -> Ack {
        self.unacked = 0;
        self.ack(psn, Syndrome::Nak(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: ResponderConfig = ResponderConfig {
        pmtu: 1024,
        ack_every: 3,
        rnr_timer: 12,
        initial_psn: Psn::new(100),
        resources: 2,
    };

    fn req(psn: u32, kind: OpKind, last: bool) -> Request {
        Request {
            psn: Psn::new(psn),
            kind,
            ack_req: false,
            last,
            needs_rwqe: false,
            read_len: 0,
        }
    }

    fn read(psn: u32, len: u32) -> Request {
        Request {
            read_len: len,
            last: true,
            ..req(psn, OpKind::Read, true)
        }
    }

    fn acked(a: ResponderAction) -> Option<Ack> {
        match a {
            ResponderAction::Execute { ack, .. } => ack,
            other => panic!("not executed: {other:?}"),
        }
    }

    #[test]
    fn in_sequence_and_coalescing() {
        let mut r = Responder::<2>::new(CFG);
        // Three middle packets: the third triggers the coalesced ACK.
        assert_eq!(
            acked(r.on_request(&req(100, OpKind::Write, false), true)),
            None
        );
        assert_eq!(
            acked(r.on_request(&req(101, OpKind::Write, false), true)),
            None
        );
        let a = acked(r.on_request(&req(102, OpKind::Write, false), true)).unwrap();
        assert_eq!((a.psn, a.msn), (Psn::new(102), 0));
        // Last packet of the message: ACK with the new MSN.
        let a = acked(r.on_request(&req(103, OpKind::Write, true), true)).unwrap();
        assert_eq!((a.psn, a.msn), (Psn::new(103), 1));
        // AckReq forces an ACK.
        let mut p = req(104, OpKind::Send, false);
        p.ack_req = true;
        assert!(acked(r.on_request(&p, true)).is_some());
        assert_eq!(r.epsn(), Psn::new(105));
        assert!(matches!(a.syndrome, Syndrome::Ack { credit_code: 31 }));
    }

    #[test]
    fn duplicate_send_is_reacked_with_current_msn() {
        let mut r = Responder::<2>::new(CFG);
        r.on_request(&req(100, OpKind::Send, true), true);
        r.on_request(&req(101, OpKind::Send, true), true);
        let a = r.on_request(&req(100, OpKind::Send, true), true);
        assert_eq!(
            a,
            ResponderAction::ReAck(Ack {
                psn: Psn::new(101),
                syndrome: Syndrome::Ack { credit_code: 31 },
                msn: 2
            })
        );
        assert_eq!(r.epsn(), Psn::new(102));
    }

    #[test]
    fn gap_is_nakked_once() {
        let mut r = Responder::<2>::new(CFG);
        let a = r.on_request(&req(102, OpKind::Send, true), true);
        assert_eq!(
            a,
            ResponderAction::Nak(Ack {
                psn: Psn::new(100),
                syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                msn: 0
            })
        );
        assert_eq!(
            r.on_request(&req(103, OpKind::Send, true), true),
            ResponderAction::Drop
        );
        assert!(matches!(
            r.on_request(&req(100, OpKind::Send, true), true),
            ResponderAction::Execute { .. }
        ));
        // A new gap gets a new NAK.
        assert!(matches!(
            r.on_request(&req(105, OpKind::Send, true), true),
            ResponderAction::Nak(_)
        ));
    }

    #[test]
    fn rnr_nak_does_not_advance() {
        let mut r = Responder::<2>::new(CFG);
        let mut p = req(100, OpKind::Send, true);
        p.needs_rwqe = true;
        let a = r.on_request(&p, false);
        assert_eq!(
            a,
            ResponderAction::RnrNak(Ack {
                psn: Psn::new(100),
                syndrome: Syndrome::RnrNak { timer: 12 },
                msn: 0
            })
        );
        assert_eq!(r.epsn(), Psn::new(100));
        // The rest of the burst is dropped silently.
        assert_eq!(
            r.on_request(&req(101, OpKind::Send, true), false),
            ResponderAction::Drop
        );
        // Retried once a WQE is there.
        assert!(matches!(
            r.on_request(&p, true),
            ResponderAction::Execute { .. }
        ));
        assert_eq!(r.msn(), 1);
    }

    #[test]
    fn read_consumes_response_psns_and_replays() {
        let mut r = Responder::<2>::new(CFG);
        let a = r.on_request(&read(100, 3000), true);
        assert_eq!(
            a,
            ResponderAction::Execute {
                ack: None,
                slot: Some(0)
            }
        );
        assert_eq!(r.epsn(), Psn::new(103));
        assert_eq!(r.msn(), 1);
        let res = *r.resource(0).unwrap();
        assert_eq!((res.first_psn, res.npsn, res.msn), (Psn::new(100), 3, 1));
        // Zero-length read: one PSN.
        r.on_request(&read(103, 0), true);
        assert_eq!(r.epsn(), Psn::new(104));
        // Whole and partial replays.
        assert_eq!(
            r.on_request(&read(100, 3000), true),
            ResponderAction::Replay {
                slot: 0,
                from: Psn::new(100),
                count: 3
            }
        );
        assert_eq!(
            r.on_request(&read(102, 952), true),
            ResponderAction::Replay {
                slot: 0,
                from: Psn::new(102),
                count: 1
            }
        );
        assert_eq!(r.epsn(), Psn::new(104));
    }

    #[test]
    fn atomic_replays_saved_result_and_evicted_is_nakked() {
        let mut r = Responder::<1>::new(CFG);
        let a = r.on_request(&req(100, OpKind::Atomic, true), true);
        assert_eq!(
            a,
            ResponderAction::Execute {
                ack: None,
                slot: Some(0)
            }
        );
        r.resource_mut(0).unwrap().data = 0xdead;
        assert_eq!(r.epsn(), Psn::new(101));
        assert_eq!(
            r.on_request(&req(100, OpKind::Atomic, true), true),
            ResponderAction::Replay {
                slot: 0,
                from: Psn::new(100),
                count: 1
            }
        );
        assert_eq!(r.resource(0).unwrap().data, 0xdead);
        // A second atomic evicts the first (ring of one).
        r.on_request(&req(101, OpKind::Atomic, true), true);
        assert_eq!(
            r.on_request(&req(100, OpKind::Atomic, true), true),
            ResponderAction::Nak(Ack {
                psn: Psn::new(100),
                syndrome: Syndrome::Nak(NakCode::InvalidRequest),
                msn: 2
            })
        );
        // A read duplicate must match a read resource.
        assert!(matches!(
            r.on_request(&read(101, 8), true),
            ResponderAction::Nak(_)
        ));
    }

    #[test]
    fn psn_and_msn_wrap() {
        let cfg = ResponderConfig {
            initial_psn: Psn::MAX,
            ..CFG
        };
        let mut r = Responder::<2>::new(cfg);
        r.msn = MSN_MASK;
        assert!(matches!(
            r.on_request(&read(Psn::MAX.get(), 2048), true),
            ResponderAction::Execute { .. }
        ));
        assert_eq!(r.epsn(), Psn::new(1));
        assert_eq!(r.msn(), 0);
        assert!(matches!(
            r.on_request(&read(0, 1024), true),
            ResponderAction::Replay { count: 1, .. }
        ));
    }

    #[test]
    fn only_granted_resources_are_used() {
        // A ring of 4, 2 granted: the third READ overwrites the first, whose
        // duplicate is then refused; the second's is still served.
        let mut r = Responder::<4>::new(CFG);
        let slots: [_; 3] =
            core::array::from_fn(|i| match r.on_request(&read(100 + i as u32, 8), true) {
                ResponderAction::Execute { slot, .. } => slot,
                a => panic!("{a:?}"),
            });
        assert_eq!(slots, [Some(0), Some(1), Some(0)]);
        assert!(matches!(
            r.on_request(&read(100, 8), true),
            ResponderAction::Nak(_)
        ));
        assert!(matches!(
            r.on_request(&read(101, 8), true),
            ResponderAction::Replay { slot: 1, .. }
        ));
        // Granted 3 from now on: the next two go to slots 1 and 2.
        r.grant(3);
        let next: [_; 2] =
            core::array::from_fn(|i| match r.on_request(&read(103 + i as u32, 8), true) {
                ResponderAction::Execute { slot, .. } => slot,
                a => panic!("{a:?}"),
            });
        assert_eq!(next, [Some(1), Some(2)]);
        // None granted (max_dest_rd_atomic 0): no slot, for READ and ATOMIC alike.
        let mut r = Responder::<4>::new(ResponderConfig {
            resources: 0,
            ..CFG
        });
        for kind in [OpKind::Read, OpKind::Atomic] {
            let psn = r.epsn().get();
            let q = Request {
                kind,
                ..read(psn, 8)
            };
            assert!(matches!(
                r.on_request(&q, true),
                ResponderAction::Execute { slot: None, .. }
            ));
        }
    }

    #[test]
    fn reject_gives_nak_without_advancing() {
        let mut r = Responder::<2>::new(CFG);
        let a = r.reject(Psn::new(100), NakCode::RemoteAccessError);
        assert_eq!(a.syndrome, Syndrome::Nak(NakCode::RemoteAccessError));
        assert_eq!(r.epsn(), Psn::new(100));
    }
}
