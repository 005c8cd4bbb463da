// SPDX-License-Identifier: GPL-2.0
//! Work requests and work completions of kernel verbs users (ULPs such as NVMe-oF, iSER,
//! NFS/RDMA) as safe Rust values: the chains a `post_send` / `post_recv` / `post_srq_recv`
//! hands over, and the `ib_wc` array a `poll_cq` fills.
//!
//! Posting and polling may happen in any context (process, softirq, hard interrupt) and
//! concurrently: a driver's hooks must not sleep.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_send_wr` and its containers `ib_rdma_wr`,
//! `ib_atomic_wr`, `ib_reg_wr`, `ib_ud_wr`; `struct ib_recv_wr`, `struct ib_wc`).

use super::super::bindings;
use super::events::QpEvents;
use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr::NonNull;
use kernel::{ffi::c_int, prelude::*};
/// A scatter/gather element of a kernel work request: a DMA address (a kernel virtual
/// address for oxrdma, see [`super::kmem`]), a length and the L_Key of the MR it is in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// DMA address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// L_Key.
    pub lkey: u32,
}

const _: () = {
    assert!(size_of::<Sge>() == size_of::<bindings::ib_sge>());
    assert!(core::mem::offset_of!(Sge, length) == core::mem::offset_of!(bindings::ib_sge, length));
    assert!(core::mem::offset_of!(Sge, lkey) == core::mem::offset_of!(bindings::ib_sge, lkey));
};

/// What a send work request asks for, with its operation's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data (as the user gave it, big-endian on the wire).
    SendWithImm(u32),
    /// SEND that invalidates the given R_Key at the receiver.
    SendWithInv(u32),
    /// RDMA WRITE.
    Write {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data.
    WriteWithImm {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ.
    Read {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA READ that invalidates the local key `inv` once the data is in (iWARP ULPs).
    ReadWithInv {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// The local key to invalidate.
        inv: u32,
    },
    /// 8-byte compare and swap.
    CompareSwap {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
    /// 8-byte fetch and add.
    FetchAdd {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
    /// Invalidate a fast-registration MR's key.
    LocalInv(u32),
    /// Make a fast-registration MR valid over the pages `ib_map_mr_sg` gave it.
    RegMr {
        /// The new L_Key and R_Key (the MR's index bits with the user's low byte).
        key: u32,
        /// `IB_ACCESS_*` rights.
        access: u32,
        /// Address of the MR's first byte.
        iova: u64,
        /// Bytes.
        length: u64,
    },
}

/// Where a datagram (UD or GSI QP) goes.
pub struct UdDest<'a, A> {
    /// The address handle's data (a live AH of the QP's device).
    pub ah: &'a A,
    /// Destination QP.
    pub remote_qpn: u32,
    /// Destination Q_Key (high bit set: use the QP's own Q_Key).
    pub remote_qkey: u32,
    /// P_Key index (GSI only).
    pub pkey_index: u16,
}

/// A send work request of a kernel user.
pub struct SendWr<'a, A = ()> {
    /// Returned in the completion (for `wr_cqe` users, the pointer's value).
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// A completion is wanted (`IB_SEND_SIGNALED`).
    pub signaled: bool,
    /// Solicited event at the receiver.
    pub solicited: bool,
    /// Wait for earlier RDMA READs and atomics first.
    pub fence: bool,
    /// The SGEs point at the data itself (kernel addresses), to be copied at post time.
    pub inline: bool,
    /// The data.
    pub sges: &'a [Sge],
    /// The destination of a UD or GSI QP's request.
    pub ud: Option<UdDest<'a, A>>,
}

impl<A> SendWr<'_, A> {
    /// Bytes the SGEs describe.
    pub fn len(&self) -> u64 {
        self.sges.iter().map(|s| u64::from(s.length)).sum()
    }

    /// Whether the SGEs describe no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the bytes of an inline WR's SGEs, one after the other, to the start of `dst`
    /// (which must hold [`SendWr::len`] bytes).
    pub fn copy_inline(&self, dst: &mut [u8]) -> Result {
        if !self.inline || self.len() > dst.len() as u64 {
            return Err(EINVAL);
        }
        let mut at = 0;
        for s in self.sges {
            let n = s.length as usize;
            // SAFETY: `IB_SEND_INLINE` SGEs are kernel addresses readable for `length` bytes
            // during the post call (verbs contract); `dst` has room (checked above).
            unsafe { bindings::oxrdma_copy_kernel(dst[at..].as_mut_ptr().cast(), s.addr, n) };
            at += n;
        }
        Ok(())
    }
}

/// A receive work request of a kernel user.
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where received data goes.
    pub sges: &'a [Sge],
}

/// The operation a work completion reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    /// SEND (any kind).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ.
    RdmaRead,
    /// Compare and swap.
    CompSwap,
    /// Fetch and add.
    FetchAdd,
    /// Local invalidate.
    LocalInv,
    /// Fast registration.
    RegMr,
    /// A receive.
    Recv,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

