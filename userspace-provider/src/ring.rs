// SPDX-License-Identifier: GPL-2.0
//! The provider's side of the shared rings (layout and index protocol in
//! `oxrdma_uapi::ring`).
//!
//! [`MappedRing`] is a mapped ring region with geometry checked against its length: it reads
//! and publishes the header words with the protocol's orderings and copies whole slots in and
//! out. [`ProducerRing`] adds the process's own producer index for the queues the process
//! produces (SQ, RQ, SRQ); the CQ keeps its own consumer index (`crate::cq`).
//!
//! The kernel's published index is never trusted: a consumer index that is ahead of the
//! provider's producer or more than `slots` behind it leaves no room ([`room`]).

use core::fmt;
use core::sync::atomic::{fence, Ordering};

use oxrdma_uapi::ring::{
    RING_CONSUMER_OFFSET, RING_FLAGS_OFFSET, RING_HEADER_SIZE, RING_MAX_SLOTS, RING_PRODUCER_OFFSET,
};
use oxrdma_uapi::verbs::RingMmap;

use crate::mapping::Mapping;

/// Slots and slot size of a ring, as a create response reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Number of slots (a power of two, at most `RING_MAX_SLOTS`).
    pub(crate) slots: u32,
    /// Bytes per slot.
    pub(crate) slot_size: u32,
}

/// Why the provider refuses the ring geometry of a create response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GeometryError {
    /// Slot count zero, not a power of two, too large, or smaller than the granted depth.
    Slots {
        /// From the response.
        slots: u32,
        /// The least the queue needs.
        min: u32,
    },
    /// Slots too small for the granted SGEs / inline data, or not a multiple of 8.
    SlotSize {
        /// From the response.
        slot_size: u32,
        /// The least the queue needs.
        min: u32,
    },
    /// The mapping is shorter than header plus slots.
    Length {
        /// From the response.
        len: u64,
        /// What header and slots take.
        need: u64,
    },
    /// A ring where none was expected, or none where one was.
    Presence,
}

impl GeometryError {
    /// The errno the create verb fails with.
    pub(crate) fn errno(self) -> i32 {
        libc::EPROTO
    }
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GeometryError::Slots { slots, min } => {
                write!(f, "ring of {slots} slots (need a power of two >= {min})")
            }
            GeometryError::SlotSize { slot_size, min } => {
                write!(
                    f,
                    "ring slots of {slot_size} bytes (need >= {min}, multiple of 8)"
                )
            }
            GeometryError::Length { len, need } => {
                write!(
                    f,
                    "ring mapping of {len} bytes (header and slots need {need})"
                )
            }
            GeometryError::Presence => write!(f, "ring present/absent against the QP's SRQ use"),
        }
    }
}

impl Geometry {
    /// Checks the geometry of a ring that must hold `min_slots` entries of `min_slot_size`
    /// bytes, mapped as `mmap` says.
    pub(crate) fn check(
        self,
        min_slots: u32,
        min_slot_size: u32,
        mmap: &RingMmap,
    ) -> Result<(), GeometryError> {
        if self.slots == 0
            || !self.slots.is_power_of_two()
            || self.slots > RING_MAX_SLOTS
            || self.slots < min_slots
        {
            return Err(GeometryError::Slots {
                slots: self.slots,
                min: min_slots.max(1),
            });
        }
        if self.slot_size < min_slot_size || !self.slot_size.is_multiple_of(8) {
            return Err(GeometryError::SlotSize {
                slot_size: self.slot_size,
                min: min_slot_size,
            });
        }
        let need = self.bytes();
        if mmap.len < need {
            return Err(GeometryError::Length {
                len: mmap.len,
                need,
            });
        }
        Ok(())
    }

    /// Header plus slots, in bytes.
    fn bytes(self) -> u64 {
        RING_HEADER_SIZE as u64 + u64::from(self.slots) * u64::from(self.slot_size)
    }
}

/// Entries in a ring whose producer and consumer indices are as given, if that is a possible
/// state (at most `slots` entries); `None` for a hostile or corrupt index.
pub(crate) fn in_flight(producer: u32, consumer: u32, slots: u32) -> Option<u32> {
    let n = producer.wrapping_sub(consumer);
    (n <= slots).then_some(n)
}

