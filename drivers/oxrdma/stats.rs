// SPDX-License-Identifier: GPL-2.0
//! A device's counters, reported by `rdma statistic show link DEV/1` and in sysfs
//! (`hw_counters/`). The names follow rxe's where the meaning is the same.

use crate::ox::rdma::attrs::HwStat;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::c_str;

/// What is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    /// Packets sent.
    SentPkts,
    /// Packets received for a QP of the device, ICRC good.
    RcvdPkts,
    /// Positive acknowledges sent (responder).
    AckSent,
    /// NAKs sent (responder): sequence error, invalid request, access or operational error.
    NakSent,
    /// RNR NAKs sent (responder: no receive WQE).
    RnrNakSent,
    /// Duplicate requests received (re-acknowledged or replayed).
    DuplicateRequest,
    /// Requests ahead of the expected PSN (a gap: a lost packet).
    OutOfSeqRequest,
    /// NAKs received (requester).
    RcvdNak,
    /// RNR NAKs received (requester waits and retries).
    RcvdRnrNak,
    /// Retransmissions after a timeout or a sequence error NAK (requester).
    Retransmits,
    /// Work requests failed because the retries ran out.
    RetryExceeded,
    /// Packets dropped for a bad ICRC.
    IcrcErr,
    /// Packets dropped before reaching a QP (malformed, unknown QP).
    RxDrop,
    /// Packets that could not be sent (no route, no memory).
    SendErr,
    /// Packets of `SentPkts` that left in a run (one segmentation offload skb), cut on the way
    /// or not.
    SentGsoPkts,
    /// Packets of `RcvdPkts` that arrived in a run of segmentation offload not cut on the way.
    RcvdGsoPkts,
}

const N: usize = 16;

/// The names, in [`Counter`] order.
pub(crate) const NAMES: [HwStat; N] = [
    HwStat::new(c_str!("sent_pkts")),
    HwStat::new(c_str!("rcvd_pkts")),
    HwStat::new(c_str!("ack_sent")),
    HwStat::new(c_str!("nak_sent")),
    HwStat::new(c_str!("send_rnr_err")),
    HwStat::new(c_str!("duplicate_request")),
    HwStat::new(c_str!("out_of_seq_request")),
    HwStat::new(c_str!("rcvd_nak")),
    HwStat::new(c_str!("rcvd_rnr_err")),
    HwStat::new(c_str!("retransmits")),
    HwStat::new(c_str!("retry_exceeded_err")),
    HwStat::new(c_str!("icrc_err")),
    HwStat::new(c_str!("rx_drop")),
    HwStat::new(c_str!("send_err")),
    HwStat::new(c_str!("sent_gso_pkts")),
    HwStat::new(c_str!("rcvd_gso_pkts")),
];

/// The counters of one device.
pub(crate) struct Stats([AtomicU64; N]);

impl Stats {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; N])
    }

    /// Counts one `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Counts `n` of `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Copies the values, in [`NAMES`] order, into `out`.
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.0.iter()) {
            *o = v.load(Ordering::Relaxed);
        }
    }
}
