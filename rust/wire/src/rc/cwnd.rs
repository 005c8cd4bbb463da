// SPDX-License-Identifier: GPL-2.0

//! The requester's congestion window: how many PSNs it lets be
//! unacknowledged at once, within the fixed PSN window (loss-based
//! additive increase, multiplicative decrease, in PSNs).
//!
//! Go-back-N resends everything from the first unacknowledged PSN on each
//! recovery. Without a congestion window, a receiver that falls behind (its
//! queue grows past the ACK timeout, or drops) gets the whole window again on
//! every timeout and NAK, most of it duplicates it already has, and falls
//! further behind: two thirds of what a KASAN kernel under emulation received
//! were duplicates. With it, a recovery resends little:
//!
//! * it starts at the full window (a path that loses nothing runs as before);
//! * a sequence error NAK halves it (not below [`MIN_CWND`]);
//! * a retransmission timeout sets it to [`MIN_CWND`], half of what it was
//!   becoming the threshold up to which it grows fast;
//! * each acknowledged PSN grows it by one below that threshold (doubling per
//!   round trip), and by one per window's worth of acknowledged PSNs above it.

/// The smallest congestion window: one acknowledgement's worth of packets
/// from a responder that coalesces acknowledgements (the requester asks for
/// one on the packet that fills the window anyway).
pub const MIN_CWND: u32 = 16;

/// A congestion window, in PSNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cwnd {
    /// The window now, in `MIN_CWND.min(max)..=max`.
    cwnd: u32,
    /// Below it, the window grows by one per acknowledged PSN.
    ssthresh: u32,
    /// PSNs acknowledged towards the next increase above `ssthresh`.
    acked: u32,
    /// The fixed PSN window: the largest the congestion window gets.
    max: u32,
}

impl Cwnd {
    /// A congestion window as large as `max` (the PSN window; at least 1).
    pub const fn new(max: u32) -> Self {
        let max = if max == 0 { 1 } else { max };
        Cwnd {
            cwnd: max,
            ssthresh: max,
            acked: 0,
            max,
        }
    }

    /// The PSNs that may be unacknowledged now.
    pub const fn get(&self) -> u32 {
        self.cwnd
    }

    fn floor(&self) -> u32 {
        MIN_CWND.min(self.max)
    }

    /// `n` PSNs were newly acknowledged.
    pub fn on_ack(&mut self, n: u32) {
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(n);
        } else {
            self.acked = self.acked.saturating_add(n);
            while self.acked >= self.cwnd && self.cwnd < self.max {
                self.acked -= self.cwnd;
                self.cwnd += 1;
            }
        }
        if self.cwnd >= self.max {
            self.cwnd = self.max;
            self.acked = 0;
        }
    }

    /// A sequence error NAK (or an implicit one) made the requester go back.
    pub fn on_nak(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(self.floor());
        self.cwnd = self.ssthresh;
        self.acked = 0;
    }

    /// The retransmission timer expired with PSNs unacknowledged.
    pub fn on_timeout(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(self.floor());
        self.cwnd = self.floor();
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_full_and_stays_full_without_loss() {
        let mut c = Cwnd::new(256);
        assert_eq!(c.get(), 256);
        for _ in 0..1000 {
            c.on_ack(16);
        }
        assert_eq!(c.get(), 256);
    }

    #[test]
    fn nak_halves_down_to_the_floor() {
        let mut c = Cwnd::new(256);
        c.on_nak();
        assert_eq!(c.get(), 128);
        for _ in 0..10 {
            c.on_nak();
        }
        assert_eq!(c.get(), MIN_CWND);
    }

    #[test]
    fn timeout_drops_to_the_floor_then_grows_fast_to_half_then_slowly() {
        let mut c = Cwnd::new(256);
        c.on_timeout();
        assert_eq!(c.get(), MIN_CWND);
        // Fast: one per acknowledged PSN, up to the threshold (128).
        c.on_ack(16);
        assert_eq!(c.get(), 32);
        c.on_ack(32);
        c.on_ack(64);
        assert_eq!(c.get(), 128);
        // Slow: one per window's worth.
        c.on_ack(127);
        assert_eq!(c.get(), 128);
        c.on_ack(1);
        assert_eq!(c.get(), 129);
        for _ in 0..10_000 {
            c.on_ack(64);
        }
        assert_eq!(c.get(), 256);
    }

    #[test]
    fn small_windows_are_their_own_floor() {
        let mut c = Cwnd::new(8);
        c.on_timeout();
        assert_eq!(c.get(), 8);
        c.on_nak();
        assert_eq!(c.get(), 8);
        let mut z = Cwnd::new(0);
        z.on_timeout();
        assert_eq!(z.get(), 1);
    }

    #[test]
    fn never_leaves_its_bounds() {
        // A pseudo-random walk over the three events.
        let mut c = Cwnd::new(300);
        let mut x: u32 = 0x1234_5678;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            match x % 8 {
                0 => c.on_nak(),
                1 => c.on_timeout(),
                _ => c.on_ack(x >> 24),
            }
            assert!((MIN_CWND..=300).contains(&c.get()), "{c:?}");
        }
    }
}