impl WcOpcode {
    fn to_raw(self) -> bindings::ib_wc_opcode {
        match self {
            Self::Send => bindings::ib_wc_opcode_IB_WC_SEND,
            Self::RdmaWrite => bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
            Self::RdmaRead => bindings::ib_wc_opcode_IB_WC_RDMA_READ,
            Self::CompSwap => bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
            Self::FetchAdd => bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
            Self::LocalInv => bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
            Self::RegMr => bindings::ib_wc_opcode_IB_WC_REG_MR,
            Self::Recv => bindings::ib_wc_opcode_IB_WC_RECV,
            Self::RecvRdmaWithImm => bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
        }
    }
}

/// A work completion for a kernel user.
pub struct Wc<'a> {
    /// The WR's `wr_id`.
    pub wr_id: u64,
    /// The IBA completion status (`IB_WC_*`: the same numbers as the uverbs ABI's).
    pub status: u8,
    /// The operation.
    pub opcode: WcOpcode,
    /// Driver detail of an error.
    pub vendor_err: u32,
    /// Bytes received or transferred.
    pub byte_len: u32,
    /// Immediate data, as the sender gave it.
    pub imm: Option<u32>,
    /// The R_Key a SEND with invalidate invalidated.
    pub invalidated: Option<u32>,
    /// The QP it completes work of.
    pub qp: &'a QpEvents,
    /// UD receives: the sending QP.
    pub src_qp: u32,
    /// UD receives: the first 40 bytes of the buffer hold the network header (`IB_WC_GRH`).
    pub grh: bool,
    /// UD receives: the network header's type (`IB_WC_WITH_NETWORK_HDR_TYPE`).
    pub network: Option<NetworkType>,
    /// UD receives: the sender's MAC address (`IB_WC_WITH_SMAC`).
    pub smac: Option<[u8; 6]>,
    /// UD receives: the P_Key index.
    pub pkey_index: u16,
    /// UD receives: the service level.
    pub sl: u8,
}

/// The network header of a received datagram (`enum rdma_network_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkType {
    /// RoCE v1: an InfiniBand GRH.
    RoceV1,
    /// RoCE v2 over IPv4.
    Ipv4,
    /// RoCE v2 over IPv6.
    Ipv6,
}

impl NetworkType {
    fn to_raw(self) -> u8 {
        (match self {
            Self::RoceV1 => bindings::rdma_network_type_RDMA_NETWORK_ROCE_V1,
            Self::Ipv4 => bindings::rdma_network_type_RDMA_NETWORK_IPV4,
            Self::Ipv6 => bindings::rdma_network_type_RDMA_NETWORK_IPV6,
        }) as u8
    }
}

/// The caller's `ib_wc` array being filled by a poll.
///
/// # Invariants
///
/// `out` is valid for writes of `cap` entries for `'a`; `n <= cap` entries are written.
pub struct WcSink<'a> {
    out: *mut bindings::ib_wc,
    cap: usize,
    n: usize,
    _p: PhantomData<&'a mut bindings::ib_wc>,
}

impl WcSink<'_> {
    /// Whether there is room for another completion.
    pub fn has_room(&self) -> bool {
        self.n < self.cap
    }

    /// Writes `wc` into the next entry. A completion of a QP that was destroyed since is
    /// dropped (there is no `ib_qp` to name). Returns whether it was written.
    pub fn push(&mut self, wc: &Wc<'_>) -> bool {
        if !self.has_room() {
            return false;
        }
        wc.qp.0.with(|qp| self.write(wc, qp.as_ptr())).is_some()
    }

    fn write(&mut self, wc: &Wc<'_>, qp: *mut bindings::ib_qp) {
        let mut flags = 0;
        let mut ex = bindings::ib_wc__bindgen_ty_2::default();
        if let Some(imm) = wc.imm {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
            ex.imm_data = imm;
        } else if let Some(key) = wc.invalidated {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
            ex.invalidate_rkey = key;
        }
        if wc.grh {
            flags |= bindings::ib_wc_flags_IB_WC_GRH;
        }
        let mut network_hdr_type = 0;
        if let Some(n) = wc.network {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
            network_hdr_type = n.to_raw();
        }
        let mut smac = [0u8; 6];
        if let Some(m) = wc.smac {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_SMAC;
            smac = m;
        }
        let mut e = bindings::ib_wc {
            status: u32::from(wc.status),
            opcode: wc.opcode.to_raw(),
            vendor_err: wc.vendor_err,
            byte_len: wc.byte_len,
            qp,
            ex,
            src_qp: wc.src_qp,
            wc_flags: flags as c_int,
            pkey_index: wc.pkey_index,
            sl: wc.sl,
            port_num: 1,
            smac,
            network_hdr_type,
            ..Default::default()
        };
        e.__bindgen_anon_1.wr_id = wc.wr_id;
        // SAFETY: `n < cap` entries of `out` are writable (type invariant; `push` checked
        // the room).
        unsafe { self.out.add(self.n).write(e) };
        self.n += 1;
    }
}

