// SPDX-License-Identifier: GPL-2.0

//! Deterministic simulation of the RC reliability machines: a requester (with
//! its completer) and a responder exchanging abstract packets over a lossy,
//! duplicating, reordering channel driven by a seeded PRNG.

use oxrdma_wire::headers::{rnr_timer_us, Syndrome};
use oxrdma_wire::psn::Psn;
use oxrdma_wire::rc::completer::{Response, ResponseAction, ResponseKind};
use oxrdma_wire::rc::requester::{
    Completion, RcError, Requester, RequesterConfig, Status, TimerAction, Transmit,
};
use oxrdma_wire::rc::responder::{Ack, Request, Responder, ResponderAction, ResponderConfig};
use oxrdma_wire::rc::{psns_for, OpKind};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `permille` / 1000.
    fn chance(&mut self, permille: u64) -> bool {
        self.below(1000) < permille
    }
}

#[derive(Debug, Clone, Copy)]
enum Pkt {
    Req(Request, u64),
    Resp(Response, Option<(u64, u32)>),
}

#[derive(Clone, Copy)]
struct ChannelCfg {
    loss: u64,
    dup: u64,
    min_delay: u64,
    jitter: u64,
}

/// One direction of the link: packets ordered by delivery time.
struct Channel {
    cfg: ChannelCfg,
    queue: BTreeMap<(u64, u64), Pkt>,
    seq: u64,
    /// Drop everything (peer gone).
    dead: bool,
}

impl Channel {
    fn new(cfg: ChannelCfg) -> Self {
        Channel {
            cfg,
            queue: BTreeMap::new(),
            seq: 0,
            dead: false,
        }
    }
    fn send(&mut self, rng: &mut Rng, now: u64, p: Pkt) {
        if self.dead || rng.chance(self.cfg.loss) {
            return;
        }
        let copies = if rng.chance(self.cfg.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let at = now + self.cfg.min_delay + rng.below(self.cfg.jitter + 1);
            self.seq += 1;
            self.queue.insert((at, self.seq), p);
        }
    }
    fn next_time(&self) -> Option<u64> {
        self.queue.keys().next().map(|k| k.0)
    }
    fn pop(&mut self) -> Pkt {
        let k = *self.queue.keys().next().unwrap();
        self.queue.remove(&k).unwrap()
    }
}

const PMTU: u32 = 256;

struct Sim {
    rng: Rng,
    now: u64,
    steps: u64,
    req: Requester<16>,
    resp: Responder<4>,
    a_to_b: Channel,
    b_to_a: Channel,
    ops: Vec<(OpKind, u32)>,
    posted: usize,
    completions: Vec<Completion>,
    /// Receive WQEs available at the responder, from `rwqe_from` on.
    rwqe_from: u64,
    /// Responder: executed messages (wr_id) in order, and next PSN executed.
    executed: Vec<u64>,
    exec_psn: Psn,
    /// Requester: placed read/atomic offsets per wr_id.
    placed: BTreeMap<u64, Vec<u32>>,
    transmissions: BTreeMap<u32, u32>,
    rnr_waits: u64,
    first_rnr: Option<u64>,
}

fn requester_cfg() -> RequesterConfig {
    RequesterConfig {
        pmtu: PMTU,
        initial_psn: Psn::new(0xFF_FFF0),
        window: 32,
        max_rd_atomic: 4,
        timeout: 5, // 131 us
        retry_cnt: 7,
        rnr_retry: 7,
    }
}

fn responder_cfg() -> ResponderConfig {
    ResponderConfig {
        pmtu: PMTU,
        ack_every: 4,
        rnr_timer: 3, // 30 us
        initial_psn: Psn::new(0xFF_FFF0),
        resources: 4,
    }
}

impl Sim {
    fn new(seed: u64, ch: ChannelCfg, rcfg: RequesterConfig, ops: Vec<(OpKind, u32)>) -> Self {
        Sim {
            rng: Rng(seed),
            now: 0,
            steps: 0,
            req: Requester::new(rcfg),
            resp: Responder::new(responder_cfg()),
            a_to_b: Channel::new(ch),
            b_to_a: Channel::new(ch),
            ops,
            posted: 0,
            completions: Vec::new(),
            rwqe_from: 0,
            executed: Vec::new(),
            exec_psn: rcfg.initial_psn,
            placed: BTreeMap::new(),
            transmissions: BTreeMap::new(),
            rnr_waits: 0,
            first_rnr: None,
        }
    }

