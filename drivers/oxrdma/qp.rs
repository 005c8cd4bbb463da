// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the verbs (create, modify, query, destroy), the IBA state machine, and the RC
//! data path that connects the rings, the memory regions and the wire crate's requester,
//! responder and completer.
//!
//! The send side is in `qp/send.rs`, the receive side (completer and responder) in
//! `qp/recv.rs`; they share this module's types.
//!
//! Everything mutable of a QP is in [`QpState`] behind one spinlock that disables bottom
//! halves: the verbs calls, the doorbell, the QP's own work item and timer, and packet
//! reception (softirq) take it, and packets are sent while it is held (they are delivered,
//! softirqs running, once it is released). Lock order: QP state, then the device's tables,
//! then an MR's binding, then a CQ or a receive queue.
//!
//! A QP runs its send side ([`QpInner::run`]) where it is asked to: in the system call of a
//! doorbell, in its timer's softirq, in the softirq of an ACK that frees its requester, or
//! from its work item (kernel users post from any context and kick it).

use crate::ah::Ah;
use crate::cq::CqInner;
use crate::dev::RoceDev;
use crate::mr::{Access, Mr, MrError};
use crate::ox::rdma::events::{QpEvent, QpEvents};
use crate::ox::rdma::verbs::{access, modify_is_ok, Path, QpAttrs, QpCaps, QpState as St, QpType};
use crate::ox::rdma::wr::{RecvWr, SendOp as KOp, SendWr};
use crate::ox::sync::SpinLockBh;
use crate::ox::timer::{now_us, Timer, TimerHandler};
use crate::ox::workqueue;
use crate::queue::{
    post_entry, post_view, write_sges, PostView, RecvEntry, RecvQueue, RingFault, SendEntry,
    SendInline, SendRing, SendSges, MAX_INLINE,
};
use crate::tx::TxPath;
use crate::uapi::queue::{
    wc_opcode, wc_status, Cqe, SendWqe, Sge, WrOpcode, SEND_WQE_SIZE, WC_FLAG_WITH_IMM,
    WC_FLAG_WITH_INV, WQE_FLAG_FENCE, WQE_FLAG_INLINE, WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED,
};
use crate::uapi::ring::RingView;
use crate::wire::headers::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Ieth, ImmDt, NakCode, Reth, Syndrome, CREDITS_INVALID,
};
use crate::wire::ip::{flow_sport, IpAddr};
use crate::wire::opcode::{Opcode, Operation, Position};
use crate::wire::packet::{Headers, Packet};
use crate::wire::psn::Psn;
use crate::wire::rc::completer::{Response, ResponseAction, ResponseKind};
use crate::wire::rc::requester::{
    PostError, RcError, Requester, RequesterConfig, Status, TimerAction,
};
use crate::wire::rc::responder::{Ack, Request, Responder, ResponderAction, ResponderConfig};
use crate::wire::rc::sequence::MessageSequence;
use crate::wire::rc::OpKind;
use crate::wire::uc::{UcAction, UcReceiver};
use core::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use kernel::{
    alloc::flags::GFP_KERNEL,
    alloc::KBox,
    alloc::KVec,
    impl_has_work, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    workqueue::{Work, WorkItem},
};

mod datagram;
mod iwarp;
mod recv;
mod send;

pub(crate) use iwarp::{IwParams, RtrRole, MAX_IRD};

/// Send WQEs the requester holds at once (more wait in the SQ ring).
pub(crate) const REQ_WQES: usize = 128;
/// Responder resources (`max_dest_rd_atomic`), as many as rxe has: a peer's rdma_cm may ask
/// for its own device's limit (perftest on rxe asks for 128), and a QP refuses more.
pub(crate) const RESP_RES: usize = 128;
/// RDMA READs / ATOMICs the requester may have outstanding (`max_rd_atomic`).
pub(crate) const MAX_RD_ATOMIC: usize = 128;
/// Unacknowledged PSNs the requester may have in flight.
const WINDOW: u32 = 256;
/// The responder acknowledges at least every this many packets (besides AckReq and the end of
/// each message): a quarter of [`WINDOW`], so a streaming requester's window reopens before it
/// fills, and a 64 KiB message at MTU 1024 costs one acknowledgement, as with rxe.
const ACK_EVERY: u32 = 64;
/// Packets a QP sends in one pass (one READ's responses, a window of requests) before it lets
/// the lock go, and with it softirqs and other QPs; what is left goes on in the next pass.
/// Smaller bursts measured worse over loopback (NVMe-oF: several times the drops at 16 and 32
/// packets, more continuing from the work item).
const BURST: u32 = WINDOW;
/// Passes of one run in process context before the rest goes back to the work item (from
/// softirq context a run is one pass).
const PROCESS_PASSES: u32 = 8;
/// Unsignaled work requests in a row, none of them answered by a request from the peer, from
/// which a QP's doorbell leaves the sending to its work item ([`QpInner::doorbell`]).
const STREAM_UNWAITED: u32 = 8;
/// The packets a QP may send from softirq context now: [`BURST`], or none if a task waits for
/// the CPU (the work item, which the scheduler shares out, sends them instead). A sender whose
/// packets all go out from the acknowledgements it receives (and a responder answering READs)
/// would otherwise keep a CPU in softirq for as long as it has data, starving every task: `ip`
/// waited minutes for an RCU grace period under a KASAN kernel in emulation.
fn softirq_burst() -> u32 {
    if crate::ox::sync::need_resched() {
        0
    } else {
        BURST
    }
}