impl<'a> WcSink<'a> {
    /// The `cap` entries at `out`.
    ///
    /// # Safety
    ///
    /// `out` is valid for writes of `cap` entries for `'a`.
    pub(super) unsafe fn new(out: *mut bindings::ib_wc, cap: usize) -> Self {
        // INVARIANT: function contract; nothing written yet.
        Self {
            out,
            cap,
            n: 0,
            _p: PhantomData,
        }
    }

    /// Entries written.
    pub(super) fn written(&self) -> usize {
        self.n
    }
}

/// # Safety
///
/// `p` is NULL or points to `n` valid `ib_sge`s that live for `'a`.
unsafe fn sges<'a>(p: *const bindings::ib_sge, n: c_int) -> Result<&'a [Sge]> {
    let n = usize::try_from(n).map_err(|_| EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `Sge` has `ib_sge`'s layout (checked above); function contract.
    Ok(unsafe { core::slice::from_raw_parts(p.cast::<Sge>(), n) })
}

/// # Safety
///
/// `wr` is a valid send WR of a kernel user (its container matches its opcode and, with `ah`,
/// is an `ib_ud_wr` whose AH `ah` resolves), live for `'a`.
unsafe fn send_wr<'a, A>(
    wr: *const bindings::ib_send_wr,
    ah: Option<AhOf<A>>,
) -> Result<SendWr<'a, A>> {
    // SAFETY: function contract.
    let w = unsafe { &*wr };
    let rdma = || {
        // SAFETY: RDMA opcodes come in an `ib_rdma_wr`, whose first member is the WR.
        let r = unsafe { &*wr.cast::<bindings::ib_rdma_wr>() };
        (r.remote_addr, r.rkey)
    };
    let atomic = || {
        // SAFETY: atomic opcodes come in an `ib_atomic_wr`, whose first member is the WR.
        let a = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
        (a.remote_addr, a.rkey, a.compare_add, a.swap)
    };
    // SAFETY: the union member the opcode names.
    let (imm, inv) = unsafe { (w.ex.imm_data, w.ex.invalidate_rkey) };
    let op = match w.opcode {
        bindings::ib_wr_opcode_IB_WR_SEND => SendOp::Send,
        bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => SendOp::SendWithImm(imm),
        bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => SendOp::SendWithInv(inv),
        bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => {
            let (remote_addr, rkey) = rdma();
            SendOp::Write { remote_addr, rkey }
        }
        bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => {
            let (remote_addr, rkey) = rdma();
            SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm,
            }
        }
        bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
            let (remote_addr, rkey) = rdma();
            SendOp::Read { remote_addr, rkey }
        }
        bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => {
            let (remote_addr, rkey) = rdma();
            SendOp::ReadWithInv {
                remote_addr,
                rkey,
                inv,
            }
        }
        bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => {
            let (remote_addr, rkey, compare, swap) = atomic();
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            }
        }
        bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
            let (remote_addr, rkey, add, _) = atomic();
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            }
        }
        bindings::ib_wr_opcode_IB_WR_LOCAL_INV => SendOp::LocalInv(inv),
        bindings::ib_wr_opcode_IB_WR_REG_MR => {
            // SAFETY: REG_MR comes in an `ib_reg_wr`, whose first member is the WR.
            let r = unsafe { &*wr.cast::<bindings::ib_reg_wr>() };
            if r.mr.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: the MR of a REG_MR is live while the WR is outstanding.
            let (iova, length) = unsafe { ((*r.mr).iova, (*r.mr).length) };
            SendOp::RegMr {
                key: r.key,
                access: r.access as u32,
                iova,
                length,
            }
        }
        _ => return Err(EINVAL),
    };
    let ud = match ah {
        Some(ah_of) => {
            // SAFETY: a UD or GSI QP's WRs come in an `ib_ud_wr`, whose first member is the WR
            // (function contract).
            let u = unsafe { &*wr.cast::<bindings::ib_ud_wr>() };
            if u.ah.is_null() {
                return Err(EINVAL);
            }
            Some(UdDest {
                // SAFETY: the WR's AH is a live AH of the QP's device while the post runs, and
                // `ah_of` resolves such an AH to its driver data (function contract).
                ah: unsafe { &*ah_of(u.ah) },
                remote_qpn: u.remote_qpn,
                remote_qkey: u.remote_qkey,
                pkey_index: u.pkey_index,
            })
        }
        None => None,
    };
    let f = w.send_flags;
    Ok(SendWr {
        // SAFETY: `wr_id` and `wr_cqe` share the storage; either is returned as is.
        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
        op,
        signaled: f & bindings::ib_send_flags_IB_SEND_SIGNALED as c_int != 0,
        solicited: f & bindings::ib_send_flags_IB_SEND_SOLICITED as c_int != 0,
        fence: f & bindings::ib_send_flags_IB_SEND_FENCE as c_int != 0,
        inline: f & bindings::ib_send_flags_IB_SEND_INLINE as c_int != 0,
        // SAFETY: the WR's SGE array (function contract).
        sges: unsafe { sges(w.sg_list, w.num_sge)? },
        ud,
    })
}