    fn transmit(&mut self, t: Transmit) {
        *self.transmissions.entry(t.psn.get()).or_default() += 1;
        let r = Request {
            psn: t.psn,
            kind: t.kind,
            ack_req: t.ack_req,
            last: t.last,
            needs_rwqe: t.kind == OpKind::Send && t.first,
            read_len: if t.kind == OpKind::Read { t.len } else { 0 },
        };
        let now = self.now;
        self.a_to_b.send(&mut self.rng, now, Pkt::Req(r, t.wr_id));
    }

    fn send_ack(&mut self, a: Ack) {
        let resp = Response {
            psn: a.psn,
            kind: ResponseKind::Ack {
                syndrome: a.syndrome,
                msn: a.msn,
            },
        };
        let now = self.now;
        self.b_to_a.send(&mut self.rng, now, Pkt::Resp(resp, None));
    }

    fn send_data(&mut self, kind: OpKind, first: Psn, from: Psn, count: u32, wr_id: u64) {
        for k in 0..count {
            let psn = from.add(k as i32);
            let resp = Response {
                psn,
                kind: if kind == OpKind::Read {
                    ResponseKind::ReadResponse
                } else {
                    ResponseKind::AtomicAck
                },
            };
            let offset = psn.diff(first) as u32 * PMTU;
            let now = self.now;
            self.b_to_a
                .send(&mut self.rng, now, Pkt::Resp(resp, Some((wr_id, offset))));
        }
    }

    /// The responder side.
    fn on_request(&mut self, r: Request, wr_id: u64) {
        let avail = self.now >= self.rwqe_from;
        match self.resp.on_request(&r, avail) {
            ResponderAction::Execute { ack, slot } => {
                assert_eq!(r.psn, self.exec_psn, "executed out of order");
                if r.last {
                    self.executed.push(wr_id);
                }
                match slot {
                    Some(s) => {
                        let res = self.resp.resource_mut(s).unwrap();
                        res.data = wr_id;
                        let res = *res;
                        self.exec_psn = r.psn.add(res.npsn as i32);
                        self.send_data(res.kind, res.first_psn, r.psn, res.npsn, wr_id);
                    }
                    None => self.exec_psn = r.psn.next(),
                }
                if let Some(a) = ack {
                    self.send_ack(a);
                }
            }
            ResponderAction::ReAck(a) | ResponderAction::Nak(a) | ResponderAction::RnrNak(a) => {
                self.send_ack(a)
            }
            ResponderAction::Replay { slot, from, count } => {
                let res = *self.resp.resource(slot).unwrap();
                self.send_data(res.kind, res.first_psn, from, count, res.data);
            }
            ResponderAction::Drop => {}
        }
    }

    /// The requester side.
    fn on_response(&mut self, r: Response, data: Option<(u64, u32)>) {
        match self.req.on_response(self.now, &r) {
            ResponseAction::Place { wr_id, offset, .. } => {
                assert_eq!(data, Some((wr_id, offset)), "placed wrong data");
                self.placed.entry(wr_id).or_default().push(offset);
            }
            ResponseAction::RnrWait { until } => {
                self.rnr_waits += 1;
                self.first_rnr.get_or_insert(self.now);
                let ResponseKind::Ack {
                    syndrome: Syndrome::RnrNak { timer },
                    ..
                } = r.kind
                else {
                    panic!("RNR wait without RNR NAK")
                };
                assert_eq!(until, self.now + u64::from(rnr_timer_us(timer)));
            }
            _ => {}
        }
    }

    fn pump(&mut self) {
        while let Some(c) = self.req.poll_completion() {
            self.completions.push(c);
        }
        while self.posted < self.ops.len() {
            let (k, len) = self.ops[self.posted];
            if self.req.post(self.posted as u64, k, len).is_err() {
                break;
            }
            self.posted += 1;
        }
        while let Some(t) = self.req.next_packet(self.now) {
            self.transmit(t);
        }
    }

    /// Runs until all operations complete (or the QP fails); returns false
    /// if it would have needed more than `max_steps` events.
    fn run(&mut self, max_steps: u64) -> bool {
        loop {
            self.pump();
            if self.completions.len() == self.ops.len()
                || (self.req.error().is_some() && self.req.is_idle())
            {
                return true;
            }
            self.steps += 1;
            if self.steps > max_steps {
                return false;
            }
            let ta = self.b_to_a.next_time();
            let tb = self.a_to_b.next_time();
            let dl = self.req.deadline();
            let Some(next) = [ta, tb, dl].into_iter().flatten().min() else {
                panic!("deadlock at {}: {:?}", self.now, self.req);
            };
            assert!(next >= self.now, "time went backwards");
            self.now = next;
            if dl == Some(next) {
                match self.req.on_timer(next) {
                    TimerAction::Nothing => panic!("timer fired for nothing"),
                    TimerAction::Error(_) | TimerAction::Retransmit | TimerAction::Resume => {}
                }
            } else if tb == Some(next) {
                let Pkt::Req(r, id) = self.a_to_b.pop() else {
                    unreachable!()
                };
                self.on_request(r, id);
            } else {
                let Pkt::Resp(r, d) = self.b_to_a.pop() else {
                    unreachable!()
                };
                self.on_response(r, d);
            }
        }
    }