/// Free slots for the producer; 0 when the indices are impossible.
pub(crate) fn room(producer: u32, consumer: u32, slots: u32) -> u32 {
    in_flight(producer, consumer, slots).map_or(0, |n| slots - n)
}

/// Why a queue could not be set up after the kernel created it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetupError {
    /// The response's ring geometry is unusable.
    Geometry(GeometryError),
    /// `mmap` of a ring failed with this errno.
    Mmap(i32),
    /// The QP number in oxrdma's response differs from the core response's.
    QpnMismatch {
        /// From ib_core (`ibv_qp::qp_num`).
        core: u32,
        /// From oxrdma's response.
        drv: u32,
    },
}

impl SetupError {
    /// The errno the create verb fails with.
    pub(crate) fn errno(self) -> i32 {
        match self {
            SetupError::Geometry(g) => g.errno(),
            SetupError::Mmap(e) => e,
            SetupError::QpnMismatch { .. } => libc::EPROTO,
        }
    }
}

impl From<GeometryError> for SetupError {
    fn from(g: GeometryError) -> Self {
        SetupError::Geometry(g)
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Geometry(g) => write!(f, "kernel response: {g}"),
            SetupError::Mmap(e) => write!(f, "mmap of a ring failed: errno {e}"),
            SetupError::QpnMismatch { core, drv } => {
                write!(
                    f,
                    "kernel response: QP number {drv}, core response says {core}"
                )
            }
        }
    }
}

/// Maps the ring `mmap` describes from the command file `cmd_fd`, with a geometry already
/// checked against `mmap` ([`Geometry::check`]).
pub(crate) fn map_ring(
    cmd_fd: i32,
    mmap: &RingMmap,
    geo: Geometry,
) -> Result<MappedRing, SetupError> {
    let mem = Mapping::map_shared(cmd_fd, mmap.offset, mmap.len).map_err(SetupError::Mmap)?;
    Ok(MappedRing::new(mem, geo)?)
}

/// A mapped ring whose geometry fits its mapping.
#[derive(Debug)]
pub(crate) struct MappedRing {
    mem: Mapping,
    geo: Geometry,
}

impl MappedRing {
    /// The ring in `mem`; the geometry must pass [`Geometry::check`] for the mapping's length.
    pub(crate) fn new(mem: Mapping, geo: Geometry) -> Result<Self, GeometryError> {
        let mmap = RingMmap {
            offset: 0,
            len: mem.len() as u64,
        };
        geo.check(1, 8, &mmap)?;
        Ok(Self { mem, geo })
    }

    /// Number of slots.
    pub(crate) fn slots(&self) -> u32 {
        self.geo.slots
    }

    /// Bytes per slot.
    pub(crate) fn slot_size(&self) -> usize {
        self.geo.slot_size as usize
    }

    /// Checks that slots hold at least `min` bytes (what a queue's granted SGEs or inline
    /// data need).
    pub(crate) fn require_slot_size(&self, min: u64) -> Result<(), GeometryError> {
        if (self.geo.slot_size as u64) < min {
            return Err(GeometryError::SlotSize {
                slot_size: self.geo.slot_size,
                min: u32::try_from(min).unwrap_or(u32::MAX),
            });
        }
        Ok(())
    }

    /// The published producer index (acquire: slots it covers are then visible).
    pub(crate) fn producer(&self) -> u32 {
        self.mem.load_acquire(RING_PRODUCER_OFFSET)
    }

    /// The published consumer index (acquire: the slots it frees were read).
    pub(crate) fn consumer(&self) -> u32 {
        self.mem.load_acquire(RING_CONSUMER_OFFSET)
    }

    /// Publishes the producer index (release: the slots written before become visible).
    pub(crate) fn publish_producer(&self, v: u32) {
        self.mem.store_release(RING_PRODUCER_OFFSET, v)
    }

    /// Publishes the consumer index (release: the slots read before may be reused).
    pub(crate) fn publish_consumer(&self, v: u32) {
        self.mem.store_release(RING_CONSUMER_OFFSET, v)
    }

    /// A sequentially consistent fence, then the flags word: after publishing the producer
    /// index, this is the process's half of the doorbell handshake (`DOORBELL_WR_COUNT`).
    pub(crate) fn flags_after_fence(&self) -> u32 {
        fence(Ordering::SeqCst);
        self.mem.load_acquire(RING_FLAGS_OFFSET)
    }

