// SPDX-License-Identifier: GPL-2.0
//! Completion queues: the `CREATE_CQ` response, and polling the kernel-produced CQ ring.
//!
//! `poll_cq` runs without a system call: it reads the producer index the kernel published
//! (acquire), copies each new 64-byte [`Cqe`] out of its slot, converts it to a `struct
//! ibv_wc` ([`cqe_to_wc`]), and publishes its own consumer index (release). The provider's
//! consumer index is its own; a published producer index more than `slots` ahead of it (or
//! behind it) is refused.

use core::fmt;
use core::mem::{offset_of, size_of};
use core::ptr;

use oxrdma_uapi::queue::{Cqe, CQE_SIZE, WC_FLAG_GRH, WC_FLAG_WITH_IMM, WC_FLAG_WITH_INV};
use oxrdma_uapi::verbs::CreateCqResp;

use crate::hold::HeldLock;
use crate::ring::{in_flight, map_ring, Geometry, GeometryError, MappedRing, SetupError};
use crate::sys;

/// The `CREATE_CQ` response buffer: core uverbs response, then oxrdma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateCqRespBuf {
    /// Filled by ib_core (`cq_handle`, `cqe`; libibverbs copies them into the `ibv_cq`).
    pub(crate) ibv_resp: sys::ib_uverbs_create_cq_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: CreateCqResp,
}

const _: () =
    assert!(offset_of!(CreateCqRespBuf, drv) == size_of::<sys::ib_uverbs_create_cq_resp>());

/// The extended `CREATE_CQ` response buffer (`ibv_cmd_create_cq_ex`): the core extended
/// response, then oxrdma's driver data (the same as for `CREATE_CQ`).
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateCqExRespBuf {
    /// Filled by ib_core (or, with ioctl, by libibverbs from attributes).
    pub(crate) ibv_resp: sys::ib_uverbs_ex_create_cq_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: CreateCqResp,
}

const _: () =
    assert!(offset_of!(CreateCqExRespBuf, drv) == size_of::<sys::ib_uverbs_ex_create_cq_resp>());

/// The `wc_flags` of `ibv_create_cq_ex` the provider can produce: everything in a
/// `struct ibv_wc` (verbs.h's `IBV_WC_STANDARD_FLAGS`). Completion timestamps, VLANs, flow
/// tags and tag matching are not available.
pub(crate) const SUPPORTED_WC_FLAGS: u64 = (sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_BYTE_LEN
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_IMM
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_QP_NUM
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SRC_QP
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SLID
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SL
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_DLID_PATH_BITS)
    as u64;

/// Checks the attributes of `ibv_create_cq_ex` before anything is created; the errno if the
/// provider cannot honour them (`EOPNOTSUPP`, as rdma-core's tests expect for unsupported
/// features).
pub(crate) fn check_cq_init_ex(wc_flags: u64, comp_mask: u32, flags: u32) -> Result<(), i32> {
    if wc_flags & !SUPPORTED_WC_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // Parent domains are not supported, so IBV_CQ_INIT_ATTR_MASK_PD cannot name one.
    if comp_mask & !sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // SINGLE_THREADED only allows skipping the lock. IGNORE_OVERRUN is refused: the provider
    // refuses a ring whose producer ran ahead of it instead of reading overwritten entries.
    let flags = if comp_mask & sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        flags
    } else {
        0
    };
    if flags & !sys::ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(())
}

/// Checks the CQ ring geometry of a `CREATE_CQ` response.
pub(crate) fn check_resp(drv: &CreateCqResp) -> Result<Geometry, GeometryError> {
    let geo = Geometry {
        slots: drv.slots,
        slot_size: drv.slot_size,
    };
    geo.check(1, CQE_SIZE as u32, &drv.ring)?;
    Ok(geo)
}

/// The kernel published a CQ producer index that claims more than `slots` completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overrun {
    /// The published producer index.
    pub(crate) producer: u32,
    /// The provider's consumer index.
    pub(crate) consumer: u32,
}