    /// Checks the invariants that hold whatever the loss: completions in
    /// order and exactly once, a prefix of successes, then at most one
    /// RetryExceeded followed by flushes; the responder executed a prefix of
    /// the messages exactly once, in order; every successful READ/ATOMIC had
    /// each response placed exactly once. Returns the number of successes.
    fn check_consistent(&self) -> usize {
        for (i, c) in self.completions.iter().enumerate() {
            assert_eq!(c.wr_id, i as u64, "completion order");
            assert_eq!(c.kind, self.ops[i].0);
        }
        let ok = self
            .completions
            .iter()
            .take_while(|c| c.status == Status::Success)
            .count();
        if let Some(c) = self.completions.get(ok) {
            assert_eq!(c.status, Status::Error(RcError::RetryExceeded));
            assert!(self.completions[ok + 1..]
                .iter()
                .all(|c| c.status == Status::Error(RcError::Flushed)));
            assert_eq!(self.req.error(), Some(RcError::RetryExceeded));
        }
        let expect: Vec<u64> = (0..self.executed.len() as u64).collect();
        assert_eq!(self.executed, expect, "responder execution order");
        assert!(self.executed.len() >= ok);
        for (i, &(k, len)) in self.ops.iter().enumerate().take(ok) {
            if k.is_read_or_atomic() {
                let n = psns_for(k, len, PMTU);
                let want: Vec<u32> = (0..n).map(|j| j * PMTU).collect();
                assert_eq!(self.placed.get(&(i as u64)), Some(&want), "wr {i}");
            } else {
                assert!(!self.placed.contains_key(&(i as u64)));
            }
        }
        ok
    }

    fn check_all_succeeded(&self) {
        assert_eq!(self.check_consistent(), self.ops.len(), "not all succeeded");
        assert_eq!(self.executed.len(), self.ops.len());
    }
}

fn mixed_ops(rng: &mut Rng, n: usize) -> Vec<(OpKind, u32)> {
    (0..n)
        .map(|_| match rng.below(4) {
            0 => (OpKind::Send, rng.below(2000) as u32),
            1 => (OpKind::Write, rng.below(3000) as u32),
            2 => (OpKind::Read, rng.below(2000) as u32),
            _ => (OpKind::Atomic, 8),
        })
        .collect()
}

fn lossy(loss: u64) -> ChannelCfg {
    ChannelCfg {
        loss,
        dup: 50,
        min_delay: 5,
        jitter: 20,
    }
}

/// Runs one lossy mixed scenario; returns (all succeeded, steps).
fn run_mixed(seed: u64, loss_permille: u64, messages: usize) -> (bool, u64) {
    let mut rng = Rng(seed ^ 0xA5A5);
    let ops = mixed_ops(&mut rng, messages);
    let mut sim = Sim::new(seed, lossy(loss_permille), requester_cfg(), ops);
    // Bound: generous, but finite and proportional to the work.
    let bound = 2_000 * messages as u64;
    assert!(
        sim.run(bound),
        "seed {seed} loss {loss_permille}: not done in {bound} steps ({} done)",
        sim.completions.len()
    );
    let ok = sim.check_consistent();
    (ok == messages, sim.steps)
}

#[test]
fn lossless_mixed_traffic() {
    let (ok, steps) = run_mixed(1, 0, 300);
    assert!(ok);
    eprintln!("lossless, reordering: 300 messages, {steps} steps");
}

#[test]
fn lossless_in_order_is_efficient() {
    let mut rng = Rng(5);
    let ops = mixed_ops(&mut rng, 300);
    let ch = ChannelCfg {
        loss: 0,
        dup: 0,
        min_delay: 10,
        jitter: 0,
    };
    let mut sim = Sim::new(5, ch, requester_cfg(), ops);
    assert!(sim.run(1_000_000));
    sim.check_all_succeeded();
    let sent: u32 = sim.transmissions.values().sum();
    let distinct = sim.transmissions.len() as u32;
    eprintln!(
        "lossless, in order: 300 messages, {} steps, {sent} requests sent",
        sim.steps
    );
    // No retransmission at all on a perfect link.
    assert_eq!(sent, distinct);
}