/// How soon (us) the send side tries again to take a WQE it could not allocate for.
const NOMEM_RETRY_US: u64 = 1000;

/// A posted send WQE the requester works on.
struct SendOp {
    wr_id: u64,
    opcode: WrOpcode,
    flags: u8,
    imm_or_inv: u32,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
    len: u32,
    sges: SendSges,
    inline: SendInline,
    /// A local error found while sending (reported instead of "flushed").
    local_error: Option<u8>,
}

/// A SEND being received across packets.
struct RecvProgress {
    entry: RecvEntry,
    offset: u64,
}

/// What a message that ended filled: its receive WQE and the bytes placed.
struct RecvDone {
    wr_id: u64,
    offset: u64,
}

/// The receive WQE the SEND being received fills, if one does. The storage stays across
/// messages: each WQE is read into it in place ([`RecvQueue::take_into`]), not built apart
/// and copied in.
struct RecvSlot {
    active: bool,
    p: RecvProgress,
}

impl RecvSlot {
    const fn new() -> Self {
        Self {
            active: false,
            p: RecvProgress {
                entry: RecvEntry::empty(),
                offset: 0,
            },
        }
    }

    fn is_some(&self) -> bool {
        self.active
    }

    fn is_none(&self) -> bool {
        !self.active
    }

    fn as_ref(&self) -> Option<&RecvProgress> {
        self.active.then_some(&self.p)
    }

    fn as_mut(&mut self) -> Option<&mut RecvProgress> {
        if self.active {
            Some(&mut self.p)
        } else {
            None
        }
    }

    /// Ends the message: what it filled, if a WQE was taken for it.
    fn take(&mut self) -> Option<RecvDone> {
        if !core::mem::replace(&mut self.active, false) {
            return None;
        }
        Some(RecvDone {
            wr_id: self.p.entry.wr_id,
            offset: self.p.offset,
        })
    }

    /// Drops the message being received, if any (its WQE is not completed).
    fn clear(&mut self) {
        self.active = false;
    }

    /// Takes `rq`'s next WQE for a new message (none is being received); whether there was
    /// one.
    fn fill(&mut self, rq: &RecvQueue) -> Result<bool, RingFault> {
        self.active = false;
        let got = rq.take_into(&mut self.p.entry)?;
        self.p.offset = 0;
        self.active = got;
        Ok(got)
    }
}

/// An RDMA WRITE being received across packets. Each packet's write is checked against the
/// MR again: an invalidation or deregistration ends the message.
struct WriteProgress {
    /// None for a zero-length WRITE (no memory, no R_Key).
    mr: Option<Arc<Mr>>,
    /// The RETH's access (its R_Key, address and whole length).
    access: Access,
    /// Bytes written so far.
    done: u64,
}

/// A responder resource's RDMA READ, to send (and replay) its responses; each response is
/// read through the request's access, checked again at that moment.
#[derive(Clone)]
struct ReadCtx {
    /// None for a zero-length READ (no memory, no R_Key).
    mr: Option<Arc<Mr>>,
    access: Access,
}

/// The responses of a responder resource (RDMA READ or ATOMIC) still to send.
#[derive(Clone, Copy, Default)]
struct Outgoing {
    /// The index of the next response packet.
    next: u32,
    /// Sent again for a duplicate request (which an MR no longer valid ends silently).
    replay: bool,
}

/// Per responder resource, the responses still to send; a bit per resource says which have
/// some, so that finding the next one costs nothing when there are none.
struct Outgoings {
    slots: [Outgoing; RESP_RES],
    pending: u128,
}

const _: () = assert!(RESP_RES <= 128, "one bit per resource in a u128");

impl Outgoings {
    const fn new() -> Self {
        Self {
            slots: [Outgoing {
                next: 0,
                replay: false,
            }; RESP_RES],
            pending: 0,
        }
    }

    fn get(&self, slot: usize) -> Option<Outgoing> {
        (slot < RESP_RES && self.pending & (1 << slot) != 0).then(|| self.slots[slot])
    }

    fn set(&mut self, slot: usize, o: Outgoing) {
        if slot < RESP_RES {
            self.slots[slot] = o;
            self.pending |= 1 << slot;
        }
    }

    fn clear(&mut self, slot: usize) {
        if slot < RESP_RES {
            self.pending &= !(1 << slot);
        }
    }

    fn clear_all(&mut self) {
        self.pending = 0;
    }

    fn any(&self) -> bool {
        self.pending != 0
    }

    /// The resource slots with responses to send.
    fn slots(&self) -> impl Iterator<Item = usize> {
        let mut m = self.pending;
        core::iter::from_fn(move || {
            if m == 0 {
                return None;
            }
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(i)
        })
    }
}

