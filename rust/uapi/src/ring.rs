// SPDX-License-Identifier: GPL-2.0
//! Shared rings between the kernel and a process: layout and index protocol.
//!
//! Every queue the process and the kernel share (SQ, RQ, SRQ, CQ) is one mmapped region:
//!
//! ```text
//!   offset 0                        RingHeader: producer index   (own 64-byte line)
//!   offset 64                                   consumer index   (own 64-byte line)
//!   offset 128                                  flags (arm/doorbell words, own line)
//!   offset RING_HEADER_SIZE (256)   slot 0, slot 1, ... slot (n - 1), each `slot_size` bytes
//! ```
//!
//! `n` is a power of two. Indices are free-running `u32` counters (they wrap at 2^32, not at
//! `n`): the slot of index `i` is `i & (n - 1)`, the ring holds `producer - consumer` entries
//! (wrapping subtraction), it is empty when they are equal and full when the difference is `n`.
//! The producer writes a slot, then publishes it with a release store of the new producer
//! index; the consumer reads the producer index with an acquire load, then the slot, then
//! publishes the new consumer index with a release store.
//!
//! Direction: SQ, RQ and SRQ are produced by the process and consumed by the kernel; the CQ is
//! produced by the kernel and consumed by the process.
//!
//! # The kernel does not trust the process
//!
//! The process can write anything anywhere in the region at any time. The kernel therefore
//! keeps its own copy of *both* indices and only ever uses the shared ones as proposals checked
//! by [`RingView`]: a producer index that claims more than `n` entries, or that moves backwards,
//! is rejected (the queue goes to an error state), and a slot is copied out of shared memory once
//! and validated on the copy, never re-read.

/// Size of the ring header; slots start here.
pub const RING_HEADER_SIZE: usize = 256;
/// Offset of the producer index (a `u32`) in the header.
pub const RING_PRODUCER_OFFSET: usize = 0;
/// Offset of the consumer index (a `u32`) in the header.
pub const RING_CONSUMER_OFFSET: usize = 64;
/// Offset of the flags word (a `u32`, see the `RING_FLAG_*` constants) in the header.
pub const RING_FLAGS_OFFSET: usize = 128;
/// Largest number of slots in a ring.
pub const RING_MAX_SLOTS: u32 = 1 << 16;

/// CQ flags word: the process asks for a completion event on the next completion.
pub const RING_FLAG_ARM_NEXT: u32 = 1 << 0;
/// CQ flags word: the process asks for a completion event on the next solicited completion.
pub const RING_FLAG_ARM_SOLICITED: u32 = 1 << 1;
/// SQ/RQ flags word: the kernel is processing this queue; a doorbell is not needed (a hint
/// only: the kernel re-checks the producer index before it stops processing).
pub const RING_FLAG_KERNEL_BUSY: u32 = 1 << 2;
/// RQ flags word: the QP is in the error state, and the kernel has flushed what the ring held
/// when it got there. A receive the process posts now completes (`IBV_WC_WR_FLUSH_ERR`) only
/// once it rings the QP's doorbell: the process publishes the producer index, fences
/// (sequentially consistent), reads this flag and rings if it is set; the kernel sets it
/// (a sequentially consistent read-modify-write) before it reads the producer index to flush,
/// so one of the two always sees the other. Cleared when the QP is reset.
pub const RING_FLAG_QP_ERROR: u32 = 1 << 3;

/// Rounds a requested depth up to the ring size the kernel allocates: a power of two, at
/// least 1 and at most [`RING_MAX_SLOTS`]; `None` if the request is larger than that.
pub const fn ring_slots(requested: u32) -> Option<u32> {
    if requested > RING_MAX_SLOTS {
        return None;
    }
    if requested <= 1 {
        return Some(1);
    }
    Some(requested.next_power_of_two())
}

/// Bytes of a ring region with `slots` slots of `slot_size` bytes, rounded up to whole pages
/// of `page_size` bytes (a power of two).
pub const fn ring_bytes(slots: u32, slot_size: u32, page_size: usize) -> usize {
    let raw = RING_HEADER_SIZE + slots as usize * slot_size as usize;
    (raw + page_size - 1) & !(page_size - 1)
}

/// Why a shared index was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The other side claims more entries than the ring holds (or moved its index backwards,
    /// which looks the same in wrapping arithmetic).
    Overrun,
}

