// SPDX-License-Identifier: GPL-2.0
//! Receive queues (a QP's RQ or an SRQ): `ibv_recv_wr` to receive slots.
//!
//! A receive slot is a [`RecvWqe`] header followed by `num_sge` [`Sge`]s. The kernel reads the
//! ring when a packet arrives, so posting only publishes the producer index; the one doorbell
//! is for a QP in the error state ([`RING_FLAG_QP_ERROR`]), whose receives the kernel flushes.

use oxrdma_uapi::queue::{RecvWqe, Sge, RECV_WQE_SIZE, SGE_SIZE};
use oxrdma_uapi::ring::RING_FLAG_QP_ERROR;

use crate::ring::{GeometryError, MappedRing, PostError, ProducerRing};

/// One `ibv_recv_wr`, as plain values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvWr<'a> {
    /// `wr_id`.
    pub(crate) wr_id: u64,
    /// `sg_list[..num_sge]`.
    pub(crate) sges: &'a [Sge],
}

/// The least receive slot size for `max_sge` SGEs.
pub(crate) fn min_slot_size(max_sge: u32) -> u64 {
    RECV_WQE_SIZE as u64 + u64::from(max_sge) * SGE_SIZE as u64
}

/// Writes the receive slot for `wr` into `slot`; returns the bytes used.
pub(crate) fn encode_recv(
    wr: &RecvWr<'_>,
    max_sge: u32,
    slot: &mut [u8],
) -> Result<usize, PostError> {
    let n = wr.sges.len();
    let used = RECV_WQE_SIZE + n * SGE_SIZE;
    if n > max_sge as usize || used > slot.len() {
        return Err(PostError::Invalid);
    }
    let hdr = RecvWqe {
        wr_id: wr.wr_id,
        num_sge: n as u32,
        reserved: 0,
    };
    slot[..RECV_WQE_SIZE].copy_from_slice(&hdr.to_bytes());
    for (dst, s) in slot[RECV_WQE_SIZE..used]
        .chunks_exact_mut(SGE_SIZE)
        .zip(wr.sges)
    {
        dst.copy_from_slice(&s.to_bytes());
    }
    Ok(used)
}

/// The producer side of a receive ring.
#[derive(Debug)]
pub(crate) struct RecvQueue {
    ring: ProducerRing,
    max_sge: u32,
    scratch: Vec<u8>,
}

impl RecvQueue {
    /// The queue over its mapped ring, whose slots must hold `max_sge` SGEs.
    pub(crate) fn new(ring: MappedRing, max_sge: u32) -> Result<Self, GeometryError> {
        ring.require_slot_size(min_slot_size(max_sge))?;
        let scratch = vec![0; ring.slot_size()];
        Ok(Self {
            ring: ProducerRing::new(ring),
            max_sge,
            scratch,
        })
    }

    /// Writes one work request into the next free slot (not yet published).
    pub(crate) fn post(&mut self, wr: &RecvWr<'_>) -> Result<(), PostError> {
        let used = encode_recv(wr, self.max_sge, &mut self.scratch)?;
        let index = self.ring.reserve()?;
        self.ring.ring().write_slot(index, &self.scratch[..used]);
        self.ring.commit();
        Ok(())
    }

    /// Publishes what [`Self::post`] wrote (release store of the producer index); `true` if
    /// the QP's doorbell must be rung: there was something new, and after a sequentially
    /// consistent fence the kernel says the QP is in the error state (it flushes what the
    /// doorbell shows it). The kernel never says so for an SRQ.
    pub(crate) fn finish(&mut self) -> bool {
        self.ring.publish() && self.ring.ring().flags_after_fence() & RING_FLAG_QP_ERROR != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdma_uapi::ring::{RING_CONSUMER_OFFSET, RING_FLAGS_OFFSET};

    fn sge(addr: u64) -> Sge {
        Sge {
            addr,
            length: 64,
            lkey: 5,
        }
    }

    #[test]
    fn encodes_header_and_sges() {
        let sges = [sge(0x1000), sge(0x2000)];
        let mut slot = [0xffu8; 64];
        let n = encode_recv(
            &RecvWr {
                wr_id: 0x55,
                sges: &sges,
            },
            2,
            &mut slot,
        )
        .unwrap();
        assert_eq!(n, 48);
        assert_eq!(
            RecvWqe::from_bytes(slot[..16].try_into().unwrap()),
            RecvWqe {
                wr_id: 0x55,
                num_sge: 2,
                reserved: 0
            }
        );
        assert_eq!(Sge::from_bytes(slot[16..32].try_into().unwrap()), sges[0]);
        assert_eq!(Sge::from_bytes(slot[32..48].try_into().unwrap()), sges[1]);
        // Zero SGEs is a valid receive (zero-length messages, RDMA WRITE with immediate).
        assert_eq!(
            encode_recv(
                &RecvWr {
                    wr_id: 1,
                    sges: &[]
                },
                2,
                &mut slot
            ),
            Ok(16)
        );
    }

    #[test]
    fn refuses_too_many_sges() {
        let sges = [sge(0); 3];
        let mut slot = [0u8; 64];
        let wr = RecvWr {
            wr_id: 1,
            sges: &sges,
        };
        assert_eq!(encode_recv(&wr, 2, &mut slot), Err(PostError::Invalid));
        // Allowed by max_sge but not by the slot.
        let mut small = [0u8; 32];
        assert_eq!(encode_recv(&wr, 3, &mut small), Err(PostError::Invalid));
    }

    #[test]
    fn queue_fills_publishes_and_refills() {
        let mut q = RecvQueue::new(MappedRing::for_test(2, 32), 1).unwrap();
        let one = [sge(0x1000)];
        let wr = RecvWr {
            wr_id: 7,
            sges: &one,
        };
        q.post(&wr).unwrap();
        q.post(&wr).unwrap();
        assert_eq!(q.post(&wr), Err(PostError::Full));
        assert_eq!(q.ring.ring().producer(), 0);
        assert!(!q.finish(), "no doorbell for a QP that is not in error");
        assert_eq!(q.ring.ring().producer(), 2);
        q.ring.ring().kernel_store(RING_CONSUMER_OFFSET, 2);
        q.post(&wr).unwrap();
        q.post(&wr).unwrap();
        // The kernel says the QP is in the error state: posting rings, publishing nothing
        // new does not.
        q.ring
            .ring()
            .kernel_store(RING_FLAGS_OFFSET, RING_FLAG_QP_ERROR);
        assert!(q.finish(), "a QP in error: doorbell");
        assert!(!q.finish(), "nothing new: no doorbell");
        assert_eq!(q.ring.ring().producer(), 4);
        // A consumer index ahead of the producer: no room, nothing written.
        q.ring.ring().kernel_store(RING_CONSUMER_OFFSET, 9);
        assert_eq!(q.post(&wr), Err(PostError::Full));
        // Too many SGEs for the queue.
        assert_eq!(
            q.post(&RecvWr {
                wr_id: 1,
                sges: &[sge(0), sge(1)]
            }),
            Err(PostError::Invalid)
        );
    }

    #[test]
    fn queue_needs_slots_for_its_sges() {
        assert!(matches!(
            RecvQueue::new(MappedRing::for_test(2, 32), 2),
            Err(GeometryError::SlotSize { min: 48, .. })
        ));
    }
}