impl fmt::Display for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CQ ring overrun: producer index {} against consumer index {}",
            self.producer, self.consumer
        )
    }
}

/// A `struct ibv_wc` from a completion. Status and opcode numbers are already libibverbs'
/// (`IBV_WC_*`); `imm_or_inv` is copied verbatim (it is already in `ibv_wc`'s representation:
/// the network-order bytes of the immediate read as a native `u32`, or the host-order R_Key).
pub(crate) fn cqe_to_wc(c: &Cqe) -> sys::ibv_wc {
    let mut flags = 0;
    if c.wc_flags & WC_FLAG_GRH != 0 {
        flags |= sys::ibv_wc_flags_IBV_WC_GRH;
    }
    if c.wc_flags & WC_FLAG_WITH_IMM != 0 {
        flags |= sys::ibv_wc_flags_IBV_WC_WITH_IMM;
    }
    if c.wc_flags & WC_FLAG_WITH_INV != 0 {
        flags |= sys::ibv_wc_flags_IBV_WC_WITH_INV;
    }
    sys::ibv_wc {
        wr_id: c.wr_id,
        status: c.status.into(),
        opcode: c.opcode.into(),
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        __bindgen_anon_1: sys::ibv_wc__bindgen_ty_1 {
            imm_data: c.imm_or_inv,
        },
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: flags,
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

/// The consumer side of a CQ ring.
#[derive(Debug)]
pub(crate) struct CompletionQueue {
    ring: MappedRing,
    consumer: u32,
    /// In an extended poll (`ibv_start_poll` .. `ibv_end_poll`): the completion in the slot at
    /// `consumer`, read but not consumed yet.
    current: Option<Cqe>,
}

impl CompletionQueue {
    /// Starts at the consumer index in the header (the kernel initialises it, normally to 0).
    pub(crate) fn new(ring: MappedRing) -> Self {
        let consumer = ring.consumer();
        Self {
            ring,
            consumer,
            current: None,
        }
    }

    fn available(&self) -> Result<u32, Overrun> {
        let producer = self.ring.producer();
        in_flight(producer, self.consumer, self.ring.slots()).ok_or(Overrun {
            producer,
            consumer: self.consumer,
        })
    }

    /// Reads the completion at the consumer index into `current`, if there is one.
    fn read_current(&mut self) -> Result<Option<sys::ibv_wc>, Overrun> {
        if self.available()? == 0 {
            return Ok(None);
        }
        let mut buf = [0u8; CQE_SIZE];
        self.ring.read_slot(self.consumer, &mut buf);
        Ok(Some(cqe_to_wc(self.current.insert(Cqe::from_bytes(&buf)))))
    }

    /// Consumes `current`, if any (not yet published).
    fn consume_current(&mut self) {
        if self.current.take().is_some() {
            self.consumer = self.consumer.wrapping_add(1);
        }
    }

    /// `ibv_start_poll`: the oldest completion becomes the current one; `None` if there is
    /// none (the poll then ends at once).
    pub(crate) fn start(&mut self) -> Result<Option<sys::ibv_wc>, Overrun> {
        self.current = None;
        self.read_current()
    }

    /// `ibv_next_poll`: consumes the current completion and makes the next one current;
    /// `None` if there is none yet (the consumer index is then published; the poll goes on
    /// until [`Self::end`]).
    pub(crate) fn next(&mut self) -> Result<Option<sys::ibv_wc>, Overrun> {
        self.consume_current();
        if self.available()? == 0 {
            self.ring.publish_consumer(self.consumer);
            return Ok(None);
        }
        self.read_current()
    }

    /// `ibv_end_poll`: consumes the current completion and publishes the consumer index.
    pub(crate) fn end(&mut self) {
        self.consume_current();
        self.ring.publish_consumer(self.consumer);
    }

    /// The current completion of an extended poll (`ibv_wc_read_*`); a zeroed one outside a
    /// poll (the caller broke the contract; nothing better to answer).
    pub(crate) fn current(&self) -> sys::ibv_wc {
        self.current.as_ref().map(cqe_to_wc).unwrap_or_default()
    }

    /// Hands up to `max` completions, oldest first, to `put`; returns how many.
    pub(crate) fn poll(
        &mut self,
        max: usize,
        mut put: impl FnMut(sys::ibv_wc),
    ) -> Result<usize, Overrun> {
        let n = self.available()?;
        let take = max.min(n as usize);
        let mut buf = [0u8; CQE_SIZE];
        for _ in 0..take {
            self.ring.read_slot(self.consumer, &mut buf);
            put(cqe_to_wc(&Cqe::from_bytes(&buf)));
            self.consumer = self.consumer.wrapping_add(1);
        }
        if take > 0 {
            self.ring.publish_consumer(self.consumer);
        }
        Ok(take)
    }
}

/// The provider's CQ: libibverbs' `verbs_cq` first (the address applications hold, as an
/// `ibv_cq` or, for `ibv_create_cq_ex`, as an `ibv_cq_ex`: the two share it), then the ring.
/// libibverbs writes the `verbs_cq` part (`verbs_init_cq`, event counters) and the
/// application reads `ibv_cq_ex::status`/`wr_id` at any time, so the provider only ever
/// borrows `inner`, never the whole structure.
#[repr(C)]
pub(crate) struct OxCq {
    /// libibverbs' part.
    pub(crate) vcq: sys::verbs_cq,
    /// Set once the ring is mapped, before the CQ is returned.
    pub(crate) inner: Option<CqInner>,
}

/// The provider's own part of a CQ.
#[derive(Debug)]
pub(crate) struct CqInner {
    cq: HeldLock<CompletionQueue>,
}

impl OxCq {
    /// A CQ for `ibv_cmd_create_cq(_ex)` to fill in.
    pub(crate) fn new() -> Box<Self> {
        Box::new(Self {
            vcq: sys::verbs_cq::default(),
            inner: None,
        })
    }

    /// The `ibv_cq` member of `vcq` (for `ibv_cmd_create_cq` and the returned pointer).
    pub(crate) fn ibv_cq_ptr(&mut self) -> *mut sys::ibv_cq {
        ptr::addr_of_mut!(self.vcq).cast()
    }
}

impl CqInner {
    /// Checks oxrdma's `CREATE_CQ` response and maps the ring from `cmd_fd`.
    pub(crate) fn setup(cmd_fd: i32, drv: &CreateCqResp) -> Result<Self, SetupError> {
        let geo = check_resp(drv)?;
        let ring = map_ring(cmd_fd, &drv.ring, geo)?;
        Ok(Self {
            cq: HeldLock::new(CompletionQueue::new(ring)),
        })
    }

    /// `ibv_poll_cq` under the CQ's lock ([`CompletionQueue::poll`]), after any extended poll
    /// in progress.
    pub(crate) fn poll(&self, max: usize, put: impl FnMut(sys::ibv_wc)) -> Result<usize, Overrun> {
        self.cq.with(|q| q.poll(max, put))
    }

    /// `ibv_start_poll`: status and wr_id of the first completion, `None` if there is none.
    /// The CQ stays locked until [`Self::end_poll`] only when a completion was found.
    pub(crate) fn start_poll(&self) -> Result<Option<(u32, u64)>, Overrun> {
        self.cq.begin(|q| {
            let r = q.start().map(|w| w.map(|w| (w.status, w.wr_id)));
            let hold = matches!(r, Ok(Some(_)));
            (r, hold)
        })
    }

    /// `ibv_next_poll`: as [`Self::start_poll`], inside the poll.
    pub(crate) fn next_poll(&self) -> Result<Option<(u32, u64)>, Overrun> {
        self.cq
            .step(|q| q.next().map(|w| w.map(|w| (w.status, w.wr_id))))
    }

    /// `ibv_end_poll`: releases the CQ.
    pub(crate) fn end_poll(&self) {
        self.cq.end(CompletionQueue::end)
    }

    /// The current completion of the extended poll, for the `ibv_wc_read_*` accessors.
    pub(crate) fn current(&self) -> sys::ibv_wc {
        self.cq.step(|q| q.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdma_uapi::queue::{wc_opcode, wc_status};
    use oxrdma_uapi::ring::{RING_CONSUMER_OFFSET, RING_PRODUCER_OFFSET};
    use oxrdma_uapi::verbs::RingMmap;

    #[test]
    fn response_buffer_layout() {
        assert_eq!(size_of::<sys::ib_uverbs_create_cq_resp>(), 8);
        assert_eq!(offset_of!(CreateCqRespBuf, drv), 8);
        assert_eq!(size_of::<CreateCqRespBuf>(), 8 + 24);
    }

    #[test]
    fn checks_response_geometry() {
        let r = |slots, slot_size, len| CreateCqResp {
            ring: RingMmap { offset: 0, len },
            slots,
            slot_size,
        };
        assert_eq!(
            check_resp(&r(64, 64, 8192)),
            Ok(Geometry {
                slots: 64,
                slot_size: 64
            })
        );
        assert!(check_resp(&r(64, 32, 8192)).is_err());
        assert!(check_resp(&r(64, 64, 4096)).is_err());
        assert!(check_resp(&r(0, 64, 4096)).is_err());
        assert!(check_resp(&r(48, 64, 8192)).is_err());
    }

    fn cqe(wr_id: u64) -> Cqe {
        Cqe {
            wr_id,
            status: wc_status::SUCCESS,
            opcode: wc_opcode::RECV,
            byte_len: 100,
            qp_num: 7,
            ..Default::default()
        }
    }

    #[test]
    fn converts_completions() {
        let c = Cqe {
            wr_id: 0x1122_3344_5566_7788,
            status: wc_status::REM_ACCESS_ERR,
            opcode: wc_opcode::RECV_RDMA_WITH_IMM,
            wc_flags: WC_FLAG_GRH | WC_FLAG_WITH_IMM,
            vendor_err: 0x55,
            byte_len: 4096,
            imm_or_inv: u32::from_ne_bytes([0x12, 0x34, 0x56, 0x78]),
            qp_num: 0x11,
            src_qp: 0x22,
            pkey_index: 3,
            slid: 4,
            sl: 5,
            dlid_path_bits: 6,
            network_hdr_type: 2,
            smac: [1; 6],
            vlan_id: 0xffff,
            ..Default::default()
        };
        let wc = cqe_to_wc(&c);
        assert_eq!(wc.wr_id, c.wr_id);
        assert_eq!(wc.status, sys::ibv_wc_status_IBV_WC_REM_ACCESS_ERR);
        assert_eq!(wc.opcode, sys::ibv_wc_opcode_IBV_WC_RECV_RDMA_WITH_IMM);
        assert_eq!(wc.vendor_err, 0x55);
        assert_eq!(wc.byte_len, 4096);
        // Verbatim: the bytes in memory are the network-order immediate.
        assert_eq!(sys::wc_imm(&wc).to_ne_bytes(), [0x12, 0x34, 0x56, 0x78]);
        assert_eq!((wc.qp_num, wc.src_qp), (0x11, 0x22));
        assert_eq!(
            wc.wc_flags,
            sys::ibv_wc_flags_IBV_WC_GRH | sys::ibv_wc_flags_IBV_WC_WITH_IMM
        );
        assert_eq!(
            (wc.pkey_index, wc.slid, wc.sl, wc.dlid_path_bits),
            (3, 4, 5, 6)
        );

        let inv = cqe_to_wc(&Cqe {
            wc_flags: WC_FLAG_WITH_INV,
            imm_or_inv: 0xabcd,
            status: wc_status::SUCCESS,
            opcode: wc_opcode::RECV,
            ..Default::default()
        });
        assert_eq!(inv.wc_flags, sys::ibv_wc_flags_IBV_WC_WITH_INV);
        assert_eq!(sys::wc_imm(&inv), 0xabcd);
        assert_eq!(inv.opcode, sys::ibv_wc_opcode_IBV_WC_RECV);
        assert_eq!(inv.status, sys::ibv_wc_status_IBV_WC_SUCCESS);
        // Numbers match libibverbs' for every opcode the uapi defines.
        for (ours, theirs) in [
            (wc_opcode::SEND, sys::ibv_wc_opcode_IBV_WC_SEND),
            (wc_opcode::RDMA_WRITE, sys::ibv_wc_opcode_IBV_WC_RDMA_WRITE),
            (wc_opcode::RDMA_READ, sys::ibv_wc_opcode_IBV_WC_RDMA_READ),
            (wc_opcode::COMP_SWAP, sys::ibv_wc_opcode_IBV_WC_COMP_SWAP),
            (wc_opcode::FETCH_ADD, sys::ibv_wc_opcode_IBV_WC_FETCH_ADD),
            (wc_opcode::LOCAL_INV, sys::ibv_wc_opcode_IBV_WC_LOCAL_INV),
        ] {
            assert_eq!(u32::from(ours), theirs);
        }
        assert_eq!(
            u32::from(wc_status::WR_FLUSH_ERR),
            sys::ibv_wc_status_IBV_WC_WR_FLUSH_ERR
        );
        assert_eq!(
            u32::from(wc_status::GENERAL_ERR),
            sys::ibv_wc_status_IBV_WC_GENERAL_ERR
        );
    }

    fn produce(ring: &MappedRing, index: u32, c: &Cqe) {
        ring.write_slot(index, &c.to_bytes());
    }

    /// Polls up to `max`; the wr_ids polled.
    fn poll(cq: &mut CompletionQueue, max: usize) -> Result<Vec<u64>, Overrun> {
        let mut ids = Vec::new();
        let n = cq.poll(max, |wc| ids.push(wc.wr_id))?;
        assert_eq!(n, ids.len());
        Ok(ids)
    }

    #[test]
    fn polls_in_order_and_publishes_the_consumer() {
        let ring = MappedRing::for_test(4, 64);
        for i in 0..3 {
            produce(&ring, i, &cqe(100 + u64::from(i)));
        }
        ring.kernel_store(RING_PRODUCER_OFFSET, 3);
        let mut cq = CompletionQueue::new(ring);
        assert_eq!(poll(&mut cq, 2), Ok(vec![100, 101]));
        assert_eq!(cq.ring.consumer(), 2);
        assert_eq!(poll(&mut cq, 2), Ok(vec![102]));
        assert_eq!(poll(&mut cq, 2), Ok(vec![]));
        assert_eq!(cq.ring.consumer(), 3);
        assert_eq!(poll(&mut cq, 0), Ok(vec![]));
        // Wraps around the ring: slots 3, 0, 1, 2.
        for i in 3..7 {
            produce(&cq.ring, i, &cqe(100 + u64::from(i)));
        }
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 7);
        assert_eq!(poll(&mut cq, 8), Ok(vec![103, 104, 105, 106]));
    }

    #[test]
    fn refuses_hostile_producer_indices() {
        let ring = MappedRing::for_test(4, 64);
        let mut cq = CompletionQueue::new(ring);
        for bad in [5, 100, u32::MAX] {
            cq.ring.kernel_store(RING_PRODUCER_OFFSET, bad);
            assert_eq!(
                poll(&mut cq, 8),
                Err(Overrun {
                    producer: bad,
                    consumer: 0
                })
            );
            // Nothing consumed.
            assert_eq!(cq.ring.consumer(), 0);
        }
        // Exactly full is fine.
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 4);
        assert_eq!(poll(&mut cq, 8).map(|v| v.len()), Ok(4));
        // Backwards, below the consumer.
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 3);
        assert!(poll(&mut cq, 8).is_err());
    }

    #[test]
    fn consumer_starts_at_the_header_value() {
        let ring = MappedRing::for_test(4, 64);
        ring.kernel_store(RING_CONSUMER_OFFSET, u32::MAX);
        ring.kernel_store(RING_PRODUCER_OFFSET, 1);
        produce(&ring, u32::MAX, &cqe(9));
        produce(&ring, 0, &cqe(10));
        let mut cq = CompletionQueue::new(ring);
        assert_eq!(poll(&mut cq, 4), Ok(vec![9, 10]));
    }

    #[test]
    fn ox_cq_layout() {
        assert_eq!(offset_of!(OxCq, vcq), 0);
        assert_eq!(size_of::<sys::verbs_cq>(), size_of::<sys::ibv_cq_ex>());
        let mut cq = OxCq::new();
        assert!(cq.inner.is_none());
        assert_eq!(cq.ibv_cq_ptr().cast::<OxCq>(), &mut *cq as *mut OxCq);
    }

    #[test]
    fn ex_response_buffer_layout() {
        assert_eq!(size_of::<sys::ib_uverbs_ex_create_cq_resp>(), 16);
        assert_eq!(offset_of!(CreateCqExRespBuf, drv), 16);
    }

    #[test]
    fn cq_ex_attributes() {
        use sys::*;
        // IBV_WC_STANDARD_FLAGS.
        let std = 0x7f;
        assert_eq!(SUPPORTED_WC_FLAGS, std);
        assert_eq!(check_cq_init_ex(0, 0, 0), Ok(()));
        assert_eq!(check_cq_init_ex(std, 0, 0), Ok(()));
        for bad in [
            ibv_create_cq_wc_flags_IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
            ibv_create_cq_wc_flags_IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
            ibv_create_cq_wc_flags_IBV_WC_EX_WITH_CVLAN,
            ibv_create_cq_wc_flags_IBV_WC_EX_WITH_FLOW_TAG,
            ibv_create_cq_wc_flags_IBV_WC_EX_WITH_TM_INFO,
        ] {
            assert_eq!(
                check_cq_init_ex(std | u64::from(bad), 0, 0),
                Err(libc::EOPNOTSUPP)
            );
        }
        let mask = ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS;
        let single = ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
        let overrun = ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        assert_eq!(check_cq_init_ex(0, mask, single), Ok(()));
        assert_eq!(check_cq_init_ex(0, mask, overrun), Err(libc::EOPNOTSUPP));
        // Flags without the mask bit are not looked at.
        assert_eq!(check_cq_init_ex(0, 0, overrun), Ok(()));
        assert_eq!(
            check_cq_init_ex(0, ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_PD, 0),
            Err(libc::EOPNOTSUPP)
        );
    }

    #[test]
    fn extended_poll() {
        let ring = MappedRing::for_test(4, 64);
        let mut cq = CompletionQueue::new(ring);
        assert_eq!(cq.start().unwrap().map(|w| w.wr_id), None);
        for i in 0..3 {
            produce(&cq.ring, i, &cqe(100 + u64::from(i)));
        }
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 2);
        assert_eq!(cq.start().unwrap().map(|w| w.wr_id), Some(100));
        assert_eq!(cq.current().byte_len, 100);
        assert_eq!(cq.ring.consumer(), 0, "nothing consumed yet");
        assert_eq!(cq.next().unwrap().map(|w| w.wr_id), Some(101));
        // Empty: the two are consumed and published; polling again finds nothing twice.
        assert_eq!(cq.next().unwrap().map(|w| w.wr_id), None);
        assert_eq!(cq.ring.consumer(), 2);
        assert_eq!(cq.next().unwrap().map(|w| w.wr_id), None);
        assert_eq!(cq.ring.consumer(), 2);
        // A new completion arrives during the poll.
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 3);
        assert_eq!(cq.next().unwrap().map(|w| w.wr_id), Some(102));
        cq.end();
        assert_eq!(cq.ring.consumer(), 3);
        assert_eq!(cq.current().wr_id, 0);
        // Ending after an empty next consumes nothing more.
        cq.end();
        assert_eq!(cq.ring.consumer(), 3);
        // The legacy poll sees the same ring.
        produce(&cq.ring, 3, &cqe(103));
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 4);
        assert_eq!(poll(&mut cq, 4), Ok(vec![103]));
        // Hostile producer.
        cq.ring.kernel_store(RING_PRODUCER_OFFSET, 100);
        assert!(cq.start().is_err());
    }
}