#[derive(Clone, Copy, Default)]
struct Attrs {
    path: Option<Path>,
    dest_qpn: u32,
    pmtu: u32,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    access: u32,
    sq_psn: u32,
    rq_psn: u32,
    qkey: u32,
    pkey_index: u16,
    port: u32,
}

/// The mutable part of a QP.
pub(crate) struct QpState {
    state: St,
    attrs: Attrs,
    sq_view: RingView,
    req: Option<KBox<Requester<REQ_WQES>>>,
    resp: Option<KBox<Responder<RESP_RES>>>,
    ops: KVec<Option<SendOp>>,
    next_seq: u64,
    recv: RecvSlot,
    write: Option<WriteProgress>,
    /// An RC responder's place in the message stream (FIRST..LAST, ONLY).
    msg: MessageSequence,
    reads: KVec<Option<ReadCtx>>,
    /// Per responder resource: the responses still to send, oldest request first.
    outgoing: Outgoings,
    /// An ACK or NAK decided while responses were still to send: it goes after them (responses
    /// and acknowledges leave in PSN order, or the requester takes a later ACK for a NAK of
    /// the READ before it).
    held_ack: Option<Ack>,
    /// In SQD: raise SQ_DRAINED once nothing is outstanding.
    sqd_notify: bool,
    /// Unsignaled work requests taken since the QP last received a request or took a
    /// signaled one: a QP that streams, with nothing waiting for its sends
    /// ([`QpInner::doorbell`]).
    unwaited: u32,
    /// A datagram QP's next send PSN.
    ud_psn: Psn,
    /// A UC QP's receive sequence (RC QPs have their responder instead).
    uc: UcReceiver,
    /// An iWARP QP's protocol state, while connected.
    iw: Option<KBox<iwarp::IwProto>>,
    dead: bool,
}

/// A QP.
#[pin_data]
pub(crate) struct QpInner {
    pub(crate) qpn: u32,
    qp_type: QpType,
    pdn: u32,
    dev: Arc<RoceDev>,
    send_cq: Arc<CqInner>,
    recv_cq: Arc<CqInner>,
    rq: Arc<RecvQueue>,
    sq: SendRing,
    caps: QpCaps,
    sig_all: bool,
    events: QpEvents,
    /// A kernel user's QP: posts through [`QpInner::post_send`] / [`QpInner::post_recv`], may
    /// use kernel-only opcodes.
    kernel: bool,
    /// In the error state (a mirror for the kernel post path, which does not take `st`).
    errored: AtomicBool,
    /// The send side left a WQE in the SQ ring for want of memory (`RingFault::NoMemory`):
    /// whoever runs it next arms the timer to take it again ([`QpInner::retry_later`]).
    retry: AtomicBool,
    /// A QP of an iWARP device: its data path is `qp/iwarp.rs`, over a TCP connection.
    iwarp: bool,
    /// An iWARP QP: the requests (SEND, WRITE, READ, atomic) received whole since it last took
    /// a work request. Written under `st`, read by the doorbell without it (a hint: a QP that
    /// receives a stream, [`iwarp::RX_STREAM`], leaves its sending to the work item).
    iw_rx_requests: AtomicU32,
    /// An iWARP QP's connection (taken before `st`; process context only).
    #[pin]
    iw_io: Mutex<Option<iwarp::IwIo>>,
    #[pin]
    st: SpinLockBh<QpState>,
    /// Kernel users: the producer side of the SQ.
    #[pin]
    sq_post: PostView,
    /// Runs the send side in process context (kicks from contexts that cannot run it).
    #[pin]
    work: Work<QpInner>,
    /// The requester's deadlines (retransmission, RNR wait).
    #[pin]
    timer: Timer<QpInner>,
}

impl_has_work! {
    impl HasWork<Self> for QpInner { self.work }
}

impl WorkItem for QpInner {
    type Pointer = Arc<QpInner>;

    fn run(this: Arc<QpInner>) {
        this.run();
    }
}

/// Whether the requester holds packets it has not sent (or must send again).
fn has_unsent(st: &QpState) -> bool {
    st.req
        .as_ref()
        .is_some_and(|r| r.next_psn().is_after(r.sent_end()))
}

impl TimerHandler for QpInner {
    /// A deadline passed: the send side runs right here, in the timer's softirq.
    fn expired(this: ArcBorrow<'_, Self>) {
        let qp: Arc<QpInner> = this.into();
        qp.run_softirq();
    }
}

/// The network header a packet arrived with: what a datagram QP's receive puts in front of
/// the data (the GRH area), and the addresses a connected QP checks.
pub(crate) struct NetHeader<'a> {
    /// The IP header (IPv4: at least 20 bytes; IPv6: 40), or the GRH (RoCE v1).
    pub(crate) bytes: &'a [u8],
    /// Its type (`uapi::queue::network_hdr`).
    pub(crate) kind: u8,
    /// The source address as a GID (IPv4-mapped for IPv4).
    pub(crate) sgid: [u8; 16],
    /// The destination address as a GID.
    pub(crate) dgid: [u8; 16],
}

/// The driver data of a QP object.
pub(crate) struct Qp(pub(crate) Arc<QpInner>);