/// Resolves an `ib_ah` of the device to its driver data (the adapter's object layout).
pub(super) type AhOf<A> = unsafe fn(*mut bindings::ib_ah) -> *const A;

/// A chain of send work requests being posted (`post_send`). The driver takes them one by one;
/// when it returns an error, the request it was at is reported back as the bad one.
///
/// # Invariants
///
/// `next` and `cur` are NULL or WRs of a valid chain of a kernel user (each in the container
/// its opcode names; with `ah`, `ib_ud_wr`s whose AHs `ah` resolves), live for `'a`.
pub struct SendWrs<'a, A = ()> {
    next: *const bindings::ib_send_wr,
    cur: *const bindings::ib_send_wr,
    ah: Option<AhOf<A>>,
    _p: PhantomData<(&'a bindings::ib_send_wr, &'a A)>,
}

impl<'a, A> SendWrs<'a, A> {
    /// # Safety
    ///
    /// `first` is NULL or the head of a valid chain, live for `'a`; with `ah` (a UD or GSI
    /// QP), its WRs are `ib_ud_wr`s whose AHs are live AHs of the device, which `ah` resolves.
    pub(super) unsafe fn new(first: *const bindings::ib_send_wr, ah: Option<AhOf<A>>) -> Self {
        // INVARIANT: function contract.
        Self {
            next: first,
            cur: core::ptr::null(),
            ah,
            _p: PhantomData,
        }
    }

    /// Whether the chain had no request at all (the uverbs `POST_SEND` command with none).
    pub fn is_empty(&self) -> bool {
        self.next.is_null() && self.cur.is_null()
    }

    /// The request taken last (the bad one after an error).
    pub(super) fn current(&self) -> *const bindings::ib_send_wr {
        self.cur
    }
}

impl<'a, A> Iterator for SendWrs<'a, A> {
    /// A request, or `EINVAL` for one that cannot be represented (unknown opcode, bad SGEs).
    type Item = Result<SendWr<'a, A>>;

    fn next(&mut self) -> Option<Self::Item> {
        let wr = NonNull::new(self.next.cast_mut())?;
        self.cur = wr.as_ptr();
        // SAFETY: a WR of the chain (type invariant).
        self.next = unsafe { (*wr.as_ptr()).next };
        // SAFETY: a WR of the chain, live for `'a` (type invariant).
        Some(unsafe { send_wr(wr.as_ptr(), self.ah) })
    }
}

/// A chain of receive work requests being posted (`post_recv`, `post_srq_recv`); see
/// [`SendWrs`].
///
/// # Invariants
///
/// `next` and `cur` are NULL or WRs of a valid chain, live for `'a`.
pub struct RecvWrs<'a> {
    next: *const bindings::ib_recv_wr,
    cur: *const bindings::ib_recv_wr,
    _p: PhantomData<&'a bindings::ib_recv_wr>,
}

impl<'a> RecvWrs<'a> {
    /// # Safety
    ///
    /// `first` is NULL or the head of a valid chain, live for `'a`.
    pub(super) unsafe fn new(first: *const bindings::ib_recv_wr) -> Self {
        // INVARIANT: function contract.
        Self {
            next: first,
            cur: core::ptr::null(),
            _p: PhantomData,
        }
    }

    /// The request taken last (the bad one after an error).
    pub(super) fn current(&self) -> *const bindings::ib_recv_wr {
        self.cur
    }
}

impl<'a> Iterator for RecvWrs<'a> {
    /// A request, or `EINVAL` for one whose SGEs cannot be represented.
    type Item = Result<RecvWr<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let wr = NonNull::new(self.next.cast_mut())?;
        self.cur = wr.as_ptr();
        // SAFETY: a WR of the chain (type invariant).
        let w = unsafe { &*wr.as_ptr() };
        self.next = w.next;
        // SAFETY: the WR's SGE array, live with the WR.
        Some(unsafe { sges(w.sg_list, w.num_sge) }.map(|sges| RecvWr {
            // SAFETY: `wr_id` and `wr_cqe` share the storage; either is returned as is.
            wr_id: unsafe { w.__bindgen_anon_1.wr_id },
            sges,
        }))
    }
}
