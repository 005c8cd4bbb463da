// SPDX-License-Identifier: GPL-2.0
//! A lock that a caller can hold across several entry points.
//!
//! The extended verbs work in sequences of calls: `ibv_start_poll` .. `ibv_next_poll` ..
//! `ibv_end_poll` on a CQ, `ibv_wr_start` .. `ibv_wr_*` .. `ibv_wr_complete`/`ibv_wr_abort` on
//! a QP. libibverbs' contract is that the first call takes the object's lock and the last one
//! releases it, so no other thread polls the CQ or posts to the QP in between. A
//! `MutexGuard` cannot outlive a C call, so [`HeldLock`] keeps a `held` flag under its mutex:
//! [`HeldLock::begin`] waits until the flag is clear and may set it, [`HeldLock::step`] runs
//! inside a held sequence, [`HeldLock::end`] clears it. The one-shot verbs (`ibv_poll_cq`,
//! `ibv_post_send`) use [`HeldLock::with`], which waits for a sequence in progress.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Debug)]
struct State<T> {
    value: T,
    held: bool,
}

/// A value behind a mutex that may also be held across calls.
#[derive(Debug)]
pub(crate) struct HeldLock<T> {
    state: Mutex<State<T>>,
    released: Condvar,
}

impl<T> HeldLock<T> {
    /// Unheld, around `value`.
    pub(crate) fn new(value: T) -> Self {
        Self {
            state: Mutex::new(State { value, held: false }),
            released: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_unheld(&self) -> MutexGuard<'_, State<T>> {
        let mut g = self.lock();
        while g.held {
            g = self
                .released
                .wait(g)
                .unwrap_or_else(PoisonError::into_inner);
        }
        g
    }

    /// Runs `f` once no sequence is in progress.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock_unheld().value)
    }

    /// Starts a sequence once no other is in progress: `f` returns its result and whether the
    /// lock stays held (a sequence that ends at once, like a poll of an empty CQ, does not).
    pub(crate) fn begin<R>(&self, f: impl FnOnce(&mut T) -> (R, bool)) -> R {
        let mut g = self.lock_unheld();
        let (r, hold) = f(&mut g.value);
        g.held = hold;
        r
    }

    /// Runs `f` inside the sequence the caller holds (and, if the caller holds none, like a
    /// one-shot call that does not wait).
    pub(crate) fn step<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock().value)
    }

    /// Ends the sequence the caller holds: runs `f`, then releases the lock.
    pub(crate) fn end<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut g = self.lock();
        let r = f(&mut g.value);
        g.held = false;
        drop(g);
        self.released.notify_all();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn sequences_exclude_one_shot_calls() {
        let l = Arc::new(HeldLock::new(Vec::<u32>::new()));
        l.begin(|v| {
            v.push(1);
            ((), true)
        });
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || l2.with(|v| v.push(9)));
        thread::sleep(Duration::from_millis(50));
        l.step(|v| v.push(2));
        l.end(|v| v.push(3));
        t.join().unwrap();
        assert_eq!(l.with(|v| v.clone()), vec![1, 2, 3, 9]);
    }

    #[test]
    fn a_sequence_that_ends_at_once_does_not_hold() {
        let l = HeldLock::new(0u32);
        let r = l.begin(|v| {
            *v += 1;
            ("empty", false)
        });
        assert_eq!(r, "empty");
        // Not held: a second begin does not wait.
        l.begin(|v| ((), *v == 1));
        l.end(|v| *v += 1);
        assert_eq!(l.with(|v| *v), 2);
    }
}