/// Parameters of a new QP.
pub(crate) struct NewQp {
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) pdn: u32,
    pub(crate) dev: Arc<RoceDev>,
    pub(crate) send_cq: Arc<CqInner>,
    pub(crate) recv_cq: Arc<CqInner>,
    pub(crate) rq: Arc<RecvQueue>,
    pub(crate) sq: SendRing,
    pub(crate) caps: QpCaps,
    pub(crate) sig_all: bool,
    pub(crate) events: QpEvents,
    pub(crate) kernel: bool,
    pub(crate) iwarp: bool,
}

fn wc_opcode_of(op: WrOpcode) -> u8 {
    match op {
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => wc_opcode::RDMA_WRITE,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => wc_opcode::SEND,
        WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => wc_opcode::RDMA_READ,
        WrOpcode::AtomicCmpAndSwp => wc_opcode::COMP_SWAP,
        WrOpcode::AtomicFetchAndAdd => wc_opcode::FETCH_ADD,
        WrOpcode::LocalInv => wc_opcode::LOCAL_INV,
        WrOpcode::RegMr => wc_opcode::REG_MR,
    }
}

fn kind_of(op: WrOpcode) -> Option<OpKind> {
    Some(match op {
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => OpKind::Write,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => OpKind::Send,
        WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => OpKind::Read,
        WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => OpKind::Atomic,
        WrOpcode::LocalInv | WrOpcode::RegMr => return None,
    })
}

fn status_of(e: RcError) -> u8 {
    match e {
        RcError::RetryExceeded => wc_status::RETRY_EXC_ERR,
        RcError::RnrRetryExceeded => wc_status::RNR_RETRY_EXC_ERR,
        RcError::RemoteAccess => wc_status::REM_ACCESS_ERR,
        RcError::RemoteInvalidRequest => wc_status::REM_INV_REQ_ERR,
        RcError::RemoteOperation => wc_status::REM_OP_ERR,
        RcError::Flushed => wc_status::WR_FLUSH_ERR,
    }
}

/// The RC request opcode of a packet of `op`.
fn request_opcode(op: WrOpcode, first: bool, last: bool) -> Opcode {
    use Opcode::*;
    match (op, first, last) {
        (WrOpcode::Send, true, true) => RcSendOnly,
        (WrOpcode::SendWithImm, true, true) => RcSendOnlyImm,
        (WrOpcode::SendWithInv, true, true) => RcSendOnlyInv,
        (WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv, true, false) => {
            RcSendFirst
        }
        (WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv, false, false) => {
            RcSendMiddle
        }
        (WrOpcode::Send, false, true) => RcSendLast,
        (WrOpcode::SendWithImm, false, true) => RcSendLastImm,
        (WrOpcode::SendWithInv, false, true) => RcSendLastInv,
        (WrOpcode::RdmaWrite, true, true) => RcRdmaWriteOnly,
        (WrOpcode::RdmaWriteWithImm, true, true) => RcRdmaWriteOnlyImm,
        (WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm, true, false) => RcRdmaWriteFirst,
        (WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm, false, false) => RcRdmaWriteMiddle,
        (WrOpcode::RdmaWrite, false, true) => RcRdmaWriteLast,
        (WrOpcode::RdmaWriteWithImm, false, true) => RcRdmaWriteLastImm,
        (WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv, _, _) => RcRdmaReadRequest,
        (WrOpcode::AtomicCmpAndSwp, _, _) => RcCompareSwap,
        (WrOpcode::AtomicFetchAndAdd, _, _) => RcFetchAdd,
        // Local operations never reach the wire.
        (WrOpcode::LocalInv | WrOpcode::RegMr, _, _) => RcSendOnly,
    }
}

/// The UC opcode of a request packet: UC SEND and RDMA WRITE opcodes are RC's (0x00-0x0B)
/// with bit 5 set.
fn uc_opcode(rc: Opcode) -> Option<Opcode> {
    match rc.value() {
        v @ 0x00..=0x0b => Opcode::from_u8(v | 0x20),
        _ => None,
    }
}

fn read_response_opcode(i: u32, n: u32) -> Opcode {
    match (i == 0, i + 1 == n) {
        (true, true) => Opcode::RcRdmaReadResponseOnly,
        (true, false) => Opcode::RcRdmaReadResponseFirst,
        (false, true) => Opcode::RcRdmaReadResponseLast,
        (false, false) => Opcode::RcRdmaReadResponseMiddle,
    }
}