#[test]
fn lossy_mixed_traffic_up_to_20_percent() {
    for loss in [10, 50, 100, 150, 200] {
        let (mut max_steps, mut failed) = (0, 0);
        for seed in 0..40 {
            let (ok, steps) = run_mixed(seed * 7919 + loss, loss, 200);
            max_steps = max_steps.max(steps);
            failed += u32::from(!ok);
        }
        eprintln!(
            "loss {loss}/1000: 40 seeds x 200 messages, max {max_steps} steps, \
             {failed} RetryExceeded"
        );
        // retry_cnt = 7 counts timeouts, sequence errors and implicit NAKs
        // (as the IBA requires): with heavy reordering a few runs
        // legitimately exhaust it (over 400 seeds: 1 at 10% loss, 2 at 15%,
        // 24 at 20%; before the congestion window 0, 2 and 32); at 5% and
        // below none may.
        match loss {
            0..=50 => assert_eq!(failed, 0, "loss {loss}"),
            51..=150 => assert!(failed <= 2, "loss {loss}: {failed} of 40 failed"),
            _ => assert!(failed <= 4, "loss {loss}: {failed} of 40 failed"),
        }
    }
}

#[test]
fn lossy_in_order_link() {
    for loss in [100, 200] {
        let ch = ChannelCfg {
            loss,
            dup: 50,
            min_delay: 10,
            jitter: 0,
        };
        let mut failed = 0;
        for seed in 0..40 {
            let mut rng = Rng(seed);
            let ops = mixed_ops(&mut rng, 200);
            let mut sim = Sim::new(seed, ch, requester_cfg(), ops);
            assert!(sim.run(400_000), "seed {seed}");
            failed += u32::from(sim.check_consistent() != 200);
        }
        eprintln!("loss {loss}/1000, in order: 40 seeds x 200 messages, {failed} RetryExceeded");
        assert!(
            failed == 0 || loss > 100 && failed <= 8,
            "loss {loss}: {failed}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_seeds(seed in any::<u64>(), loss in 0u64..=200, n in 1usize..80) {
        let (ok, _) = run_mixed(seed, loss, n);
        prop_assert!(ok || loss > 100);
    }
}

#[test]
fn rnr_with_infinite_retry_waits_for_buffers() {
    let ops: Vec<_> = (0..20).map(|i| (OpKind::Send, (i * 100) as u32)).collect();
    let mut sim = Sim::new(
        3,
        ChannelCfg {
            loss: 0,
            dup: 0,
            min_delay: 5,
            jitter: 5,
        },
        requester_cfg(),
        ops,
    );
    let appear = 20_000;
    sim.rwqe_from = appear;
    assert!(sim.run(100_000));
    sim.check_all_succeeded();
    let rnr = u64::from(rnr_timer_us(responder_cfg().rnr_timer));
    let elapsed = appear - sim.first_rnr.unwrap();
    eprintln!(
        "RNR: {} waits over {elapsed} us (timer {rnr} us), done at {} us, {} steps",
        sim.rnr_waits, sim.now, sim.steps
    );
    assert!(sim.rnr_waits >= 2);
    // No busy loop: at most one retry per RNR timer period.
    assert!(
        sim.rnr_waits <= elapsed / rnr + 1,
        "{} waits",
        sim.rnr_waits
    );
    assert!(sim.now >= appear);
}

#[test]
fn rnr_with_loss_still_completes() {
    for seed in 0..10 {
        let mut rng = Rng(seed);
        let ops = mixed_ops(&mut rng, 60);
        let mut sim = Sim::new(seed, lossy(100), requester_cfg(), ops);
        sim.rwqe_from = 5_000;
        assert!(sim.run(200_000), "seed {seed}");
        sim.check_all_succeeded();
    }
}

#[test]
fn peer_gone_ends_in_retry_exceeded() {
    for retry_cnt in 0..=7u8 {
        let cfg = RequesterConfig {
            retry_cnt,
            ..requester_cfg()
        };
        let ops = vec![
            (OpKind::Send, 100),
            (OpKind::Write, 600),
            (OpKind::Read, 10),
        ];
        let mut sim = Sim::new(9, lossy(0), cfg, ops);
        sim.a_to_b.dead = true;
        assert!(sim.run(1_000));
        let st: Vec<Status> = sim.completions.iter().map(|c| c.status).collect();
        assert_eq!(
            st,
            [
                Status::Error(RcError::RetryExceeded),
                Status::Error(RcError::Flushed),
                Status::Error(RcError::Flushed)
            ]
        );
        let first = requester_cfg().initial_psn.get();
        assert_eq!(sim.transmissions[&first], u32::from(retry_cnt) + 1);
        assert_eq!(sim.req.error(), Some(RcError::RetryExceeded));
        assert_eq!(sim.req.deadline(), None);
    }
}