/// The kernel's (or the provider's) private view of one direction of a ring: its own copies of
/// the two indices and the ring size. Shared memory only ever *proposes* a new index.
///
/// # Invariants
///
/// `slots` is a power of two; `producer - consumer` (wrapping) is at most `slots`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingView {
    slots: u32,
    producer: u32,
    consumer: u32,
}

impl RingView {
    /// An empty ring of `slots` slots (rounded up to a power of two, at least 1, capped at
    /// [`RING_MAX_SLOTS`]).
    pub const fn new(slots: u32) -> Self {
        let slots = match ring_slots(slots) {
            Some(s) => s,
            None => RING_MAX_SLOTS,
        };
        Self {
            slots,
            producer: 0,
            consumer: 0,
        }
    }

    /// Number of slots.
    pub const fn slots(&self) -> u32 {
        self.slots
    }

    /// Producer index (free-running).
    pub const fn producer(&self) -> u32 {
        self.producer
    }

    /// Consumer index (free-running).
    pub const fn consumer(&self) -> u32 {
        self.consumer
    }

    /// Entries produced and not yet consumed.
    pub const fn len(&self) -> u32 {
        self.producer.wrapping_sub(self.consumer)
    }

    /// No entries.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots for the producer.
    pub const fn room(&self) -> u32 {
        self.slots - self.len()
    }

    /// Slot number of a free-running index.
    pub const fn slot(&self, index: u32) -> u32 {
        index & (self.slots - 1)
    }

    /// Consumer side: takes the producer index the other side published. Accepts it if it
    /// moves forward by at most the free room (it may not lap the consumer); returns how many
    /// new entries there are.
    pub fn accept_producer(&mut self, proposed: u32) -> Result<u32, RingError> {
        let claimed = proposed.wrapping_sub(self.consumer);
        if claimed > self.slots {
            return Err(RingError::Overrun);
        }
        let new = proposed.wrapping_sub(self.producer);
        if new > self.slots - self.len() {
            // Fewer entries than before: the producer index moved backwards.
            return Err(RingError::Overrun);
        }
        self.producer = proposed;
        Ok(new)
    }

    /// Producer side: takes the consumer index the other side published. Accepts it if it
    /// moves forward by at most the entries in the ring; returns how many slots were freed.
    pub fn accept_consumer(&mut self, proposed: u32) -> Result<u32, RingError> {
        let freed = proposed.wrapping_sub(self.consumer);
        if freed > self.len() {
            return Err(RingError::Overrun);
        }
        self.consumer = proposed;
        Ok(freed)
    }

    /// Consumer side: the next entry's slot, if any; call [`RingView::consume`] when done.
    pub const fn peek(&self) -> Option<u32> {
        if self.is_empty() {
            None
        } else {
            Some(self.slot(self.consumer))
        }
    }

    /// Consumer side: retires one entry. Returns `false` (and does nothing) if empty.
    pub fn consume(&mut self) -> bool {
        if self.is_empty() {
            return false;
        }
        self.consumer = self.consumer.wrapping_add(1);
        true
    }