impl QpInner {
    pub(crate) fn new(p: NewQp) -> Result<Arc<Self>> {
        let mut ops = KVec::with_capacity(REQ_WQES, GFP_KERNEL)?;
        for _ in 0..REQ_WQES {
            ops.push(None, GFP_KERNEL)?;
        }
        let mut reads = KVec::with_capacity(RESP_RES, GFP_KERNEL)?;
        for _ in 0..RESP_RES {
            reads.push(None, GFP_KERNEL)?;
        }
        let slots = p.sq.geo.slots;
        Arc::pin_init(
            pin_init!(&this in Self {
                qpn: p.qpn,
                qp_type: p.qp_type,
                pdn: p.pdn,
                dev: p.dev,
                send_cq: p.send_cq,
                recv_cq: p.recv_cq,
                rq: p.rq,
                sq: p.sq,
                caps: p.caps,
                sig_all: p.sig_all,
                events: p.events,
                kernel: p.kernel,
                errored: AtomicBool::new(false),
                retry: AtomicBool::new(false),
                iw_rx_requests: AtomicU32::new(0),
                iwarp: p.iwarp,
                iw_io <- kernel::new_mutex!(None, "oxrdma_qp_iw"),
                sq_post <- post_view(slots),
                work <- new_work!("oxrdma_qp"),
                timer <- Timer::new(this),
                st <- crate::new_spinlock_bh!(QpState {
                    // An iWARP QP starts in INIT (RDMAC verbs' idle state), as on siw and
                    // iWARP hardware: rdma-core expects it.
                    state: if p.iwarp { St::Init } else { St::Reset },
                    attrs: Attrs { port: 1, ..Default::default() },
                    sq_view: RingView::new(slots),
                    req: None,
                    resp: None,
                    ops,
                    next_seq: 0,
                    recv: RecvSlot::new(),
                    write: None,
                    msg: MessageSequence::new(),
                    reads,
                    outgoing: Outgoings::new(),
                    held_ack: None,
                    unwaited: 0,
                    sqd_notify: false,
                    ud_psn: Psn::new(0),
                    uc: UcReceiver::new(Psn::new(0)),
                    iw: None,
                    dead: false,
                }, "oxrdma_qp"),
            }),
            GFP_KERNEL,
        )
    }

    /// Runs the send side now (any context but hard interrupt): takes new WQEs, handles the
    /// deadlines, transmits, completes; sets the timer for the next deadline.
    pub(crate) fn run(self: &Arc<Self>) {
        if self.iwarp {
            self.iw_run();
            return;
        }
        self.run_passes(PROCESS_PASSES);
    }

    /// [`QpInner::run`] for a process's doorbell (its POST_SEND command): right here, or,
    /// for a QP that streams ([`STREAM_UNWAITED`] unsignaled work requests taken since it
    /// last received a request) with another CPU online, from its work item on another CPU,
    /// in parallel with the process posting (which rings no doorbell meanwhile: the busy mark
    /// is set). Run here, a stream to a local peer runs on one CPU: the peer's receive and
    /// acknowledgement run in the softirq of this send, the completion in that of the
    /// acknowledgement, all before the process posts again.
    pub(crate) fn doorbell(self: &Arc<Self>) {
        if self.iwarp {
            self.iw_doorbell();
            return;
        }
        let streams = {
            let st = self.st.lock();
            st.state == St::Rts && st.unwaited >= STREAM_UNWAITED
        };
        if streams && workqueue::several_cpus_online() {
            self.sq.set_busy();
            self.kick();
            return;
        }
        self.run_passes(PROCESS_PASSES);
    }

    /// [`QpInner::run`] from softirq context, for an acknowledgement that frees the
    /// requester: one pass right here if the requester has sent everything it holds (it
    /// completes, and takes what was posted meanwhile: no worker on a latency path), else the
    /// work item sends, as it does when a task waits for the CPU ([`softirq_burst`]). A
    /// sender that also sent from each acknowledgement's softirq would send from two CPUs at
    /// once, and a veth delivers each CPU's packets on their own: reordered packets, sequence
    /// NAKs, go-back-N.
    pub(crate) fn run_softirq(self: &Arc<Self>) {
        let unsent = !self.iwarp && has_unsent(&self.st.lock());
        self.run_softirq_after(unsent);
    }

    /// [`QpInner::run_softirq`], `unsent` being [`has_unsent`] of the state the caller just
    /// released.
    pub(super) fn run_softirq_after(self: &Arc<Self>, unsent: bool) {
        if self.iwarp || softirq_burst() == 0 || unsent {
            self.kick();
            return;
        }
        self.run_passes(1);
    }

    /// Up to `passes` passes of the send side, [`BURST`] packets each; softirqs (which drain
    /// the receive backlogs of local peers) can run between passes.
    fn run_passes(self: &Arc<Self>, passes: u32) {
        for _ in 0..passes {
            let now = now_us();
            let mut budget = BURST;
            if let Some(d) = self.service(now, &mut budget) {
                self.timer.arm_earlier_us(self, d.saturating_sub(now));
            }
            self.retry_later();
            if budget > 0 {
                return;
            }
        }
        self.kick();
    }

    /// Arms the timer to run the send side again in [`NOMEM_RETRY_US`] if it left a WQE in
    /// the SQ ring for want of memory.
    fn retry_later(self: &Arc<Self>) {
        // (A load first: the flag is rarely set, and every run pass asks.)
        if self.retry.load(Ordering::Relaxed) && self.retry.swap(false, Ordering::Relaxed) {
            self.timer.arm_earlier_us(self, NOMEM_RETRY_US);
        }
    }

