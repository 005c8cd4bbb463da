// SPDX-License-Identifier: GPL-2.0
//! A table of live objects by index, under a spinlock that packet reception may take: the
//! device's QPs (by QP number), MRs (by key) and AHs (by number).
//!
//! Lookups happen per packet, in softirq context, so the lock is a `SpinLockBh` (a
//! `SpinLockIrq` for AHs, which ib_core also makes with interrupts off) and nothing allocates
//! under it: the slot array grows outside the lock, and an object is built between
//! reserving its slot (which fixes its index, hence its number or key) and filling it.

use crate::ox::random;
use kernel::sync::lock::{Backend, Lock};
use kernel::{alloc::Flags, alloc::KVec, prelude::*, sync::Arc};

enum State<T> {
    Free,
    Reserved,
    Live(Arc<T>),
}

struct Slot<T> {
    /// Bumped each time the slot is reserved: part of an MR key, so that a key of an earlier
    /// MR in the same slot does not match.
    tag: u8,
    state: State<T>,
}

/// The slots; see the module documentation.
pub(crate) struct Table<T> {
    slots: KVec<Slot<T>>,
    /// Reserved and live slots.
    used: usize,
    /// How a slot's tag moves on at each reservation: by one, or by a random step.
    tags: Tags,
}

/// How the tags of a table's slots are chosen. A new slot's first tag is random either way.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tags {
    /// Each reservation of a slot adds one: the most reservations before a tag comes back
    /// (QP numbers: ib_cm must not take a new QP for an old connection's peer).
    Sequential,
    /// Each reservation adds a random step of 1 to 255: the tag differs from the slot's last
    /// one and cannot be told from it (MR keys, which a peer presents as R_Keys).
    Random,
}

/// A reserved slot: its index and the tag it got.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reservation {
    pub(crate) index: usize,
    pub(crate) tag: u8,
}

impl<T> Table<T> {
    pub(crate) const fn new(tags: Tags) -> Self {
        Self {
            slots: KVec::new(),
            used: 0,
            tags,
        }
    }

    fn take_free(&mut self) -> Option<Reservation> {
        let index = self
            .slots
            .iter()
            .position(|s| matches!(s.state, State::Free))?;
        let step = match self.tags {
            Tags::Sequential => 1,
            Tags::Random => 1 + (random::u32() % 255) as u8,
        };
        let s = &mut self.slots[index];
        s.tag = s.tag.wrapping_add(step);
        s.state = State::Reserved;
        self.used += 1;
        Some(Reservation { index, tag: s.tag })
    }

    /// Reserves a slot of the table behind `lock`, at most `max` in use at once (`ENOSPC`
    /// beyond). The table grows (outside the lock) with allocations of `gfp`: `GFP_KERNEL`
    /// may sleep, `GFP_ATOMIC` does not.
    pub(crate) fn reserve<B: Backend>(
        lock: &Lock<Self, B>,
        max: usize,
        gfp: Flags,
    ) -> Result<Reservation> {
        loop {
            let len = {
                let mut t = lock.lock();
                if t.used >= max {
                    return Err(ENOSPC);
                }
                if let Some(r) = t.take_free() {
                    return Ok(r);
                }
                if t.slots.len() < t.slots.capacity() {
                    let index = t.slots.len();
                    let tag = random::u32() as u8;
                    // Within capacity: no allocation.
                    t.slots.push(
                        Slot {
                            tag,
                            state: State::Reserved,
                        },
                        GFP_ATOMIC,
                    )?;
                    t.used += 1;
                    return Ok(Reservation { index, tag });
                }
                t.slots.len()
            };
            // Grow: a bigger array, filled under the lock without allocating.
            let want = (len * 2).clamp(16, max);
            let mut bigger: KVec<Slot<T>> = KVec::with_capacity(want, gfp)?;
            let mut t = lock.lock();
            if t.slots.capacity() >= want {
                continue;
            }
            // Within `bigger`'s capacity: no allocation.
            for s in core::mem::replace(&mut t.slots, KVec::new()) {
                bigger.push(s, GFP_ATOMIC)?;
            }
            t.slots = bigger;
        }
    }

    /// Adds the object `make(key)` builds to the table behind `lock` (see [`Table::reserve`]
    /// for `max` and `gfp`), where `key` is `index << 8 | tag`: the slot and its reservation
    /// count, so that the key of an earlier object in the same slot does not match. A failed
    /// `make` gives the slot back.
    pub(crate) fn insert_keyed<B: Backend>(
        lock: &Lock<Self, B>,
        max: usize,
        gfp: Flags,
        make: impl FnOnce(u32) -> Result<Arc<T>>,
    ) -> Result<Arc<T>> {
        let r = Self::reserve(lock, max.min(1 << 24), gfp)?;
        let key = ((r.index as u32) << 8) | u32::from(r.tag);
        match make(key) {
            Ok(obj) => {
                lock.lock().fill(r, obj.clone());
                Ok(obj)
            }
            Err(e) => {
                lock.lock().cancel(r);
                Err(e)
            }
        }
    }

    /// Makes a reserved slot live with `obj`.
    pub(crate) fn fill(&mut self, r: Reservation, obj: Arc<T>) {
        if let Some(s) = self.slots.get_mut(r.index) {
            if matches!(s.state, State::Reserved) && s.tag == r.tag {
                s.state = State::Live(obj);
            }
        }
    }

    /// Gives a reserved slot back (its object could not be built).
    pub(crate) fn cancel(&mut self, r: Reservation) {
        if let Some(s) = self.slots.get_mut(r.index) {
            if matches!(s.state, State::Reserved) && s.tag == r.tag {
                s.state = State::Free;
                self.used -= 1;
            }
        }
    }

    /// The live object at `index`.
    pub(crate) fn get(&self, index: usize) -> Option<Arc<T>> {
        match &self.slots.get(index)?.state {
            State::Live(o) => Some(o.clone()),
            _ => None,
        }
    }

    /// Removes the live object at `index` if `pred` accepts it; returns it (drop it outside
    /// the lock).
    pub(crate) fn remove(&mut self, index: usize, pred: impl FnOnce(&T) -> bool) -> Option<Arc<T>> {
        let s = self.slots.get_mut(index)?;
        match &s.state {
            State::Live(o) if pred(o) => {}
            _ => return None,
        }
        self.used -= 1;
        match core::mem::replace(&mut s.state, State::Free) {
            State::Live(o) => Some(o),
            _ => None,
        }
    }

    /// Empties the table (teardown); returns its objects, to drop outside the lock.
    pub(crate) fn take_all(&mut self) -> Taken<T> {
        self.used = 0;
        Taken(core::mem::replace(&mut self.slots, KVec::new()))
    }
}

/// The contents of an emptied table.
pub(crate) struct Taken<T>(KVec<Slot<T>>);

impl<T> Taken<T> {
    /// The live objects.
    pub(crate) fn live(&self) -> impl Iterator<Item = &Arc<T>> {
        self.0.iter().filter_map(|s| match &s.state {
            State::Live(o) => Some(o),
            _ => None,
        })
    }
}