    fn slot_offset(&self, index: u32) -> usize {
        let slot = (index & (self.geo.slots - 1)) as usize;
        RING_HEADER_SIZE + slot * self.slot_size()
    }

    /// Copies the first `buf.len()` (at most the slot size) bytes of the slot of the
    /// free-running `index`.
    pub(crate) fn read_slot(&self, index: u32, buf: &mut [u8]) {
        assert!(buf.len() <= self.slot_size());
        self.mem.read(self.slot_offset(index), buf)
    }

    /// Writes `bytes` (at most the slot size) at the start of the slot of `index`.
    pub(crate) fn write_slot(&self, index: u32, bytes: &[u8]) {
        assert!(bytes.len() <= self.slot_size());
        self.mem.write(self.slot_offset(index), bytes)
    }

    /// Tests: a zeroed ring in anonymous memory; tests act as the kernel through
    /// [`MappedRing::kernel_store`] and [`MappedRing::write_slot`].
    #[cfg(test)]
    pub(crate) fn for_test(slots: u32, slot_size: u32) -> Self {
        let geo = Geometry { slots, slot_size };
        let len = geo.bytes() as usize;
        Self::new(Mapping::anonymous(len), geo).expect("test geometry")
    }

    /// Tests: stores a header word as the kernel would.
    #[cfg(test)]
    pub(crate) fn kernel_store(&self, off: usize, v: u32) {
        self.mem.store_release(off, v)
    }
}

/// Why a work request was not posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PostError {
    /// Malformed for this queue (opcode, SGE count, inline length): `EINVAL`.
    Invalid,
    /// No free slot: `ENOMEM`.
    Full,
}

impl PostError {
    /// The errno `ibv_post_*` returns.
    pub(crate) fn errno(self) -> i32 {
        match self {
            PostError::Invalid => libc::EINVAL,
            PostError::Full => libc::ENOMEM,
        }
    }
}

/// A ring the process produces into: the provider's own producer index, the last one
/// published, and the room known from the kernel's consumer index.
#[derive(Debug)]
pub(crate) struct ProducerRing {
    ring: MappedRing,
    producer: u32,
    published: u32,
    room: u32,
}

impl ProducerRing {
    /// Starts at the producer index in the header (the kernel initialises it, normally to 0).
    pub(crate) fn new(ring: MappedRing) -> Self {
        let producer = ring.producer();
        Self {
            ring,
            producer,
            published: producer,
            room: 0,
        }
    }

    /// The ring.
    pub(crate) fn ring(&self) -> &MappedRing {
        &self.ring
    }

    /// The index of the next free slot, reading the kernel's consumer index when the room
    /// known so far is used up.
    pub(crate) fn reserve(&mut self) -> Result<u32, PostError> {
        if self.room == 0 {
            self.room = room(self.producer, self.ring.consumer(), self.ring.slots());
        }
        if self.room == 0 {
            return Err(PostError::Full);
        }
        Ok(self.producer)
    }

    /// Marks the slot from [`Self::reserve`] as written.
    pub(crate) fn commit(&mut self) {
        debug_assert!(self.room > 0);
        self.producer = self.producer.wrapping_add(1);
        self.room -= 1;
    }

    /// Forgets the slots committed since the last publish (the kernel never saw them).
    pub(crate) fn rollback(&mut self) {
        let n = self.producer.wrapping_sub(self.published);
        self.producer = self.published;
        self.room += n;
    }