    /// Producer side: reserves the next slot, if there is room; publish with
    /// [`RingView::producer`] after writing it.
    pub fn produce(&mut self) -> Option<u32> {
        if self.room() == 0 {
            return None;
        }
        let s = self.slot(self.producer);
        self.producer = self.producer.wrapping_add(1);
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_to_powers_of_two() {
        assert_eq!(ring_slots(0), Some(1));
        assert_eq!(ring_slots(1), Some(1));
        assert_eq!(ring_slots(3), Some(4));
        assert_eq!(ring_slots(1024), Some(1024));
        assert_eq!(ring_slots(RING_MAX_SLOTS), Some(RING_MAX_SLOTS));
        assert_eq!(ring_slots(RING_MAX_SLOTS + 1), None);
        assert_eq!(ring_bytes(4, 64, 4096), 4096);
        assert_eq!(ring_bytes(64, 64, 4096), 8192);
    }

    #[test]
    fn producer_and_consumer_agree() {
        let mut prod = RingView::new(4);
        let mut cons = RingView::new(4);
        for round in 0..10u32 {
            let mut n = 0;
            while prod.produce().is_some() {
                n += 1;
            }
            assert_eq!(n, if round == 0 { 4 } else { 3 });
            assert_eq!(cons.accept_producer(prod.producer()), Ok(n));
            for _ in 0..3 {
                assert!(cons.peek().is_some());
                assert!(cons.consume());
            }
            assert_eq!(prod.accept_consumer(cons.consumer()), Ok(3));
        }
    }

    #[test]
    fn hostile_producer_indices_are_refused() {
        let mut cons = RingView::new(8);
        assert_eq!(cons.accept_producer(9), Err(RingError::Overrun));
        assert_eq!(cons.accept_producer(u32::MAX), Err(RingError::Overrun));
        assert_eq!(cons.accept_producer(5), Ok(5));
        // Backwards.
        assert_eq!(cons.accept_producer(4), Err(RingError::Overrun));
        assert_eq!(cons.producer(), 5);
        assert_eq!(cons.accept_producer(5), Ok(0));
        assert!(cons.consume());
        assert_eq!(cons.accept_producer(1 + 8), Ok(4));
        assert_eq!(cons.accept_producer(1 + 9), Err(RingError::Overrun));
    }

    #[test]
    fn hostile_consumer_indices_are_refused() {
        let mut prod = RingView::new(8);
        for _ in 0..5 {
            prod.produce();
        }
        assert_eq!(prod.accept_consumer(6), Err(RingError::Overrun));
        assert_eq!(prod.accept_consumer(u32::MAX), Err(RingError::Overrun));
        assert_eq!(prod.accept_consumer(2), Ok(2));
        assert_eq!(prod.accept_consumer(1), Err(RingError::Overrun));
        assert_eq!(prod.room(), 5);
    }

    #[test]
    fn indices_wrap_at_2_pow_32() {
        let mut prod = RingView::new(4);
        let mut cons = RingView::new(4);
        prod.producer = u32::MAX - 1;
        prod.consumer = u32::MAX - 1;
        cons.producer = u32::MAX - 1;
        cons.consumer = u32::MAX - 1;
        for _ in 0..4 {
            assert!(prod.produce().is_some());
        }
        assert!(prod.produce().is_none());
        assert_eq!(cons.accept_producer(prod.producer()), Ok(4));
        let slots: [u32; 4] = core::array::from_fn(|_| {
            let s = cons.peek().unwrap();
            cons.consume();
            s
        });
        assert_eq!(slots, [2, 3, 0, 1]);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Produce(u8),
            Consume(u8),
            HostileProducer(u32),
            HostileConsumer(u32),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                any::<u8>().prop_map(Op::Produce),
                any::<u8>().prop_map(Op::Consume),
                any::<u32>().prop_map(Op::HostileProducer),
                any::<u32>().prop_map(Op::HostileConsumer),
            ]
        }

        proptest! {
            /// Whatever the other side publishes, the private view never holds more than
            /// `slots` entries, and honest traffic is never refused.
            #[test]
            fn invariant_holds(slots in 1u32..64, start in any::<u32>(), ops in proptest::collection::vec(op(), 0..200)) {
                let mut prod = RingView::new(slots);
                let mut cons = RingView::new(slots);
                prod.producer = start; prod.consumer = start;
                cons.producer = start; cons.consumer = start;
                // A hostile index that happens to be in range is accepted (it is
                // indistinguishable from honest traffic); from then on the two views differ.
                let mut diverged = false;
                for op in ops {
                    match op {
                        Op::Produce(n) => {
                            for _ in 0..n { if prod.produce().is_none() { break; } }
                            let r = cons.accept_producer(prod.producer());
                            prop_assert!(diverged || r.is_ok());
                        }
                        Op::Consume(n) => {
                            for _ in 0..n { if !cons.consume() { break; } }
                            let r = prod.accept_consumer(cons.consumer());
                            prop_assert!(diverged || r.is_ok());
                        }
                        Op::HostileProducer(p) => diverged |= cons.accept_producer(p).is_ok(),
                        Op::HostileConsumer(c) => diverged |= prod.accept_consumer(c).is_ok(),
                    }
                    prop_assert!(cons.len() <= cons.slots());
                    prop_assert!(prod.len() <= prod.slots());
                    if let Some(s) = cons.peek() { prop_assert!(s < cons.slots()); }
                }
            }
        }
    }
}