    /// Has the send side run soon, from the module's workqueue (any context).
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.dev.is_dead() {
            return;
        }
        // A QP's work item runs on a high-priority worker of another CPU than the one asking
        // (a process posting and polling, or the receive softirq), in parallel with it, as
        // siw's transmit threads do.
        let _ = workqueue::enqueue_on(workqueue::next_online_cpu(), self.clone());
    }

    /// Stops the QP's timer for good (process context).
    pub(crate) fn stop(&self) {
        self.timer.cancel();
    }

    /// The source address of the QP's path, once it has one.
    pub(crate) fn local_ip(&self) -> Option<IpAddr> {
        self.st.lock().attrs.path.map(|p| IpAddr::from_gid(p.sgid))
    }

    /// The device's shared state.
    pub(crate) fn dev(&self) -> &Arc<RoceDev> {
        &self.dev
    }

    /// Whether this is a QP of an iWARP device.
    pub(crate) fn is_iwarp(&self) -> bool {
        self.iwarp
    }

    /// Whether this is a kernel user's QP (else a process's).
    pub(crate) fn is_kernel(&self) -> bool {
        self.kernel
    }

    /// Whether this is a datagram QP (UD or GSI): each send names its destination, no
    /// connection, no acknowledgements.
    pub(crate) fn is_datagram(&self) -> bool {
        matches!(self.qp_type, QpType::Ud | QpType::Gsi)
    }

    // ---- verbs ------------------------------------------------------------------------------

    pub(crate) fn modify(self: &Arc<Self>, a: &QpAttrs) -> Result {
        if self.iwarp {
            return self.iw_modify(a);
        }
        if a.foreign_av {
            return Err(EINVAL);
        }
        // What a move to RTR or RTS builds, allocated first: the QP's lock is a spinlock, and a
        // failed allocation must leave the QP as it was.
        let connected = !self.is_datagram();
        let mut resp_mem = match a.state {
            Some(St::Rtr) if connected => Some(KBox::new_uninit(GFP_KERNEL)?),
            _ => None,
        };
        let mut req_mem = match a.state {
            Some(St::Rts) if connected => Some(KBox::new_uninit(GFP_KERNEL)?),
            _ => None,
        };
        let mut st = self.st.lock();
        let cur = a.cur_state.unwrap_or(st.state);
        if cur != st.state && !matches!(cur, St::Rts | St::Sqe) {
            return Err(EINVAL);
        }
        let next = a.state.unwrap_or(cur);
        if !modify_is_ok(st.state, next, self.qp_type, a.mask) {
            return Err(EINVAL);
        }
        let mut n = st.attrs;
        if let Some(p) = a.path {
            n.path = Some(p);
        }
        if let Some(m) = a.path_mtu {
            n.pmtu = m.min(self.dev.tx.active_mtu());
        }
        if let Some(q) = a.dest_qpn {
            if q >= 1 << 24 {
                return Err(EINVAL);
            }
            n.dest_qpn = q;
        }
        if let Some(v) = a.rq_psn {
            n.rq_psn = v & 0xff_ffff;
        }
        if let Some(v) = a.sq_psn {
            n.sq_psn = v & 0xff_ffff;
        }
        if let Some(v) = a.access {
            let all = access::LOCAL_WRITE
                | access::REMOTE_WRITE
                | access::REMOTE_READ
                | access::REMOTE_ATOMIC;
            n.access = v & all;
        }
        // Each attribute within its IBA range, else the whole modify fails.
        let rd = RESP_RES as u8;
        set_max(&mut n.timeout, a.timeout, 31)?;
        set_max(&mut n.retry_cnt, a.retry_cnt, 7)?;
        set_max(&mut n.rnr_retry, a.rnr_retry, 7)?;
        set_max(&mut n.min_rnr_timer, a.min_rnr_timer, 31)?;
        set_max(&mut n.max_rd_atomic, a.max_rd_atomic, MAX_RD_ATOMIC as u8)?;
        set_max(&mut n.max_dest_rd_atomic, a.max_dest_rd_atomic, rd)?;
        set_max(&mut n.pkey_index, a.pkey_index, 0)?;
        if let Some(v) = a.qkey {
            n.qkey = v;
        }
        if let Some(v) = a.port {
            if v != 1 {
                return Err(EINVAL);
            }
            n.port = v;
        }
        if next == St::Rtr
            && (n.path.is_none() || n.pmtu == 0)
            && matches!(self.qp_type, QpType::Rc | QpType::Uc)
        {
            return Err(EINVAL);
        }
        st.attrs = n;
        if a.max_dest_rd_atomic.is_some() {
            if let Some(r) = st.resp.as_mut() {
                r.grant(usize::from(n.max_dest_rd_atomic));
            }
        }
        let from = st.state;
        st.state = next;
        match next {
            St::Reset => self.reset(&mut st),
            St::Rtr if from != St::Rtr => {
                let cfg = ResponderConfig {
                    pmtu: n.pmtu,
                    ack_every: ACK_EVERY,
                    rnr_timer: n.min_rnr_timer,
                    initial_psn: Psn::new(n.rq_psn),
                    resources: usize::from(n.max_dest_rd_atomic),
                };
                if let Some(m) = resp_mem.take() {
                    st.resp = Some(init_responder(m, cfg));
                }
                st.uc = UcReceiver::new(Psn::new(n.rq_psn));
            }
            St::Rts if from == St::Rtr && !connected => st.ud_psn = Psn::new(n.sq_psn),
            St::Rts if from == St::Rtr => {
                let cfg = RequesterConfig {
                    pmtu: n.pmtu,
                    initial_psn: Psn::new(n.sq_psn),
                    window: WINDOW,
                    max_rd_atomic: u32::from(n.max_rd_atomic.max(1)),
                    timeout: n.timeout,
                    retry_cnt: n.retry_cnt,
                    rnr_retry: n.rnr_retry,
                };
                if let Some(m) = req_mem.take() {
                    st.req = Some(init_requester(m, cfg));
                }
            }
            St::Err if from != St::Err => self.to_error(&mut st, None),
            // SQD: no new WQEs are taken (only RTS takes them); what is outstanding finishes.
            St::Sqd => st.sqd_notify = a.sqd_notify,
            _ => {}
        }
        drop(st);
        self.kick();
        Ok(())
    }

    pub(crate) fn query(&self) -> QpAttrs {
        let st = self.st.lock();
        let a = st.attrs;
        QpAttrs {
            mask: 0,
            state: Some(st.state),
            cur_state: Some(st.state),
            path_mtu: Some(if a.pmtu == 0 { 1024 } else { a.pmtu }),
            dest_qpn: Some(a.dest_qpn),
            rq_psn: Some(match (self.qp_type, st.resp.as_ref()) {
                (QpType::Uc, _) if st.state != St::Reset && st.state != St::Init => {
                    st.uc.epsn().get()
                }
                (_, Some(r)) => r.epsn().get(),
                _ => a.rq_psn,
            }),
            sq_psn: Some(st.req.as_ref().map_or(a.sq_psn, |r| r.next_psn().get())),
            access: Some(a.access),
            timeout: Some(a.timeout),
            retry_cnt: Some(a.retry_cnt),
            rnr_retry: Some(a.rnr_retry),
            min_rnr_timer: Some(a.min_rnr_timer),
            max_rd_atomic: Some(a.max_rd_atomic),
            max_dest_rd_atomic: Some(a.max_dest_rd_atomic),
            qkey: Some(a.qkey),
            pkey_index: Some(a.pkey_index),
            port: Some(a.port),
            path: a.path,
            caps: self.caps,
            sig_all: self.sig_all,
            sqd_notify: false,
            foreign_av: false,
        }
    }

    /// Posts a kernel user's receive WR to the QP's own receive queue (any context).
    pub(crate) fn post_recv(self: &Arc<Self>, wr: &RecvWr<'_>) -> Result {
        if !self.kernel || self.rq.is_shared() {
            return Err(EINVAL);
        }
        self.rq.post(wr)?;
        // In the error state the send side flushes it (ib_drain_rq waits for that). Pairs with
        // the fence in `to_error`: either this sees the flag or that flush sees the WR.
        fence(Ordering::SeqCst);
        if self.errored.load(Ordering::Relaxed) {
            self.kick();
        }
        Ok(())
    }

    /// Destroy: no more processing (process context); the device forgets the QP next.
    pub(crate) fn destroy(self: &Arc<Self>) {
        if self.iwarp {
            self.iw_destroy();
        }
        self.stop();
        let mut st = self.st.lock();
        st.dead = true;
        st.req = None;
        st.resp = None;
        st.recv.clear();
        st.write = None;
        st.msg = MessageSequence::new();
        for r in st.reads.iter_mut() {
            *r = None;
        }
        st.outgoing.clear_all();
        st.held_ack = None;
        for o in st.ops.iter_mut() {
            *o = None;
        }
    }

    fn reset(&self, st: &mut QpState) {
        self.errored.store(false, Ordering::Relaxed);
        if !self.rq.is_shared() {
            self.rq.mark_error(false);
        }
        st.req = None;
        st.resp = None;
        st.recv.clear();
        st.write = None;
        st.msg = MessageSequence::new();
        for r in st.reads.iter_mut() {
            *r = None;
        }
        st.outgoing.clear_all();
        st.held_ack = None;
        st.iw = None;
        for o in st.ops.iter_mut() {
            *o = None;
        }
        // Discard what is queued, without completions.
        if self.sq.refresh(&mut st.sq_view).is_ok() {
            while st.sq_view.consume() {}
            self.sq.publish_consumer(st.sq_view.consumer());
        }
        self.sq.clear_busy();
    }

    /// Moves to the error state: completes the work in flight and queued with
    /// `WR_FLUSH_ERR` (the first in-flight one with `first`, if given).
    fn to_error(&self, st: &mut QpState, first: Option<u8>) {
        st.state = St::Err;
        self.errored.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if let Some(req) = st.req.as_mut() {
            req.flush();
        }
        if let Some(s) = first {
            if let Some(Some(op)) = st.ops.iter_mut().find(|o| o.is_some()) {
                op.local_error.get_or_insert(s);
            }
        }
        self.complete_sends(st);
        if self.iwarp {
            self.iw_flush_ops(st, first);
        }
        // Unfinished in-flight ops the requester never saw.
        st.recv.clear();
        st.write = None;
        st.msg = MessageSequence::new();
        st.outgoing.clear_all();
        st.held_ack = None;
        self.flush_queues(st);
        self.sq.clear_busy();
    }

    /// The process corrupted one of the QP's rings (`queue` names it in the log): the QP goes
    /// to the error state (`first` as for [`Self::to_error`]) and raises `IB_EVENT_QP_FATAL`.
    fn ring_corrupt(&self, st: &mut QpState, queue: &str, f: RingFault, first: Option<u8>) {
        pr_info!(
            "QP {}: invalid {} ({:?}); QP in error\n",
            self.qpn,
            queue,
            f
        );
        self.to_error(st, first);
        self.events.raise(QpEvent::Fatal);
    }

    fn flush_queues(&self, st: &mut QpState) {
        // Send WQEs still in the ring.
        if self.sq.refresh(&mut st.sq_view).is_ok() {
            while let Some(slot) = st.sq_view.peek() {
                let wr_id = self.sq.wr_id_at(slot);
                st.sq_view.consume();
                self.send_cq.push(
                    &Cqe {
                        wr_id,
                        status: wc_status::WR_FLUSH_ERR,
                        qp_num: self.qpn,
                        ..Default::default()
                    },
                    false,
                    &self.events,
                );
            }
            self.sq.publish_consumer(st.sq_view.consumer());
        }
        // Receive WQEs (not those of a shared SRQ). A process's receives posted from now on
        // come with a doorbell, which runs the QP, which flushes again.
        if !self.rq.is_shared() {
            self.rq.mark_error(true);
            let qpn = self.qpn;
            let cq = &self.recv_cq;
            self.rq.drain(|wr_id| {
                cq.push(
                    &Cqe {
                        wr_id,
                        status: wc_status::WR_FLUSH_ERR,
                        opcode: wc_opcode::RECV,
                        qp_num: qpn,
                        ..Default::default()
                    },
                    false,
                    &self.events,
                )
            });
        }
    }
}