    /// Publishes the committed slots; `true` if there were any since the last publish.
    pub(crate) fn publish(&mut self) -> bool {
        if self.producer == self.published {
            return false;
        }
        self.ring.publish_producer(self.producer);
        self.published = self.producer;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm(len: u64) -> RingMmap {
        RingMmap { offset: 0, len }
    }

    #[test]
    fn geometry_checks() {
        let g = |slots, slot_size| Geometry { slots, slot_size };
        assert_eq!(g(8, 64).check(8, 64, &mm(4096)), Ok(()));
        assert_eq!(g(64, 64).check(1, 64, &mm(256 + 64 * 64)), Ok(()));
        assert!(matches!(
            g(64, 64).check(1, 64, &mm(4096)),
            Err(GeometryError::Length { need: 4352, .. })
        ));
        for bad in [0, 3, 6, RING_MAX_SLOTS * 2, u32::MAX] {
            assert!(matches!(
                g(bad, 64).check(1, 64, &mm(u64::MAX)),
                Err(GeometryError::Slots { .. })
            ));
        }
        assert!(matches!(
            g(4, 64).check(8, 64, &mm(4096)),
            Err(GeometryError::Slots { min: 8, .. })
        ));
        assert!(matches!(
            g(4, 32).check(4, 64, &mm(4096)),
            Err(GeometryError::SlotSize { min: 64, .. })
        ));
        assert!(matches!(
            g(4, 68).check(4, 64, &mm(4096)),
            Err(GeometryError::SlotSize { .. })
        ));
        // Huge slot sizes do not overflow the length computation.
        assert!(matches!(
            g(RING_MAX_SLOTS, !7).check(1, 8, &mm(u64::MAX / 2)),
            Ok(())
        ));
    }

    #[test]
    fn room_arithmetic_refuses_hostile_consumers() {
        assert_eq!(room(0, 0, 8), 8);
        assert_eq!(room(5, 2, 8), 5);
        assert_eq!(room(8, 0, 8), 0);
        // Wrapping indices.
        assert_eq!(room(2, u32::MAX - 1, 8), 4);
        // Consumer ahead of the producer, or more than `slots` behind: no room.
        assert_eq!(room(5, 6, 8), 0);
        assert_eq!(room(5, u32::MAX - 10, 8), 0);
        assert_eq!(room(20, 3, 8), 0);
        assert_eq!(in_flight(20, 3, 8), None);
        assert_eq!(in_flight(3, 3, 8), Some(0));
    }

    #[test]
    fn producer_ring_reserves_commits_and_publishes() {
        let ring = MappedRing::for_test(4, 64);
        let mut p = ProducerRing::new(ring);
        for i in 0..4 {
            assert_eq!(p.reserve(), Ok(i));
            p.ring().write_slot(i, &[i as u8; 64]);
            p.commit();
        }
        assert_eq!(p.reserve(), Err(PostError::Full));
        assert!(p.publish());
        assert!(!p.publish());
        assert_eq!(p.ring().producer(), 4);
        let mut b = [0u8; 64];
        p.ring().read_slot(6, &mut b); // slot 2
        assert_eq!(b, [2; 64]);
        // The kernel consumes two: room again.
        p.ring().kernel_store(RING_CONSUMER_OFFSET, 2);
        assert_eq!(p.reserve(), Ok(4));
        p.commit();
        assert_eq!(p.reserve(), Ok(5));
        p.commit();
        assert_eq!(p.reserve(), Err(PostError::Full));
        // A hostile consumer index (ahead of the producer) gives no room.
        p.ring().kernel_store(RING_CONSUMER_OFFSET, 100);
        assert_eq!(p.reserve(), Err(PostError::Full));
        p.ring().kernel_store(RING_CONSUMER_OFFSET, 6);
        assert_eq!(p.reserve(), Ok(6));
        // Committed but unpublished slots can be taken back.
        assert!(p.publish());
        p.commit();
        assert_eq!(p.reserve(), Ok(7));
        p.commit();
        p.rollback();
        assert_eq!(p.reserve(), Ok(6));
        assert!(!p.publish());
        assert_eq!(p.ring().producer(), 6);
        for i in 6..10 {
            assert_eq!(p.reserve(), Ok(i));
            p.commit();
        }
        assert_eq!(p.reserve(), Err(PostError::Full));
    }

    #[test]
    fn mapped_ring_refuses_a_short_mapping() {
        let m = Mapping::anonymous(4096);
        let geo = Geometry {
            slots: 64,
            slot_size: 64,
        };
        assert!(matches!(
            MappedRing::new(m, geo),
            Err(GeometryError::Length { .. })
        ));
    }

    #[test]
    fn flags_word() {
        let r = MappedRing::for_test(1, 64);
        assert_eq!(r.flags_after_fence(), 0);
        r.kernel_store(RING_FLAGS_OFFSET, 4);
        assert_eq!(r.flags_after_fence(), 4);
    }
}
