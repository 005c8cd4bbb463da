// SPDX-License-Identifier: GPL-2.0
//! Raw memory the provider shares with the kernel or receives from the application: the
//! mmapped rings ([`Mapping`]), the send doorbell ([`doorbell`]) and the gathering of inline
//! send data from the application's buffers ([`gather_inline`]).
//!
//! Every access is bounds-checked against the mapping's length; the safe ring logic
//! (`crate::ring`) computes offsets only from validated geometry, so a failed check is a bug
//! and panics (the entry points' `guard` turns that into an error return).
//!
//! A leaf module (it uses only [`crate::sys`]): the ring logic and the entry points build on
//! it.
// Raw memory: mmap/munmap, atomics and copies at computed offsets, the doorbell write().
#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, Ordering};

use oxrdma_uapi::queue::Sge;

use crate::sys;

/// The calling thread's errno.
fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() }
}

/// A shared, read-write mapping of part of the uverbs command file (a ring), unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; all accesses go through methods
// that are either atomic (the header words) or copy bytes under the caller's queue lock, so
// moving or sharing the handle between threads is sound.
unsafe impl Send for Mapping {}
// SAFETY: as above: no method hands out references into the mapping.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset)`; the errno on failure.
    pub(crate) fn map_shared(fd: c_int, offset: u64, len: u64) -> Result<Self, c_int> {
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), usize::try_from(len)) else {
            return Err(libc::EINVAL);
        };
        if len == 0 {
            return Err(libc::EINVAL);
        }
        Self::map(len, libc::MAP_SHARED, fd, off)
    }

    /// A private anonymous mapping of `len` zero bytes, standing in for a ring in tests.
    #[cfg(test)]
    pub(crate) fn anonymous(len: usize) -> Self {
        assert!(len > 0);
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0).expect("anonymous mmap")
    }

    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, off)` for `len > 0` bytes; the
    /// errno on failure.
    fn map(len: usize, flags: c_int, fd: c_int, off: libc::off_t) -> Result<Self, c_int> {
        // SAFETY: a fresh mapping at an address the kernel chooses (NULL hint); it overlaps
        // no Rust object. The result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or(libc::EFAULT)?;
        Ok(Self { base, len })
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The `AtomicU32` at byte offset `off`.
    fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off.checked_add(4).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds and 4-aligned (the base is page-aligned); the mapping lives as
        // long as `self`. The memory is only ever accessed atomically at this offset (the
        // kernel uses READ_ONCE/WRITE_ONCE/smp_* on the same words), and AtomicU32 has the
        // size and alignment of u32.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast::<u32>()) }
    }

    /// Acquire load of the `u32` at `off`.
    pub(crate) fn load_acquire(&self, off: usize) -> u32 {
        self.word(off).load(Ordering::Acquire)
    }

    /// Release store of the `u32` at `off`.
    pub(crate) fn store_release(&self, off: usize, v: u32) {
        self.word(off).store(v, Ordering::Release)
    }

    fn check_range(&self, off: usize, n: usize) {
        assert!(off.checked_add(n).is_some_and(|e| e <= self.len));
    }

    /// Copies `buf.len()` bytes at `off` out of the mapping.
    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) {
        self.check_range(off, buf.len());
        // SAFETY: the source range is inside the mapping (checked) and `buf` is a distinct
        // Rust buffer. The ring protocol keeps the other side from writing this slot while
        // it is read (it is published and not yet consumed).
        unsafe {
            ptr::copy_nonoverlapping(self.base.as_ptr().add(off), buf.as_mut_ptr(), buf.len())
        }
    }

    /// Copies `bytes` into the mapping at `off`.
    pub(crate) fn write(&self, off: usize, bytes: &[u8]) {
        self.check_range(off, bytes.len());
        // SAFETY: the destination range is inside the mapping (checked); no Rust reference
        // into the mapping exists. The ring protocol keeps the other side from reading this
        // slot until its index is published.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.as_ptr().add(off), bytes.len())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mmap returned; no reference into it outlives
        // `self`. A failure (impossible for a valid region) leaves nothing to recover.
        unsafe { libc::munmap(self.base.as_ptr().cast::<c_void>(), self.len) };
    }
}

/// Rings the send doorbell of the QP with uverbs handle `qp_handle`: a legacy `POST_SEND`
/// command with no work requests written to the command file (see
/// `oxrdma_uapi::verbs::DOORBELL_WR_COUNT`). Returns the errno on failure.
pub(crate) fn doorbell(cmd_fd: c_int, qp_handle: u32) -> Result<(), c_int> {
    let mut resp = sys::ib_uverbs_post_send_resp::default();
    let mut cmd = sys::ibv_post_send::default();
    cmd.hdr.command = sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
    cmd.hdr.in_words = (size_of::<sys::ibv_post_send>() / 4) as u16;
    cmd.hdr.out_words = (size_of::<sys::ib_uverbs_post_send_resp>() / 4) as u16;
    // SAFETY: core_payload is a plain-integer member of the (zeroed) command union, valid for
    // any bit pattern; as_mut only forms a reference to it.
    let payload = unsafe { cmd.__bindgen_anon_1.core_payload.as_mut() };
    payload.response = ptr::addr_of_mut!(resp) as u64;
    payload.qp_handle = qp_handle;
    payload.wr_count = oxrdma_uapi::verbs::DOORBELL_WR_COUNT;
    payload.sge_count = 0;
    payload.wqe_size = size_of::<sys::ib_uverbs_send_wr>() as u32;
    // SAFETY: writes the live command buffer of the size given; the kernel writes the
    // response into `resp`, alive across the call.
    let n = unsafe {
        libc::write(
            cmd_fd,
            ptr::addr_of!(cmd).cast::<c_void>(),
            size_of::<sys::ibv_post_send>(),
        )
    };
    if n == size_of::<sys::ibv_post_send>() as isize {
        Ok(())
    } else if n < 0 {
        Err(errno())
    } else {
        Err(libc::EIO)
    }
}

/// Copies the bytes the SGEs of one send work request describe, in order, into `out`, which
/// must be exactly as long as their total length.
///
/// # Safety
/// Each SGE must describe `length` readable bytes at `addr` in this process (the verbs
/// contract for `IBV_SEND_INLINE` work requests: the data is read during `ibv_post_send`).
pub(crate) unsafe fn gather_inline(sges: &[Sge], out: &mut [u8]) {
    let mut pos = 0usize;
    for s in sges {
        let n = s.length as usize;
        let dst = &mut out[pos..pos + n];
        if n != 0 {
            // SAFETY: per the contract the source is n readable bytes; dst is a Rust buffer
            // of n bytes (bounds-checked slicing above); an application buffer cannot
            // overlap the provider's scratch buffer.
            unsafe { ptr::copy_nonoverlapping(s.addr as usize as *const u8, dst.as_mut_ptr(), n) };
        }
        pos += n;
    }
    assert_eq!(pos, out.len(), "inline length mismatch");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_words_and_bytes() {
        let m = Mapping::anonymous(4096);
        assert_eq!(m.len(), 4096);
        assert_eq!(m.load_acquire(64), 0);
        m.store_release(64, 0xdead_beef);
        assert_eq!(m.load_acquire(64), 0xdead_beef);
        m.write(4000, &[1, 2, 3]);
        let mut b = [0u8; 4];
        m.read(3999, &mut b);
        assert_eq!(b, [0, 1, 2, 3]);
    }

    #[test]
    #[should_panic]
    fn out_of_bounds_read_panics() {
        let m = Mapping::anonymous(4096);
        let mut b = [0u8; 8];
        m.read(4090, &mut b);
    }

    #[test]
    #[should_panic]
    fn misaligned_word_panics() {
        Mapping::anonymous(4096).load_acquire(2);
    }

    #[test]
    fn map_shared_refuses_bad_arguments() {
        assert_eq!(Mapping::map_shared(-1, 0, 0).unwrap_err(), libc::EINVAL);
        assert_eq!(
            Mapping::map_shared(-1, u64::MAX, 4096).unwrap_err(),
            libc::EINVAL
        );
        assert_eq!(Mapping::map_shared(-1, 0, 4096).unwrap_err(), libc::EBADF);
    }

    #[test]
    fn gathers_inline_bytes() {
        let a = *b"hello";
        let b = *b", world";
        let sges = [
            Sge {
                addr: a.as_ptr() as u64,
                length: 5,
                lkey: 0,
            },
            Sge {
                addr: 0,
                length: 0,
                lkey: 0,
            },
            Sge {
                addr: b.as_ptr() as u64,
                length: 7,
                lkey: 0,
            },
        ];
        let mut out = [0u8; 12];
        // SAFETY: the SGEs describe the local arrays a and b (and one empty entry).
        unsafe { gather_inline(&sges, &mut out) };
        assert_eq!(&out, b"hello, world");
    }
}