// The requester (8 KiB: its WQE window) and the responder are written into their allocation
// rather than built on the stack and moved (kernel stacks are 16 KiB, and `modify` also opens
// the UDP tunnel, deep in the network stack); each in its own frame.

#[inline(never)]
fn init_requester(
    m: KBox<core::mem::MaybeUninit<Requester<REQ_WQES>>>,
    cfg: RequesterConfig,
) -> KBox<Requester<REQ_WQES>> {
    m.write(Requester::new(cfg))
}

#[inline(never)]
fn init_responder(
    m: KBox<core::mem::MaybeUninit<Responder<RESP_RES>>>,
    cfg: ResponderConfig,
) -> KBox<Responder<RESP_RES>> {
    m.write(Responder::new(cfg))
}

/// Stores `v` into `field` if given and at most `max`; `EINVAL` otherwise.
fn set_max<T: PartialOrd + Copy>(field: &mut T, v: Option<T>, max: T) -> Result {
    match v {
        Some(v) if v > max => Err(EINVAL),
        Some(v) => {
            *field = v;
            Ok(())
        }
        None => Ok(()),
    }
}

/// Walks the buffer the SGEs describe from byte `offset` on for `len` bytes: for each piece,
/// the MR its L_Key names, the access the SGE grants (L_Key, PD, local write if `write`, the
/// SGE's whole range, checked again at each use) and `f(mr, access, offset in the SGE, range
/// in the caller's buffer)`.
fn walk_sges(
    dev: &RoceDev,
    pdn: u32,
    sges: &[Sge],
    offset: u64,
    len: usize,
    mut f: impl FnMut(&Mr, &Access, u64, core::ops::Range<usize>) -> Result<(), MrError>,
) -> Result<(), u8> {
    let mut skip = offset;
    let mut done = 0usize;
    for s in sges.iter() {
        if done == len {
            break;
        }
        let sl = u64::from(s.length);
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let n = ((sl - skip) as usize).min(len - done);
        let a = Access {
            key: s.lkey,
            pdn,
            remote: false,
            va: s.addr,
            len: sl,
        };
        let mr = dev.mr_slot(s.lkey).ok_or(wc_status::LOC_PROT_ERR)?;
        f(&mr, &a, skip, done..done + n).map_err(|_| wc_status::LOC_PROT_ERR)?;
        done += n;
        skip = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(wc_status::LOC_LEN_ERR)
    }
}

/// Copies `buf.len()` bytes of the message of `op` from byte `offset` on into `buf`.
fn gather(dev: &RoceDev, pdn: u32, op: &SendOp, offset: usize, buf: &mut [u8]) -> Result<(), u8> {
    if !op.inline.is_empty() {
        let src = op
            .inline
            .get(offset..offset + buf.len())
            .ok_or(wc_status::LOC_LEN_ERR)?;
        buf.copy_from_slice(src);
        return Ok(());
    }
    let len = buf.len();
    walk_sges(dev, pdn, &op.sges, offset as u64, len, |mr, a, at, r| {
        mr.read(a, at, &mut buf[r])
    })
}

/// Copies `data` into the buffer the SGEs describe, from byte `offset` on.
fn scatter(dev: &RoceDev, pdn: u32, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), u8> {
    walk_sges(dev, pdn, sges, offset, data.len(), |mr, a, at, r| {
        mr.write(a, at, &data[r])
    })
}
