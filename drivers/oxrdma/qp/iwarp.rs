// SPDX-License-Identifier: GPL-2.0
//! The iWARP data path of an RC QP: RDMAP messages in DDP segments framed by MPA over the QP's
//! TCP connection (RFC 5040, 5041, 5044).
//!
//! Two parts, two locks. The protocol state ([`IwProto`]: framing, message sequence numbers,
//! the message being sent, inbound RDMA READs and atomics to answer, the segment being
//! received) is in
//! the QP's [`QpState`], under its spinlock, like the RoCE engine's. The socket's transmit
//! side and its buffers ([`IwIo`]) are under a sleeping mutex, taken first, only in process
//! context: the QP's work item, or the doorbell system call of a process.
//!
//! Receiving happens where the bytes arrive: in the socket's `data_ready` callback (the
//! receive softirq, or the socket owner's backlog processing), which reads the socket's
//! buffers in place and feeds them to the deframer under the QP's lock; payload goes straight
//! from the socket's buffers into its destination (one copy), and receive completions are
//! posted right there. What needs the transmit side (an RDMA READ or atomic to answer, a
//! freed ORD credit, the end of the connection) queues the work item.
//!
//! One run of [`QpInner::iw_run`] plans what can be sent ([`plan::TxPlan`]: FPDUs framed
//! into the transmit buffer, or, on streams without CRCs and markers, their headers there and
//! their payload left in the pages of process memory regions, which the socket references
//! and sends from) and hands it to the socket until the socket is full (its `write_space`
//! callback queues the work item again), and ends the connection when it must.
//!
//! Completions: a SEND or RDMA WRITE completes once its last byte is in the socket (as siw's
//! do) or, when payload left without a copy, once the peer acknowledged it (until then TCP
//! may send those pages again, and the process must not reuse them: the socket's
//! acknowledgements are watched from the first such payload on); an RDMA READ once its last
//! response byte is placed, an atomic (RFC 7306) once its response brought the original
//! value; in posting order.
//!
//! The end of a connection: the peer closing (end of stream) reports `Disconnect`; any error
//! (a TERMINATE received or sent, the socket's error, the QP moved to the error state) aborts
//! the connection; either way the QP goes to the error state, its work is flushed, and
//! `Close` is reported, once, after which the iw_cm lets go of the QP.

use super::*;
use crate::ox::error::code;
use crate::ox::params;
use crate::ox::rdma::iwcm::{CmId, Event as CmEvent, EventKind};
use crate::ox::tcp::{TcpEvents, TcpInput, TcpSocket};
use crate::tx::KernelCrc32c;
use crate::uapi::queue::{WC_FLAG_WITH_IMM, WQE_FLAG_SOLICITED};
use crate::wire::iwarp::ddp::{
    self, AtomicOp, AtomicRequest, AtomicResponse, Opcode as Rdmap, Placement, RdmapHeader,
    ReadRequest, Segment, TermCode, Terminate, UntaggedQueue, QN_ATOMIC_RESPONSE, QN_READ_REQUEST,
    QN_SEND, QN_TERMINATE,
};
use crate::wire::iwarp::mpa::{Framer, Rtr, CRC_LEN, LEN_FIELD, MARKER_LEN};
use crate::wire::iwarp::stream::{Deframer, Event};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::types::ARef;
use plan::{PageList, TxPlan, ITEMS_PER_FPDU};

mod plan;

/// Requests received from the peer since the QP last took a work request, from which its
/// doorbell leaves the sending to the work item ([`QpInner::iw_doorbell`]).
pub(super) const RX_STREAM: u32 = 2;
/// Bytes the transmit buffer holds (several FPDUs handed to the socket at once).
const TX_BUF: usize = 64 * 1024;
/// The largest ULPDU sent (a larger MSS, on `lo` for one, gets FPDUs of this size): its
/// FPDU, markers included, always fits the transmit buffer.
const MAX_MULPDU: u16 = 32 * 1024;
const _: () = assert!(TX_BUF >= 2 * MAX_MULPDU as usize);
/// Transmit buffer fills of one run of the work item.
const TX_PASSES: u32 = 16;
/// Transmit buffer fills a process's doorbell sends itself: the rest goes to the work item,
/// on another CPU, while the process goes on posting and polling (one fill covers a
/// latency-bound exchange).
const DOORBELL_PASSES: u32 = 1;
/// The smallest FPDU payload sent without a copy (smaller ones cost less copied).
const ZC_MIN: usize = 4096;
/// `iwarp_zcopy` bits: RDMA READ responses, SENDs and RDMA WRITEs.
const ZC_READ_RESPONSES: u32 = 1;
const ZC_SEND_QUEUE: u32 = 2;
/// Groups of completions waiting for acknowledgements a QP tracks (more are merged).
const ACK_WAITS: usize = 16;
/// Inbound RDMA READs and atomics a QP answers at once at most (its IRD).
pub(crate) const MAX_IRD: u16 = 128;

/// This side's part in the ready-to-receive exchange of peer-to-peer mode (RFC 6581).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RtrRole {
    /// Client-server mode: nothing to send or wait for.
    None,
    /// The initiator: this message goes out before anything else.
    Send(Rtr),
    /// The responder: nothing goes out before this message came in.
    Await(Rtr),
}

/// What the connection negotiated, for [`QpInner::iw_attach`].
pub(crate) struct IwParams {
    /// Peer-to-peer mode.
    pub(crate) rtr: RtrRole,
    /// CRCs sent and checked.
    pub(crate) crc: bool,
    /// Markers in what this side sends.
    pub(crate) markers_tx: bool,
    /// Markers in what this side receives.
    pub(crate) markers_rx: bool,
    /// Inbound RDMA READs and atomics this side answers at once.
    pub(crate) ird: u16,
    /// Outbound RDMA READs and atomics this side may have outstanding.
    pub(crate) ord: u16,
    /// Both sides speak RFC 7306's extensions.
    pub(crate) rdmap_ext: bool,
    /// The largest ULPDU to send.
    pub(crate) mulpdu: u16,
}

/// The socket side of a connected QP (process context, under `QpInner::iw_io`).
pub(crate) struct IwIo {
    sock: TcpSocket,
    cm: ARef<CmId>,
    /// What goes to the socket next.
    plan: TxPlan,
    /// The socket's events (and whether the run waits for send space).
    waker: Arc<Waker>,
    /// Payload gathered for the segment being framed (streams with markers).
    scratch: KVec<u8>,
    /// The peer closed its direction.
    eof: bool,
    /// `Disconnect` reported.
    disconnected: bool,
}

/// A bounded FIFO in a heap array (6.12's `KVec` has no removal from the front).
struct Fifo<T: Copy + Default> {
    buf: KVec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy + Default> Fifo<T> {
    fn new(cap: usize) -> Result<Self> {
        Ok(Self {
            buf: KVec::from_elem(T::default(), cap, GFP_KERNEL)?,
            head: 0,
            len: 0,
        })
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push(&mut self, v: T) -> bool {
        let cap = self.buf.len();
        if self.len == cap {
            return false;
        }
        self.buf[(self.head + self.len) % cap] = v;
        self.len += 1;
        true
    }

    fn front(&self) -> Option<T> {
        (self.len > 0).then(|| self.buf[self.head])
    }

    fn pop(&mut self) -> Option<T> {
        let v = self.front()?;
        self.head = (self.head + 1) % self.buf.len();
        self.len -= 1;
        Some(v)
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    fn back_mut(&mut self) -> Option<&mut T> {
        let cap = self.buf.len();
        if self.len == 0 {
            return None;
        }
        self.buf.get_mut((self.head + self.len - 1) % cap)
    }
}

/// Operations (bits `seq % REQ_WQES`) whose bytes are in the socket and which complete once
/// the peer acknowledged the stream up to `end` (a TCP sequence number).
#[derive(Clone, Copy, Default)]
struct AckWait {
    end: u32,
    bits: u128,
}

/// Whether the peer acknowledged the stream up to `end`, `acked` being its first byte not
/// acknowledged (TCP sequence numbers, modulo 2^32).
fn acked_up_to(acked: u32, end: u32) -> bool {
    acked.wrapping_sub(end) as i32 >= 0
}

/// A request on the read request queue (RDMA READs and RFC 7306's atomics share it, and
/// the ORD and IRD), answered in the order it came.
#[derive(Clone, Copy)]
enum Inbound {
    Read(ReadRequest),
    Atomic(AtomicRequest),
}

impl Default for Inbound {
    /// The queue's fill value (never answered).
    fn default() -> Self {
        Self::Read(ReadRequest::default())
    }
}

/// Attempts of a masked atomic's compare-and-swap loop before the target is deemed
/// contended beyond reason (the CPU changing it under every attempt).
const ATOMIC_TRIES: u32 = 64;

/// The inbound RDMA READ being answered.
struct Responding {
    req: ReadRequest,
    mr: Arc<Mr>,
    access: Access,
    sent: u32,
}

/// Where the payload of the segment being received goes.
enum RxSeg {
    /// Nowhere (no payload, or a TERMINATE's copy of headers).
    Discard,
    /// An RDMA WRITE: into an MR of this side, through the segment's access.
    Write {
        mr: Arc<Mr>,
        access: Access,
        at: u64,
    },
    /// A SEND: into the receive WQE in progress, at this offset.
    Recv { at: u64 },
    /// An RDMA READ response: into the SGEs of the READ `seq`, at this offset.
    ReadResp { seq: u64, at: u64 },
    /// A request on the read request queue, acted on once its segment is whole (CRC
    /// checked).
    Request(Inbound),
    /// An atomic response to the operation `seq`, with the target's original value.
    AtomicResp { seq: u64, orig: u64 },
}

/// The message being sent from the send queue.
struct TxMsg {
    seq: u64,
    /// The first segment's header (placement at the message start) of the message being
    /// sent: the operation's, or the immediate data that follows an RDMA WRITE with
    /// immediate.
    first: Segment,
    /// Payload bytes of the message.
    len: u32,
    sent: u32,
}

/// The protocol state of a connected QP (under the QP's lock).
pub(crate) struct IwProto {
    framer: Framer,
    deframer: Deframer,
    /// The CRC engine of both.
    crc: KernelCrc32c,
    mulpdu: u16,
    ird: u16,
    ord: u16,
    /// Both sides speak RFC 7306's immediate data and atomics.
    ext: bool,
    /// The next operation (sequence) to start sending; operations before it are sent (or
    /// being sent: `tx_msg`).
    tx_seq: u64,
    /// The oldest operation not completed.
    done_seq: u64,
    tx_msg: Option<TxMsg>,
    /// Operations whose work is done (bit `seq % REQ_WQES`), completed in order.
    finished: u128,
    /// Operations framed whose bytes must reach the socket before they complete.
    unflushed: u128,
    /// The end (TCP sequence) of the last payload sent from pages, until acknowledged: what
    /// completes before then waits for acknowledgements.
    zc_end: Option<u32>,
    /// Completions waiting for acknowledgements, oldest first.
    acks_wait: Fifo<AckWait>,
    /// Outbound message sequence numbers (last used) of the send, read request and atomic
    /// response queues.
    send_msn: u32,
    read_msn: u32,
    atomic_msn: u32,
    /// RDMA READs and atomics sent and not yet answered, oldest first (sequences): the
    /// responder answers them in this order.
    outstanding: Fifo<u64>,
    /// Bytes of the oldest READ's response placed.
    read_got: u64,
    rx_send: UntaggedQueue,
    rx_read: UntaggedQueue,
    rx_term: UntaggedQueue,
    rx_atomic: UntaggedQueue,
    /// Payload bytes of the RDMA WRITE message being received, and of the last one that
    /// ended: the length an immediate data message that follows reports.
    rx_write: u32,
    last_write: Option<u32>,
    rx_seg: RxSeg,
    /// The header of the segment being received.
    rx_hdr: Option<Segment>,
    inbound: Fifo<Inbound>,
    responding: Option<Responding>,
    /// Peer-to-peer mode: the initiator's ready-to-receive message, still to be sent.
    rtr_send: Option<Rtr>,
    /// Peer-to-peer mode: the responder sends nothing before this message came in.
    rtr_wait: Option<Rtr>,
    /// The initiator sent a zero-length RDMA READ as its ready-to-receive message: its
    /// (empty) response comes before any other.
    rtr_response: bool,
    /// A TERMINATE to send before the connection is aborted.
    terminate: Option<TermCode>,
    /// The connection must end (error, or the peer closed).
    abort: bool,
}

const _: () = assert!(REQ_WQES <= 128, "one bit per operation slot in a u128");

impl IwProto {
    fn new(p: &IwParams, mulpdu: u16, crc: KernelCrc32c) -> Result<Self> {
        Ok(Self {
            framer: Framer::new(p.crc, p.markers_tx),
            deframer: Deframer::new(p.crc, p.markers_rx),
            crc,
            mulpdu,
            ird: p.ird.clamp(1, MAX_IRD),
            ord: p.ord.max(1),
            ext: p.rdmap_ext,
            tx_seq: 0,
            done_seq: 0,
            tx_msg: None,
            finished: 0,
            unflushed: 0,
            zc_end: None,
            acks_wait: Fifo::new(ACK_WAITS)?,
            send_msn: 0,
            read_msn: 0,
            atomic_msn: 0,
            outstanding: Fifo::new(MAX_RD_ATOMIC)?,
            read_got: 0,
            rx_send: UntaggedQueue::new(),
            rx_read: UntaggedQueue::new(),
            rx_term: UntaggedQueue::new(),
            rx_atomic: UntaggedQueue::new(),
            rx_write: 0,
            last_write: None,
            rx_seg: RxSeg::Discard,
            rx_hdr: None,
            inbound: Fifo::new(MAX_IRD.into())?,
            responding: None,
            rtr_send: match p.rtr {
                RtrRole::Send(r) => Some(r),
                _ => None,
            },
            rtr_wait: match p.rtr {
                RtrRole::Await(r) => Some(r),
                _ => None,
            },
            rtr_response: false,
            terminate: None,
            abort: false,
        })
    }
}

fn bit(seq: u64) -> u128 {
    1 << (seq % REQ_WQES as u64)
}

/// Queues the QP's work item when its socket has something for it.
struct Waker {
    dev: Arc<RoceDev>,
    qpn: u32,
    /// A run is about to find the socket full, or found it so: the next send space runs the
    /// QP again.
    blocked: AtomicBool,
}

impl Waker {
    fn wake(&self) {
        if let Some(qp) = self.dev.qp(self.qpn) {
            qp.kick();
        }
    }
}

impl TcpEvents for Waker {
    fn data_ready(&self, input: &mut TcpInput<'_>) {
        if let Some(qp) = self.dev.qp(self.qpn) {
            let mut wake = false;
            // A read error is the socket's: the run that the state change queues ends it.
            let _ = input.read(|piece| qp.iw_piece(piece, &mut wake));
            if wake || input.closed() {
                qp.kick();
            }
        }
    }
    fn write_space(&self, acked: u32) {
        if let Some(qp) = self.dev.qp(self.qpn) {
            qp.iw_acked_now(acked);
            if self.blocked.swap(false, Ordering::AcqRel) {
                qp.kick();
            }
        }
    }
    fn state_change(&self) {
        self.wake();
    }
}

/// The TERMINATE code of an MR access that failed.
fn term_of(e: MrError, tagged: bool) -> TermCode {
    match (e, tagged) {
        (MrError::Key, _) => TermCode::RDMAP_INVALID_STAG,
        (MrError::Bounds, _) => TermCode::RDMAP_BASE_BOUNDS,
        (MrError::Pd, _) => TermCode::RDMAP_STAG_NOT_ASSOCIATED,
        _ => TermCode::RDMAP_ACCESS,
    }
}

impl QpInner {
    // ---- connection ------------------------------------------------------------------------

    /// Connects the QP to `sock`, whose MPA exchange negotiated `p`: the QP moves to RTS and
    /// `report` tells the iw_cm (the connection's `ConnectReply` or `Established`) before any
    /// other event of the connection can be reported. Process context.
    pub(crate) fn iw_attach(
        self: &Arc<Self>,
        mut sock: TcpSocket,
        cm: ARef<CmId>,
        p: &IwParams,
        report: impl FnOnce(&CmId) -> Result,
    ) -> Result {
        if !self.iwarp || self.qp_type != QpType::Rc {
            return Err(EINVAL);
        }
        let mulpdu = p.mulpdu.min(MAX_MULPDU);
        let proto = KBox::new(IwProto::new(p, mulpdu, self.dev.crc32c)?, GFP_KERNEL)?;
        let plan = TxPlan::new(TX_BUF)?;
        let scratch = KVec::from_elem(0u8, usize::from(mulpdu), GFP_KERNEL)?;
        let waker = Arc::new(
            Waker {
                dev: self.dev.clone(),
                qpn: self.qpn,
                blocked: AtomicBool::new(false),
            },
            GFP_KERNEL,
        )?;
        let mut io = self.iw_io.lock();
        if io.is_some() {
            return Err(code::eaddrinuse());
        }
        {
            let mut st = self.st.lock();
            if st.dead || !matches!(st.state, St::Init | St::Rtr | St::Rts) {
                return Err(EINVAL);
            }
            st.state = St::Rts;
            st.iw = Some(proto);
            self.iw_rx_requests.store(0, Ordering::Relaxed);
        }
        let attached = sock.watch(waker.clone()).and_then(|()| report(&cm));
        if let Err(e) = attached {
            let mut st = self.st.lock();
            st.iw = None;
            self.to_error(&mut st, None);
            return Err(e);
        }
        *io = Some(IwIo {
            sock,
            cm,
            plan,
            waker,
            scratch,
            eof: false,
            disconnected: false,
        });
        // Data may have come with the MPA exchange's last segment, before the socket was
        // watched: what arrives from now on, its callback receives.
        if let Some(io) = io.as_ref() {
            let mut wake = false;
            let _ = io.sock.read(|piece| self.iw_piece(piece, &mut wake));
        }
        drop(io);
        self.kick();
        Ok(())
    }

    /// The verbs' `modify_qp` of an iWARP QP: the IBA states without paths (the connection
    /// provides them), SQD as the graceful close the iw_cm asks for, the error state as the
    /// abortive one.
    pub(super) fn iw_modify(self: &Arc<Self>, a: &QpAttrs) -> Result {
        let mut st = self.st.lock();
        let cur = st.state;
        let next = a.state.unwrap_or(cur);
        if cur == St::Err && next == St::Sqd {
            // The iw_cm's graceful disconnect of a connection that already ended (the peer
            // closed it first; the iw_cm learns that from the events queued for it): nothing
            // to do, as on siw.
            return Ok(());
        }
        let ok = matches!(
            (cur, next),
            (_, St::Err | St::Reset)
                | (St::Reset, St::Init)
                | (St::Init, St::Init | St::Rtr | St::Rts)
                | (St::Rtr, St::Rtr | St::Rts)
                | (St::Rts, St::Rts | St::Sqd)
                | (St::Sqd, St::Sqd)
        );
        if !ok {
            return Err(EINVAL);
        }
        // Everything is checked before anything changes: a refused modify leaves the QP as
        // it was.
        let mut attrs = st.attrs;
        if let Some(v) = a.access {
            let all = access::LOCAL_WRITE
                | access::REMOTE_WRITE
                | access::REMOTE_READ
                | access::REMOTE_ATOMIC;
            attrs.access = v & all;
        }
        set_max(
            &mut attrs.max_rd_atomic,
            a.max_rd_atomic,
            MAX_RD_ATOMIC as u8,
        )?;
        set_max(
            &mut attrs.max_dest_rd_atomic,
            a.max_dest_rd_atomic,
            MAX_IRD as u8,
        )?;
        match next {
            St::Reset if st.iw.is_some() => return Err(EBUSY),
            // Before the connection is up there is nothing to close, and nothing to send
            // on: the connection manager moves the QP to RTS (as siw requires too).
            St::Sqd | St::Rts if st.iw.is_none() => return Err(EINVAL),
            _ => {}
        }
        st.attrs = attrs;
        match next {
            St::Reset => {
                st.state = St::Reset;
                self.reset(&mut st);
            }
            St::Err if cur != St::Err => {
                self.to_error(&mut st, None);
                if let Some(iw) = st.iw.as_mut() {
                    iw.abort = true;
                }
            }
            _ => st.state = next,
        }
        drop(st);
        self.kick();
        Ok(())
    }

    /// Ends the connection for the QP's destroy: aborts it and reports `Close`, so that the
    /// iw_cm drops its references on the QP. Process context.
    pub(super) fn iw_destroy(self: &Arc<Self>) {
        let io = self.iw_io.lock().take();
        if let Some(io) = io {
            self.iw_close(io, true);
        }
    }

    /// Closes the connection: aborts it (`abort`) or lets the socket finish what it has,
    /// then reports `Close` (the iw_cm's reference on the identifier goes with `io`).
    fn iw_close(&self, io: IwIo, abort: bool) {
        if abort {
            io.sock.set_abort_on_close();
        }
        io.sock.shutdown();
        let mut ev = CmEvent::new(EventKind::Close);
        ev.status = if abort {
            code::econnreset().to_errno()
        } else {
            0
        };
        let _ = io.cm.event(&ev);
        drop(io);
    }

    // ---- the run ---------------------------------------------------------------------------

    /// Receives, transmits and completes what the connection allows now; ends it on an error
    /// or when the peer closed. Process context.
    /// Runs the QP from its work item: up to [`TX_PASSES`] transmit buffer fills.
    pub(super) fn iw_run(self: &Arc<Self>) {
        self.iw_run_passes(TX_PASSES);
    }

    /// Runs the QP from a process's doorbell: up to [`DOORBELL_PASSES`] transmit buffer
    /// fills, the rest from the work item; or, for a QP that receives a stream
    /// ([`RX_STREAM`] requests since it last took a work request), only has the work item
    /// run. That CPU's softirq work is then heavy enough to run in `ksoftirqd`, which a
    /// busy-polling process holds off: what the process's system call sent would wait in
    /// the CPU's backlog, and the peer with it (a receiver's rare zero-length WRITEs held
    /// `ib_send_bw` between namespaces at a quarter of its rate). A ping-pong receives one
    /// request per turn, and its turn leaves from the system call, without a hop.
    pub(super) fn iw_doorbell(self: &Arc<Self>) {
        if self.iw_rx_requests.load(Ordering::Relaxed) >= RX_STREAM {
            self.kick();
            return;
        }
        self.iw_run_passes(DOORBELL_PASSES);
    }

    /// Transmits (at most `passes` transmit buffer fills, then the work item goes on),
    /// completes, and ends the connection when it is over.
    fn iw_run_passes(self: &Arc<Self>, passes: u32) {
        let mut guard = self.iw_io.lock();
        let Some(io) = guard.as_mut() else {
            drop(guard);
            // Not connected: an error state still flushes what is posted.
            let mut st = self.st.lock();
            if st.state == St::Err && !st.dead {
                self.flush_queues(&mut st);
                self.iw_flush_ops(&mut st, None);
            }
            return;
        };
        let mut again = false;
        let mut sock_err = false;
        // Everything the peer sent before it closed is received (by the socket's callback).
        io.eof = io.eof || io.sock.input_closed();
        // Transmit. A pass that ends holding the QP's lock keeps it for the end of the
        // connection below, rather than giving it back and taking it again.
        let mut fills = 0;
        let mut held = None;
        // The last fill left the send queue idle, its busy mark clear: what the process posts
        // after that rings the doorbell again (a run of its own, after this one), and what
        // the peer's messages bring runs the QP too, so no fill is needed after sending.
        let mut idle = false;
        loop {
            if !io.plan.is_sent() {
                // Set before trying: send space that frees up once the socket refused
                // (whenever that is) finds it set, and runs the QP again.
                io.waker.blocked.store(true, Ordering::Release);
                match io.plan.send(&io.sock) {
                    Ok(true) => io.waker.blocked.store(false, Ordering::Relaxed),
                    Ok(false) => break,
                    Err(_) => {
                        sock_err = true;
                        break;
                    }
                }
            }
            let pages = io.plan.had_pages();
            io.plan.reset();
            fills += 1;
            let mut st = self.st.lock();
            if self.iw_flushed(&mut st, pages, || io.sock.queued_end()) {
                // Acknowledgements that came before they were watched are seen here.
                io.sock.watch_acks();
                self.iw_acked(&mut st, io.sock.acked());
            }
            if !idle {
                idle = self.iw_fill(&mut st, &mut io.plan, &mut io.scratch);
            }
            if io.plan.is_sent() {
                // Nothing to send: what finished without sending completes now.
                self.iw_complete(&mut st);
                held = Some(st);
                break;
            }
            if fills > passes {
                // The work item sends what is planned, and goes on.
                again = true;
                held = Some(st);
                break;
            }
        }
        // The end of the connection.
        let mut st = match held {
            Some(st) => st,
            None => self.st.lock(),
        };
        let sqd = st.state == St::Sqd;
        let Some(iw) = st.iw.as_mut() else {
            return;
        };
        let graceful = sqd && io.plan.is_sent() && iw.tx_msg.is_none() && iw.acks_wait.is_empty();
        let abort = iw.abort || sock_err || io.sock.error().is_some();
        // Events go to the iw_cm with the QP's lock dropped: its handler takes the
        // identifier's lock, which must not nest inside a lock softirqs take.
        let disconnect = io.eof && !io.disconnected;
        io.disconnected |= disconnect;
        let report_disconnect = |io: &IwIo| {
            if disconnect {
                let _ = io.cm.event(&CmEvent::new(EventKind::Disconnect));
            }
        };
        if abort || io.eof || graceful {
            if st.state != St::Err {
                self.to_error(&mut st, None);
            } else {
                // Already there (the connection manager moved it): what was posted since
                // (a process's doorbell may be what runs the QP now) is flushed too.
                self.flush_queues(&mut st);
            }
            // A TERMINATE goes out first, if the socket takes it (framed under the QP's
            // lock, sent after it: sending may sleep).
            let mut term = [0u8; 64];
            let term_len = match st.iw.as_mut() {
                Some(iw) => iw
                    .terminate
                    .take()
                    .and_then(|t| frame_terminate(iw, t, &mut term)),
                None => None,
            };
            st.iw = None;
            drop(st);
            report_disconnect(io);
            if let Some(n) = term_len {
                let _ = io.sock.send(&[&term[..n]], false);
            }
            if let Some(io) = guard.take() {
                self.iw_close(io, abort);
            }
            return;
        }
        drop(st);
        report_disconnect(io);
        drop(guard);
        if again {
            self.kick();
        }
        self.retry_later();
    }

    /// The plan reached the socket, whose stream now ends at `end()` (`pages`: some of its
    /// payload left without a copy): what was framed into it completes, now or once the peer
    /// acknowledged that end (asked for only then). Returns whether completions wait for
    /// acknowledgements.
    fn iw_flushed(&self, st: &mut QpState, pages: bool, end: impl FnOnce() -> u32) -> bool {
        let mut waits = false;
        if let Some(iw) = st.iw.as_mut() {
            let bits = core::mem::take(&mut iw.unflushed);
            let end = (pages || (bits != 0 && iw.zc_end.is_some())).then(end);
            if pages {
                iw.zc_end = end;
            }
            if let (Some(end), true) = (end, bits != 0) {
                let w = AckWait { end, bits };
                if !iw.acks_wait.push(w) {
                    // Full: the newest group waits for this end too (later, so still right).
                    if let Some(last) = iw.acks_wait.back_mut() {
                        last.end = end;
                        last.bits |= bits;
                    }
                }
            } else {
                iw.finished |= bits;
            }
            waits = iw.zc_end.is_some();
        }
        self.iw_complete(st);
        waits
    }

    /// The peer acknowledged the stream up to `acked`: what waited for that completes.
    fn iw_acked(&self, st: &mut QpState, acked: u32) {
        let Some(iw) = st.iw.as_mut() else { return };
        if iw.zc_end.is_some_and(|e| acked_up_to(acked, e)) {
            iw.zc_end = None;
        }
        let mut any = false;
        while let Some(w) = iw.acks_wait.front() {
            if !acked_up_to(acked, w.end) {
                break;
            }
            iw.finished |= w.bits;
            iw.acks_wait.pop();
            any = true;
        }
        if any {
            self.iw_complete(st);
        }
    }

    /// [`QpInner::iw_acked`] from the socket's callback (softirq): a graceful close that
    /// waited for the last acknowledgement runs the QP.
    fn iw_acked_now(self: &Arc<Self>, acked: u32) {
        let mut st = self.st.lock();
        let Some(iw) = st.iw.as_ref() else { return };
        if iw.acks_wait.is_empty() && iw.zc_end.is_none() {
            return;
        }
        self.iw_acked(&mut st, acked);
        let close = st.state == St::Sqd && st.iw.as_ref().is_some_and(|i| i.acks_wait.is_empty());
        drop(st);
        if close {
            self.kick();
        }
    }

    /// Completes the finished operations, oldest first, up to the first unfinished one.
    fn iw_complete(&self, st: &mut QpState) {
        loop {
            let Some(iw) = st.iw.as_mut() else { return };
            let seq = iw.done_seq;
            if seq == iw.tx_seq || iw.finished & bit(seq) == 0 {
                return;
            }
            iw.finished &= !bit(seq);
            iw.done_seq += 1;
            let idx = (seq % REQ_WQES as u64) as usize;
            // Completed where it is, then its slot emptied (not moved out first: a copy).
            let Some(op) = st.ops[idx].as_ref() else {
                continue;
            };
            let mut status = op.local_error.unwrap_or(wc_status::SUCCESS);
            if status == wc_status::SUCCESS && !self.invalidate_after(op) {
                status = wc_status::LOC_PROT_ERR;
            }
            self.complete_op(op, status);
            st.ops[idx] = None;
            if status != wc_status::SUCCESS {
                self.iw_fail(st, None);
                return;
            }
        }
    }

    /// Completes every operation taken and not completed with a flush error (the first with
    /// `first`, if given): the QP is in the error state.
    pub(super) fn iw_flush_ops(&self, st: &mut QpState, first: Option<u8>) {
        let mut first = first;
        let (from, to) = match st.iw.as_ref() {
            Some(iw) => (iw.done_seq, st.next_seq),
            None => (st.next_seq.saturating_sub(REQ_WQES as u64), st.next_seq),
        };
        for seq in from..to {
            let idx = (seq % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].take() else {
                continue;
            };
            let status = op
                .local_error
                .or(first.take())
                .unwrap_or(wc_status::WR_FLUSH_ERR);
            self.send_cq.push(
                &Cqe {
                    wr_id: op.wr_id,
                    status,
                    opcode: wc_opcode_of(op.opcode),
                    qp_num: self.qpn,
                    ..Default::default()
                },
                false,
                &self.events,
            );
        }
        if let Some(iw) = st.iw.as_mut() {
            iw.done_seq = st.next_seq;
            iw.tx_seq = st.next_seq;
            iw.tx_msg = None;
            iw.finished = 0;
            iw.unflushed = 0;
            iw.zc_end = None;
            iw.acks_wait.clear();
            iw.outstanding.clear();
            iw.responding = None;
            iw.inbound.clear();
        }
        // A receive in progress is flushed with the rest of the receive queue.
        if let Some(p) = st.recv.take() {
            self.recv_cq.push(
                &Cqe {
                    wr_id: p.wr_id,
                    status: wc_status::WR_FLUSH_ERR,
                    opcode: wc_opcode::RECV,
                    qp_num: self.qpn,
                    ..Default::default()
                },
                false,
                &self.events,
            );
        }
    }

    /// The connection failed: TERMINATE `t` (if given) goes to the peer, the QP to the error
    /// state, the connection is aborted.
    fn iw_fail(&self, st: &mut QpState, t: Option<TermCode>) {
        if let Some(iw) = st.iw.as_mut() {
            if iw.terminate.is_none() {
                iw.terminate = t;
            }
            iw.abort = true;
        }
        if st.state != St::Err {
            self.to_error(st, None);
            self.events.raise(QpEvent::Fatal);
        }
    }

    // ---- transmit --------------------------------------------------------------------------

    /// Takes the SQ's new WQEs into the operation slots (validated and copied once).
    fn iw_take(&self, st: &mut QpState) -> Result<(), RingFault> {
        let ext = st.iw.as_ref().is_some_and(|iw| iw.ext);
        self.take_sq(
            st,
            |_, _| false,
            |st, idx, e| self.iw_take_one(st, idx, e, ext),
        )
    }

    /// Makes operation slot `idx` of a WQE taken from the SQ (`ext`: RFC 7306 negotiated).
    fn iw_take_one(&self, st: &mut QpState, idx: usize, entry: &mut SendEntry, ext: bool) -> bool {
        let w = entry.wqe;
        let len = entry.data_len();
        let v = w.validate_for(
            self.caps.max_send_sge as u8,
            self.caps.max_inline_data,
            self.kernel,
        );
        // Set up in its slot; the match below fills in the rest there.
        let op = st.ops[idx].insert(SendOp {
            wr_id: w.wr_id,
            opcode: WrOpcode::Send,
            flags: w.flags,
            imm_or_inv: w.imm_or_inv,
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            compare_add: 0,
            swap: 0,
            len: 0,
            sges: entry.sges.take(),
            inline: entry.inline.take(),
            local_error: None,
        });
        match (v.map(|v| v.opcode), u32::try_from(len)) {
            // An RDMA WRITE with immediate needs RFC 7306 (both sides speak it).
            (Ok(o @ (WrOpcode::Send | WrOpcode::SendWithInv | WrOpcode::RdmaWrite)), Ok(l))
            | (Ok(o @ (WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv)), Ok(l))
            | (Ok(o @ WrOpcode::RdmaWriteWithImm), Ok(l))
                if l <= crate::device::limits::MAX_MSG_SZ
                    && (ext || o != WrOpcode::RdmaWriteWithImm) =>
            {
                op.opcode = o;
                op.len = l;
            }
            // RFC 7306's atomics, whose original value lands in 8 bytes of the SGEs.
            (Ok(o @ (WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd)), Ok(8))
                if ext && w.flags & WQE_FLAG_INLINE == 0 =>
            {
                op.opcode = o;
                op.len = 8;
                op.compare_add = w.compare_add;
                op.swap = w.swap;
            }
            (Ok(o @ (WrOpcode::LocalInv | WrOpcode::RegMr)), _) => {
                op.opcode = o;
                let mr = self.dev.mr_slot(w.rkey).ok_or(MrError::Key);
                let done = if o == WrOpcode::LocalInv {
                    mr.and_then(|m| m.invalidate(self.pdn, w.rkey))
                } else {
                    mr.and_then(|m| {
                        m.register(self.pdn, w.rkey, w.imm_or_inv, w.remote_addr, w.compare_add)
                    })
                };
                if done.is_err() {
                    op.local_error = Some(wc_status::LOC_QP_OP_ERR);
                }
            }
            (Ok(_), Err(_)) | (Ok(_), Ok(_)) if v.is_ok() => {
                // Immediate data and atomics need RFC 7306, which not every peer (siw)
                // speaks, and a send with immediate has no RFC 7306 form (its immediate
                // data message carries no payload); too long a message, or an atomic
                // not of 8 bytes, cannot be sent.
                op.opcode = v.map(|v| v.opcode).unwrap_or(WrOpcode::Send);
                let too_long =
                    u32::try_from(len).map_or(true, |l| l > crate::device::limits::MAX_MSG_SZ);
                op.local_error = Some(if too_long {
                    wc_status::LOC_LEN_ERR
                } else {
                    wc_status::LOC_QP_OP_ERR
                });
            }
            _ => op.local_error = Some(wc_status::LOC_QP_OP_ERR),
        }
        self.iw_rx_requests.store(0, Ordering::Relaxed);
        st.next_seq += 1;
        true
    }

    /// Plans what can be sent into `plan` (empty; gathering payload in `scratch`): READ and
    /// atomic responses first, then the send queue's operations in order. Whether it ended
    /// with everything planned and the send queue idle (its busy mark cleared).
    fn iw_fill(&self, st: &mut QpState, plan: &mut TxPlan, scratch: &mut [u8]) -> bool {
        if !matches!(st.state, St::Rts | St::Sqd) {
            return false;
        }
        let Some(iw) = st.iw.as_mut() else {
            return false;
        };
        // Peer-to-peer mode: a responder sends nothing before the initiator's
        // ready-to-receive message (what is posted meanwhile waits in the ring; its arrival
        // runs the QP), an initiator sends that message first.
        if iw.rtr_wait.is_some() {
            return false;
        }
        if let Some(r) = iw.rtr_send.take() {
            if let Err(t) = Self::iw_rtr(iw, r, plan) {
                self.iw_fail(st, t);
                return false;
            }
        }
        if st.state == St::Rts {
            self.sq.set_busy();
            if let Err(f) = self.iw_take(st) {
                self.ring_fault(st, f);
                return false;
            }
        }
        loop {
            let Some(iw) = st.iw.as_ref() else {
                return false;
            };
            // The largest FPDU a ULPDU of `mulpdu` bytes makes (pad, CRC, markers).
            let worst = LEN_FIELD
                + usize::from(iw.mulpdu)
                + 3
                + CRC_LEN
                + MARKER_LEN * (usize::from(iw.mulpdu) / 508 + 2);
            if plan.room() < worst || plan.slots() < ITEMS_PER_FPDU {
                return false;
            }
            let built = if iw.responding.is_some() || !iw.inbound.is_empty() {
                self.iw_respond(st, plan, scratch)
            } else {
                self.iw_send_op(st, plan, scratch)
            };
            match built {
                Ok(Some(_)) => {}
                Ok(None) => {
                    // Nothing to send from what was taken: take what the process posted
                    // meanwhile. With the ring empty, the process rings the doorbell again
                    // once the busy mark is clear; the ring is read again after clearing it
                    // (the doorbell rule in rust/uapi), so no WQE is left behind.
                    if st.state != St::Rts {
                        return false;
                    }
                    if self.sq_idle(st) {
                        return true;
                    }
                    let before = st.next_seq;
                    if let Err(f) = self.iw_take(st) {
                        self.ring_fault(st, f);
                        return false;
                    }
                    if st.next_seq == before {
                        // The operation slots are full, or the work waits (READ credits, a
                        // fence): the completions that free them run the QP again.
                        return false;
                    }
                }
                Err(t) => {
                    self.iw_fail(st, t);
                    return false;
                }
            }
        }
    }

    /// Frames the segment `seg` with `n` bytes of payload that `fill` writes (returning
    /// whether it could) into `plan`: in place, when the stream has no markers, else through
    /// `scratch`. The FPDU's length; `None` if `fill` failed (nothing framed); a TERMINATE
    /// code if it cannot be framed (which the caller's room check rules out).
    fn iw_build(
        iw: &mut IwProto,
        seg: &Segment,
        n: usize,
        plan: &mut TxPlan,
        scratch: &mut [u8],
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<Option<usize>, Option<TermCode>> {
        let mut hdr = [0u8; ddp::MAX_HDR_LEN];
        let h = seg.write(&mut hdr).ok_or(BROKEN)?;
        let out = plan.tail();
        let len = if iw.framer.markers() {
            let payload = scratch.get_mut(..n).ok_or(BROKEN)?;
            if !fill(payload) {
                return Ok(None);
            }
            let crc = iw.crc;
            iw.framer
                .frame_with(&crc, &[&hdr[..h], payload], out)
                .map_err(|_| BROKEN)?
        } else {
            let body = out.get_mut(LEN_FIELD..LEN_FIELD + h + n).ok_or(BROKEN)?;
            let (head, payload) = body.split_at_mut(h);
            head.copy_from_slice(hdr.get(..h).ok_or(BROKEN)?);
            if !fill(payload) {
                return Ok(None);
            }
            let crc = iw.crc;
            iw.framer.seal_with(&crc, out, h + n).map_err(|_| BROKEN)?
        };
        commit(plan, len).map(Some)
    }

    /// Frames the segment `seg` into `plan` with its `n` bytes of payload left where they
    /// are, in the page pieces `collect` gathers (returning whether it could): only on
    /// streams without CRCs and markers, for payloads of [`ZC_MIN`] bytes or more, and
    /// messages of a kind (`ZC_*`) the module parameter `iwarp_zcopy` names. The FPDU's
    /// length; `None` if not framed that way (to be copied instead).
    fn iw_build_pages(
        iw: &mut IwProto,
        kind: u32,
        seg: &Segment,
        n: usize,
        plan: &mut TxPlan,
        collect: impl FnOnce(&mut PageList) -> bool,
    ) -> Result<Option<usize>, Option<TermCode>> {
        if n < ZC_MIN || iw.framer.crc() || iw.framer.markers() || params::iwarp_zcopy() & kind == 0
        {
            return Ok(None);
        }
        let mut pages = PageList::new();
        if !collect(&mut pages) {
            return Ok(None);
        }
        let mut head = [0u8; LEN_FIELD + ddp::MAX_HDR_LEN];
        let h = seg.write(&mut head[LEN_FIELD..]).ok_or(BROKEN)?;
        let mut trailer = [0u8; 3 + CRC_LEN];
        let t = iw
            .framer
            .seal_around(&mut head, h, n, &mut trailer)
            .map_err(|_| BROKEN)?;
        put(plan, &head[..LEN_FIELD + h])?;
        if !pages.move_to(plan) {
            return Err(BROKEN);
        }
        put(plan, &trailer[..t])?;
        Ok(Some(LEN_FIELD + h + n + t))
    }

    /// Frames the ready-to-receive message `r` of an initiator in peer-to-peer mode at the
    /// start of `out`: a zero-length RDMA WRITE (STag 0) or READ (of 0 bytes, STags 0).
    fn iw_rtr(iw: &mut IwProto, r: Rtr, plan: &mut TxPlan) -> Result<usize, Option<TermCode>> {
        let seg = match r {
            Rtr::Write => Segment {
                opcode: Rdmap::Write,
                last: true,
                placement: Placement::Tagged { stag: 0, to: 0 },
                rdmap: RdmapHeader::None,
            },
            Rtr::Read => {
                iw.rtr_response = true;
                read_request(
                    iw,
                    ReadRequest {
                        sink_stag: 0,
                        sink_to: 0,
                        size: 0,
                        source_stag: 0,
                        source_to: 0,
                    },
                )
            }
            // Never negotiated by oxiwarp (see `RTR_TYPES` in iwcm.rs).
            Rtr::Send => return Err(Some(TermCode::RDMAP_CATASTROPHIC_STREAM)),
        };
        Self::iw_frame(iw, &seg, plan)
    }

    /// Frames the segment `seg`, without payload, into `plan`: its length, or a TERMINATE
    /// code if it cannot be framed (which the caller's room check rules out).
    fn iw_frame(
        iw: &mut IwProto,
        seg: &Segment,
        plan: &mut TxPlan,
    ) -> Result<usize, Option<TermCode>> {
        Self::iw_build(iw, seg, 0, plan, &mut [], |_| true)?.ok_or(BROKEN)
    }

    /// Frames the next segment of the READ response being sent, or starts answering the next
    /// inbound request (a READ, or an atomic answered at once). `Ok(None)` if there is none.
    fn iw_respond(
        &self,
        st: &mut QpState,
        plan: &mut TxPlan,
        buf: &mut [u8],
    ) -> Result<Option<usize>, Option<TermCode>> {
        let Some(iw) = st.iw.as_mut() else {
            return Ok(None);
        };
        if iw.responding.is_none() {
            let r = match iw.inbound.pop() {
                None => return Ok(None),
                Some(Inbound::Read(r)) => r,
                Some(Inbound::Atomic(a)) => return self.iw_atomic(iw, a, plan).map(Some),
            };
            if r.size == 0 {
                // A zero-length READ reads nothing: one empty response, no STag checked.
                let seg = Segment {
                    opcode: Rdmap::ReadResponse,
                    last: true,
                    placement: Placement::Tagged {
                        stag: r.sink_stag,
                        to: r.sink_to,
                    },
                    rdmap: RdmapHeader::None,
                };
                return Self::iw_frame(iw, &seg, plan).map(Some);
            }
            let (mr, a) = self
                .iw_remote_mr(
                    crate::mr::Op::Read,
                    r.source_stag,
                    r.source_to,
                    r.size.into(),
                )
                .map_err(|e| Some(term_of(e, true)))?;
            iw.responding = Some(Responding {
                req: r,
                mr,
                access: a,
                sent: 0,
            });
        }
        let mulpdu = usize::from(iw.mulpdu);
        let Some(resp) = iw.responding.as_mut() else {
            return Ok(None);
        };
        let step = mulpdu - ddp::TAGGED_HDR_LEN;
        let left = (resp.req.size - resp.sent) as usize;
        let n = left.min(step).min(buf.len());
        let last = n == left;
        let seg = Segment {
            opcode: Rdmap::ReadResponse,
            last,
            placement: Placement::Tagged {
                stag: resp.req.sink_stag,
                to: resp.req.sink_to.wrapping_add(u64::from(resp.sent)),
            },
            rdmap: RdmapHeader::None,
        };
        let (mr, access, at) = (resp.mr.clone(), resp.access, u64::from(resp.sent));
        let mut failed = None;
        // Read again through the access at each segment: an invalidation stops it.
        let pages = Self::iw_build_pages(iw, ZC_READ_RESPONSES, &seg, n, plan, |list| {
            let mut fits = true;
            let r = mr.page_ranges(&access, at, n, |p| fits = fits && list.push(p));
            r.is_ok_and(|user| user && fits)
        })?;
        let built = match pages {
            Some(len) => Some(len),
            None => Self::iw_build(iw, &seg, n, plan, buf, |p| {
                mr.read(&access, at, p)
                    .map_err(|e| failed = Some(e))
                    .is_ok()
            })?,
        };
        let Some(len) = built else {
            return Err(failed.map(|e| term_of(e, true)));
        };
        if let Some(resp) = iw.responding.as_mut() {
            resp.sent += n as u32;
        }
        if last {
            iw.responding = None;
        }
        Ok(Some(len))
    }

    /// Performs the inbound atomic `a` (RFC 7306) and frames its response into `plan`.
    fn iw_atomic(
        &self,
        iw: &mut IwProto,
        a: AtomicRequest,
        plan: &mut TxPlan,
    ) -> Result<usize, Option<TermCode>> {
        // A misaligned target ends the stream (RFC 7306, section 8.2); memory is untouched.
        if a.to % 8 != 0 {
            return Err(Some(TermCode::RDMAP_CATASTROPHIC_STREAM));
        }
        let (mr, access) = self
            .iw_remote_mr(crate::mr::Op::Atomic, a.stag, a.to, 8)
            .map_err(|e| Some(term_of(e, true)))?;
        let orig = match (a.is_plain(), a.op) {
            (true, AtomicOp::FetchAdd) => mr.fetch_add(&access, a.data),
            (true, AtomicOp::CmpSwap) => mr.compare_swap(&access, a.compare, a.data),
            // Masked: compare-and-swap the computed value until the target did not change
            // in between (a bounded number of times).
            (false, _) => {
                let mut seen = mr.compare_swap(&access, 0, 0);
                let mut tries = 0;
                loop {
                    let Ok(old) = seen else { break seen };
                    let new = a.apply(old);
                    if new == old {
                        break seen;
                    }
                    tries += 1;
                    if tries > ATOMIC_TRIES {
                        return Err(Some(TermCode::RDMAP_CATASTROPHIC_STREAM));
                    }
                    match mr.compare_swap(&access, old, new) {
                        Ok(v) if v == old => break Ok(old),
                        other => seen = other,
                    }
                }
            }
        }
        .map_err(|e| {
            // The memory refused the atomic: a target not 8-byte aligned in memory (an MR
            // whose address and iova differ modulo 8), as above.
            Some(match e {
                MrError::Fault => TermCode::RDMAP_CATASTROPHIC_STREAM,
                e => term_of(e, true),
            })
        })?;
        iw.atomic_msn = iw.atomic_msn.wrapping_add(1);
        let seg = Segment {
            opcode: Rdmap::AtomicResponse,
            last: true,
            placement: Placement::Untagged {
                qn: QN_ATOMIC_RESPONSE,
                msn: iw.atomic_msn,
                mo: 0,
                inv_stag: 0,
            },
            rdmap: RdmapHeader::AtomicResponse(AtomicResponse {
                req_id: a.req_id,
                orig,
            }),
        };
        Self::iw_frame(iw, &seg, plan)
    }

    /// Frames the next segment of the send queue's current operation (starting the next
    /// operation when the current one is sent). `Ok(None)` if there is nothing to send.
    fn iw_send_op(
        &self,
        st: &mut QpState,
        plan: &mut TxPlan,
        buf: &mut [u8],
    ) -> Result<Option<usize>, Option<TermCode>> {
        let Some(iw) = st.iw.as_mut() else {
            return Ok(None);
        };
        if iw.tx_msg.is_none() {
            let seq = iw.tx_seq;
            if seq == st.next_seq {
                return Ok(None);
            }
            let idx = (seq % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].as_ref() else {
                iw.tx_seq += 1;
                return Ok(Some(0));
            };
            if op.local_error.is_some() {
                // Completes (with its error) in order, then the QP fails.
                iw.finished |= bit(seq);
                iw.tx_seq += 1;
                return Ok(Some(0));
            }
            // A fenced operation waits for the READs before it.
            if op.flags & WQE_FLAG_FENCE != 0 && !iw.outstanding.is_empty() {
                return Ok(None);
            }
            let solicited = op.flags & WQE_FLAG_SOLICITED != 0;
            let first = match op.opcode {
                WrOpcode::LocalInv | WrOpcode::RegMr => {
                    iw.finished |= bit(seq);
                    iw.tx_seq += 1;
                    return Ok(Some(0));
                }
                WrOpcode::Send | WrOpcode::SendWithInv => {
                    let inv = op.opcode == WrOpcode::SendWithInv;
                    iw.send_msn = iw.send_msn.wrapping_add(1);
                    Segment {
                        opcode: match (inv, solicited) {
                            (false, false) => Rdmap::Send,
                            (false, true) => Rdmap::SendSe,
                            (true, false) => Rdmap::SendInvalidate,
                            (true, true) => Rdmap::SendSeInvalidate,
                        },
                        last: false,
                        placement: Placement::Untagged {
                            qn: QN_SEND,
                            msn: iw.send_msn,
                            mo: 0,
                            inv_stag: if inv { op.imm_or_inv } else { 0 },
                        },
                        rdmap: RdmapHeader::None,
                    }
                }
                // An RDMA WRITE with immediate is this WRITE (sent even when empty, so that
                // the receiver reports its length), then its immediate data (below).
                WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => Segment {
                    opcode: Rdmap::Write,
                    last: false,
                    placement: Placement::Tagged {
                        stag: op.rkey,
                        to: op.remote_addr,
                    },
                    rdmap: RdmapHeader::None,
                },
                WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                    // RFC 7306: on the read request queue, within the ORD like a READ.
                    if iw.outstanding.len() >= usize::from(iw.ord) {
                        return Ok(None);
                    }
                    let (id, stag, to) = (seq as u32, op.rkey, op.remote_addr);
                    let a = if op.opcode == WrOpcode::AtomicCmpAndSwp {
                        AtomicRequest::cmp_swap(id, stag, to, op.compare_add, op.swap)
                    } else {
                        AtomicRequest::fetch_add(id, stag, to, op.compare_add)
                    };
                    read_queue(iw, Inbound::Atomic(a))
                }
                WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => {
                    if iw.outstanding.len() >= usize::from(iw.ord) {
                        return Ok(None);
                    }
                    read_request(
                        iw,
                        ReadRequest {
                            // Opaque to the responder, which returns them: the READ's
                            // sequence and the offset in its buffer.
                            sink_stag: seq as u32,
                            sink_to: 0,
                            size: op.len,
                            source_stag: op.rkey,
                            source_to: op.remote_addr,
                        },
                    )
                }
                _ => {
                    iw.finished |= bit(seq);
                    iw.tx_seq += 1;
                    return Ok(Some(0));
                }
            };
            let len = if first.opcode.is_single() { 0 } else { op.len };
            iw.tx_msg = Some(TxMsg {
                seq,
                first,
                len,
                sent: 0,
            });
        }
        let mulpdu = usize::from(iw.mulpdu);
        let Some(m) = iw.tx_msg.as_mut() else {
            return Ok(None);
        };
        let seq = m.seq;
        let idx = (seq % REQ_WQES as u64) as usize;
        let Some(op) = st.ops[idx].as_ref() else {
            iw.tx_msg = None;
            iw.tx_seq += 1;
            return Ok(Some(0));
        };
        if matches!(m.first.opcode, Rdmap::ReadRequest | Rdmap::AtomicRequest) {
            let seg = m.first;
            let n = Self::iw_frame(iw, &seg, plan)?;
            if !iw.outstanding.push(seq) {
                return Err(Some(TermCode::RDMAP_CATASTROPHIC_STREAM));
            }
            iw.tx_msg = None;
            iw.tx_seq += 1;
            return Ok(Some(n));
        }
        let step = mulpdu - m.first.header_len();
        let left = (m.len - m.sent) as usize;
        let n = left.min(step).min(buf.len());
        let last = n == left;
        let mut seg = m.first;
        seg.last = last;
        seg.placement = match seg.placement {
            Placement::Tagged { stag, to } => Placement::Tagged {
                stag,
                to: to.wrapping_add(u64::from(m.sent)),
            },
            Placement::Untagged {
                qn, msn, inv_stag, ..
            } => Placement::Untagged {
                qn,
                msn,
                mo: m.sent,
                inv_stag,
            },
        };
        let sent = m.sent as usize;
        let mut failed = None;
        let pages = Self::iw_build_pages(iw, ZC_SEND_QUEUE, &seg, n, plan, |list| {
            gather_pages(&self.dev, self.pdn, op, sent, n, list)
        })?;
        let built = match pages {
            Some(len) => Some(len),
            None => Self::iw_build(iw, &seg, n, plan, buf, |p| {
                gather(&self.dev, self.pdn, op, sent, p)
                    .map_err(|s| failed = Some(s))
                    .is_ok()
            })?,
        };
        let Some(len) = built else {
            if let Some(op) = st.ops[idx].as_mut() {
                op.local_error = failed;
            }
            iw.finished |= bit(seq);
            iw.tx_msg = None;
            iw.tx_seq += 1;
            return Ok(Some(0));
        };
        let imm_msn = iw.send_msn.wrapping_add(1);
        let Some(m) = iw.tx_msg.as_mut() else {
            return Err(BROKEN);
        };
        m.sent += n as u32;
        if !last {
            return Ok(Some(len));
        }
        if op.opcode == WrOpcode::RdmaWriteWithImm && m.first.opcode == Rdmap::Write {
            // RFC 7306's immediate data message, which takes a receive. Verbs' 32-bit
            // immediate is the field's low half, its bytes as the process stored them (as
            // over RoCE).
            let imm = u32::from_be_bytes(op.imm_or_inv.to_ne_bytes());
            m.first = Segment {
                opcode: if op.flags & WQE_FLAG_SOLICITED != 0 {
                    Rdmap::ImmediateDataSe
                } else {
                    Rdmap::ImmediateData
                },
                last: true,
                placement: Placement::Untagged {
                    qn: QN_SEND,
                    msn: imm_msn,
                    mo: 0,
                    inv_stag: 0,
                },
                rdmap: RdmapHeader::Immediate(imm.into()),
            };
            m.len = 0;
            m.sent = 0;
            iw.send_msn = imm_msn;
        } else {
            iw.tx_msg = None;
            iw.tx_seq += 1;
            iw.unflushed |= bit(seq);
        }
        Ok(Some(len))
    }

    // ---- receive ---------------------------------------------------------------------------

    /// The MR `stag` names, checked for `op` by the peer over `[to, to + len)`: the MR's
    /// rights, PD and bounds. The QP's own access flags are not consulted: rdma_cm leaves
    /// those of an active side's user QP at 0 (it moves only kernel QPs through the iw_cm's
    /// attributes), so iWARP providers (siw) enforce the MR's rights alone.
    fn iw_remote_mr(
        &self,
        op: crate::mr::Op,
        stag: u32,
        to: u64,
        len: u64,
    ) -> Result<(Arc<Mr>, Access), MrError> {
        let a = Access {
            key: stag,
            pdn: self.pdn,
            remote: true,
            va: to,
            len,
        };
        let mr = self.dev.mr_slot(stag).ok_or(MrError::Key)?;
        mr.check(&a, op)?;
        Ok((mr, a))
    }

    /// Receives `piece`, the next bytes of the connection's stream (from the socket's
    /// callback, any context): returns how many it took, 0 to stop reading once the
    /// connection is being aborted. `wake` is set when the transmit side has work from it.
    fn iw_piece(&self, piece: &[u8], wake: &mut bool) -> usize {
        let mut st = self.st.lock();
        let Some(iw) = st.iw.as_ref() else {
            // The connection is over: nothing more is placed.
            return piece.len();
        };
        if iw.abort {
            *wake = true;
            return 0;
        }
        let reads = iw.outstanding.len();
        let waiting = iw.rtr_wait.is_some();
        self.iw_input(&mut st, piece);
        *wake |= match st.iw.as_ref() {
            Some(iw) => {
                iw.abort
                    || !iw.inbound.is_empty()
                    || iw.responding.is_some()
                    || iw.outstanding.len() < reads
                    || (waiting && iw.rtr_wait.is_none())
            }
            None => true,
        };
        piece.len()
    }

    /// Feeds received stream bytes to the deframer and acts on what they complete.
    fn iw_input(&self, st: &mut QpState, mut data: &[u8]) {
        while !data.is_empty() {
            let Some(iw) = st.iw.as_mut() else { return };
            if iw.abort {
                return;
            }
            let crc = iw.crc;
            // The common case first: a whole FPDU, placed and finished in one go.
            // The header stays here, by reference, rather than in `rx_hdr`.
            if let Some(w) = iw.deframer.whole_with(&crc, data) {
                let payload = &data[w.start..w.start + usize::from(w.payload_len)];
                let r = self
                    .iw_header(st, &w.segment, w.payload_len)
                    .and_then(|ends| {
                        if !payload.is_empty() {
                            self.iw_payload(st, payload)?;
                        }
                        if ends {
                            self.iw_finish(st, &w.segment)?;
                        }
                        Ok(())
                    });
                if let Err(t) = r {
                    return self.iw_refused(st, t, Some(w.segment));
                }
                data = &data[w.consumed..];
                continue;
            }
            let step = match iw.deframer.step_with(&crc, data) {
                Ok(s) => s,
                Err(t) => {
                    pr_info!("QP {:#x}: iWARP stream error: {}\n", self.qpn, t);
                    return self.iw_fail(st, Some(t));
                }
            };
            let r = match step.event {
                Event::More => Ok(()),
                Event::Header {
                    segment,
                    payload_len,
                } => self.iw_header(st, &segment, payload_len).map(|ends| {
                    if let (true, Some(iw)) = (ends, st.iw.as_mut()) {
                        iw.rx_hdr = Some(segment);
                    }
                }),
                Event::Payload { start, len } => self.iw_payload(st, &data[start..start + len]),
                Event::End => self.iw_end(st),
            };
            if let Err(t) = r {
                let what = match step.event {
                    Event::Header { segment, .. } => Some(segment),
                    _ => st.iw.as_ref().and_then(|iw| iw.rx_hdr),
                };
                return self.iw_refused(st, t, what);
            }
            data = &data[step.consumed..];
        }
    }

    /// The segment `what` (if known) was refused: with `t`, the connection ends with that
    /// TERMINATE.
    fn iw_refused(&self, st: &mut QpState, t: Option<TermCode>, what: Option<Segment>) {
        match (t, what) {
            (Some(t), Some(s)) => {
                pr_info!("QP {:#x}: iWARP {:?} refused: {}\n", self.qpn, s.opcode, t)
            }
            (Some(t), None) => pr_info!("QP {:#x}: iWARP segment refused: {}\n", self.qpn, t),
            (None, _) => {}
        }
        self.iw_fail(st, t);
    }

    /// A segment's header: decide where its payload goes. Whether its end is to be acted on
    /// ([`Self::iw_finish`], with this header).
    fn iw_header(
        &self,
        st: &mut QpState,
        seg: &Segment,
        len: u16,
    ) -> Result<bool, Option<TermCode>> {
        let len32 = u32::from(len);
        if let Some(iw) = st.iw.as_mut() {
            // RFC 7306's messages only on a connection that negotiated them.
            if seg.opcode.is_extension() && !iw.ext {
                return Err(Some(TermCode::RDMAP_OPCODE));
            }
            if seg.opcode == Rdmap::Write {
                iw.rx_write = iw.rx_write.wrapping_add(len32);
            }
            if seg.last
                && !matches!(
                    seg.opcode,
                    Rdmap::ReadResponse | Rdmap::AtomicResponse | Rdmap::Terminate
                )
            {
                // Written only under `st` (here, when a work request is taken, at attach):
                // a load and a store lose no update.
                let n = self.iw_rx_requests.load(Ordering::Relaxed);
                self.iw_rx_requests
                    .store(n.saturating_add(1), Ordering::Relaxed);
            }
            // Peer-to-peer mode: the responder's first segment must be the negotiated
            // ready-to-receive message (then handled like any zero-length WRITE or READ).
            if let Some(want) = iw.rtr_wait {
                let is_rtr = match (want, seg.opcode, seg.read_request()) {
                    (Rtr::Write, Rdmap::Write, _) => len == 0 && seg.last,
                    (Rtr::Read, Rdmap::ReadRequest, Some(r)) => r.size == 0,
                    _ => false,
                };
                if !is_rtr {
                    return Err(Some(TermCode::RDMAP_OPCODE));
                }
                iw.rtr_wait = None;
            }
            // The initiator's zero-length READ as its ready-to-receive message: the first
            // response answers it.
            if seg.opcode == Rdmap::ReadResponse && iw.rtr_response {
                if len != 0 || !seg.last {
                    return Err(Some(TermCode::DDP_T_BASE_BOUNDS));
                }
                iw.rtr_response = false;
                iw.rx_seg = RxSeg::Discard;
                iw.rx_hdr = None;
                return Ok(false);
            }
        }
        let dest = match (seg.opcode, seg.placement) {
            // A zero-length RDMA WRITE places nothing: its STag is not checked (RFC 5041,
            // as a zero-length RDMA WRITE needs no valid R_Key over RoCE); peers use it to
            // probe a connection (perftest over iWARP, RFC 6581's ready-to-receive).
            (Rdmap::Write, Placement::Tagged { .. }) if len == 0 => RxSeg::Discard,
            (Rdmap::Write, Placement::Tagged { stag, to }) => {
                let (mr, access) = self
                    .iw_remote_mr(crate::mr::Op::Write, stag, to, len.into())
                    .map_err(|e| Some(term_of(e, true)))?;
                RxSeg::Write { mr, access, at: 0 }
            }
            (Rdmap::ReadResponse, Placement::Tagged { stag, to }) => {
                let Some(iw) = st.iw.as_ref() else {
                    return Err(None);
                };
                let seq = iw.outstanding.front().ok_or(Some(TermCode::RDMAP_OPCODE))?;
                let idx = (seq % REQ_WQES as u64) as usize;
                let size = match st.ops[idx].as_ref() {
                    Some(o)
                        if matches!(o.opcode, WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv) =>
                    {
                        u64::from(o.len)
                    }
                    // The oldest request outstanding is an atomic: its response comes first.
                    _ => return Err(Some(TermCode::RDMAP_OPCODE)),
                };
                // The response must continue the oldest READ, within its length.
                if stag != seq as u32 || to != iw.read_got || to + u64::from(len) > size {
                    return Err(Some(TermCode::DDP_T_BASE_BOUNDS));
                }
                RxSeg::ReadResp { seq, at: to }
            }
            (Rdmap::ReadRequest | Rdmap::AtomicRequest, Placement::Untagged { msn, mo, .. }) => {
                let Some(iw) = st.iw.as_mut() else {
                    return Err(None);
                };
                iw.rx_read.accept(msn, mo, true, 0, 0).map_err(Some)?;
                let r = match seg.rdmap {
                    RdmapHeader::ReadRequest(r) => Inbound::Read(r),
                    RdmapHeader::AtomicRequest(a) => Inbound::Atomic(a),
                    _ => return Err(Some(TermCode::RDMAP_OPCODE)),
                };
                // Within the IRD this side announced (shared by READs and atomics).
                let queued = iw.inbound.len() + usize::from(iw.responding.is_some());
                if queued >= usize::from(iw.ird) {
                    return Err(Some(TermCode::DDP_UT_MSN_RANGE));
                }
                RxSeg::Request(r)
            }
            (Rdmap::AtomicResponse, Placement::Untagged { msn, mo, .. }) => {
                let Some(iw) = st.iw.as_mut() else {
                    return Err(None);
                };
                iw.rx_atomic.accept(msn, mo, true, 0, 0).map_err(Some)?;
                let RdmapHeader::AtomicResponse(r) = seg.rdmap else {
                    return Err(Some(TermCode::RDMAP_OPCODE));
                };
                // It answers the oldest request outstanding, which must be an atomic.
                let seq = iw.outstanding.front().ok_or(Some(TermCode::RDMAP_OPCODE))?;
                let idx = (seq % REQ_WQES as u64) as usize;
                let atomic = st.ops[idx].as_ref().is_some_and(|o| {
                    matches!(
                        o.opcode,
                        WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
                    )
                });
                if !atomic || r.req_id != seq as u32 {
                    return Err(Some(TermCode::RDMAP_OPCODE));
                }
                RxSeg::AtomicResp { seq, orig: r.orig }
            }
            (Rdmap::Terminate, Placement::Untagged { msn, mo, .. }) => {
                if let Some(iw) = st.iw.as_mut() {
                    let _ = iw.rx_term.accept(msn, mo, true, len32, u32::MAX);
                }
                match seg.terminate() {
                    Some(t) => pr_info!(
                        "QP {:#x}: the peer terminated the connection: {}\n",
                        self.qpn,
                        t.code
                    ),
                    None => pr_info!("QP {:#x}: the peer terminated the connection\n", self.qpn),
                }
                RxSeg::Discard
            }
            (op, Placement::Untagged { msn, mo, .. }) if op.takes_receive() => {
                if st.recv.is_none() {
                    if mo != 0 {
                        return Err(Some(TermCode::DDP_UT_INVALID_MO));
                    }
                    if !matches!(st.recv.fill(&self.rq), Ok(true)) {
                        return Err(Some(TermCode::DDP_UT_NO_BUFFER));
                    }
                }
                let cap = st.recv.as_ref().map_or(0, |p| p.entry.capacity());
                let cap = u32::try_from(cap).unwrap_or(u32::MAX);
                let Some(iw) = st.iw.as_mut() else {
                    return Err(None);
                };
                let p = iw
                    .rx_send
                    .accept(msn, mo, seg.last, len32, cap)
                    .map_err(Some)?;
                RxSeg::Recv {
                    at: u64::from(p.offset),
                }
            }
            _ => return Err(Some(TermCode::RDMAP_OPCODE)),
        };
        let Some(iw) = st.iw.as_mut() else {
            return Err(None);
        };
        iw.rx_seg = dest;
        Ok(true)
    }

    /// Payload bytes of the segment being received.
    fn iw_payload(&self, st: &mut QpState, data: &[u8]) -> Result<(), Option<TermCode>> {
        let Some(iw) = st.iw.as_mut() else {
            return Err(None);
        };
        match &mut iw.rx_seg {
            // Requests and atomic responses carry nothing after their headers (the deframer
            // checked).
            RxSeg::Discard | RxSeg::Request(_) | RxSeg::AtomicResp { .. } => Ok(()),
            RxSeg::Write { mr, access, at } => {
                // Checked again for every piece: an invalidation stops the write.
                mr.write(access, *at, data)
                    .map_err(|e| Some(term_of(e, true)))?;
                *at += data.len() as u64;
                Ok(())
            }
            RxSeg::Recv { at } => {
                let off = *at;
                *at += data.len() as u64;
                let Some(p) = st.recv.as_ref() else {
                    return Err(Some(TermCode::DDP_UT_NO_BUFFER));
                };
                scatter(&self.dev, self.pdn, p.entry.sges(), off, data)
                    .map_err(|_| Some(TermCode::RDMAP_CATASTROPHIC_STREAM))?;
                if let Some(p) = st.recv.as_mut() {
                    p.offset = p.offset.max(off + data.len() as u64);
                }
                Ok(())
            }
            RxSeg::ReadResp { seq, at } => {
                let (seq, off) = (*seq, *at);
                *at += data.len() as u64;
                iw.read_got += data.len() as u64;
                let idx = (seq % REQ_WQES as u64) as usize;
                let Some(op) = st.ops[idx].as_ref() else {
                    return Err(None);
                };
                if let Err(s) = scatter(&self.dev, self.pdn, &op.sges, off, data) {
                    if let Some(op) = st.ops[idx].as_mut() {
                        op.local_error = Some(s);
                    }
                }
                Ok(())
            }
        }
    }

    /// A segment ended with a good CRC: finish the message it ends, if it does.
    fn iw_end(&self, st: &mut QpState) -> Result<(), Option<TermCode>> {
        let Some(iw) = st.iw.as_mut() else {
            return Err(None);
        };
        match iw.rx_hdr.take() {
            Some(seg) => self.iw_finish(st, &seg),
            None => Ok(()),
        }
    }

    /// [`Self::iw_end`] of the segment whose header is `seg`.
    fn iw_finish(&self, st: &mut QpState, seg: &Segment) -> Result<(), Option<TermCode>> {
        let Some(iw) = st.iw.as_mut() else {
            return Err(None);
        };
        let dest = core::mem::replace(&mut iw.rx_seg, RxSeg::Discard);
        // The WRITE just before an immediate data message is the one it reports; any other
        // message of queues 0 and 1 in between ends that (READ and atomic responses, on
        // other queues, may come in between).
        let write_before = match seg.opcode.queue() {
            Some(QN_SEND | QN_READ_REQUEST) if seg.last => iw.last_write.take(),
            _ => None,
        };
        match (seg.opcode, dest) {
            (Rdmap::Terminate, _) => {
                iw.abort = true;
                return Err(None);
            }
            (Rdmap::Write, _) if seg.last => {
                iw.last_write = Some(iw.rx_write);
                iw.rx_write = 0;
            }
            // A request is answered only once its whole segment passed the CRC.
            (_, RxSeg::Request(r)) => {
                if !iw.inbound.push(r) {
                    return Err(Some(TermCode::DDP_UT_MSN_RANGE));
                }
            }
            (Rdmap::AtomicResponse, RxSeg::AtomicResp { seq, orig }) => {
                iw.outstanding.pop();
                iw.finished |= bit(seq);
                let idx = (seq % REQ_WQES as u64) as usize;
                if let Some(op) = st.ops[idx].as_mut() {
                    // The original value, in this CPU's byte order (as over RoCE).
                    if let Err(s) = scatter(&self.dev, self.pdn, &op.sges, 0, &orig.to_ne_bytes()) {
                        op.local_error = Some(s);
                    }
                }
                self.iw_complete(st);
            }
            (Rdmap::ReadResponse, RxSeg::ReadResp { seq, .. }) if seg.last => {
                let idx = (seq % REQ_WQES as u64) as usize;
                let size = st.ops[idx].as_ref().map_or(0, |o| u64::from(o.len));
                if iw.read_got != size {
                    return Err(Some(TermCode::DDP_T_BASE_BOUNDS));
                }
                iw.outstanding.pop();
                iw.read_got = 0;
                iw.finished |= bit(seq);
                self.iw_complete(st);
            }
            (op, RxSeg::Recv { .. }) if op.takes_receive() && seg.last => {
                let Some(p) = st.recv.take() else {
                    return Err(Some(TermCode::DDP_UT_NO_BUFFER));
                };
                let mut cqe = Cqe {
                    wr_id: p.wr_id,
                    opcode: wc_opcode::RECV,
                    byte_len: p.offset as u32,
                    qp_num: self.qpn,
                    ..Default::default()
                };
                if let RdmapHeader::Immediate(v) = seg.rdmap {
                    // Verbs' immediate from the field's low half. After a WRITE: an RDMA
                    // WRITE with immediate, of the WRITE's length; alone, like an empty
                    // SEND with immediate.
                    if let Some(len) = write_before {
                        cqe.opcode = wc_opcode::RECV_RDMA_WITH_IMM;
                        cqe.byte_len = len;
                    }
                    cqe.wc_flags |= WC_FLAG_WITH_IMM;
                    cqe.imm_or_inv = u32::from_ne_bytes((v as u32).to_be_bytes());
                }
                if let Placement::Untagged { inv_stag, .. } = seg.placement {
                    if op.invalidates() {
                        // A fast-registration MR of this PD becomes invalid; keys of other
                        // MRs are only reported (as over RoCE).
                        if let Some(mr) = self.dev.mr_slot(inv_stag).filter(|m| m.is_fast()) {
                            mr.invalidate(self.pdn, inv_stag)
                                .map_err(|_| Some(TermCode::RDMAP_CANNOT_INVALIDATE))?;
                        }
                        cqe.wc_flags |= WC_FLAG_WITH_INV;
                        cqe.imm_or_inv = inv_stag;
                    }
                }
                self.recv_cq.push(&cqe, op.solicited(), &self.events);
            }
            _ => {}
        }
        Ok(())
    }
}

/// What cannot be framed: the caller's room checks rule it out.
const BROKEN: Option<TermCode> = Some(TermCode::RDMAP_CATASTROPHIC_STREAM);

/// Adds the `n` bytes framed at the plan's tail.
fn commit(plan: &mut TxPlan, n: usize) -> Result<usize, Option<TermCode>> {
    if plan.commit(n) {
        Ok(n)
    } else {
        Err(BROKEN)
    }
}

/// Copies `bytes` to the plan's tail and adds them.
fn put(plan: &mut TxPlan, bytes: &[u8]) -> Result<usize, Option<TermCode>> {
    let out = plan.tail().get_mut(..bytes.len()).ok_or(BROKEN)?;
    for (d, b) in out.iter_mut().zip(bytes) {
        *d = *b;
    }
    commit(plan, bytes.len())
}

/// Collects references to the pages of the `len` bytes of the message of `op` from byte
/// `offset` on, to send them without a copy: `false` if that cannot be done (inline data,
/// memory other than a process's, more pieces than `out` holds, an access error, which the
/// copy then reports).
fn gather_pages(
    dev: &RoceDev,
    pdn: u32,
    op: &SendOp,
    offset: usize,
    len: usize,
    out: &mut PageList,
) -> bool {
    if !op.inline.is_empty() {
        return false;
    }
    let mut fits = true;
    let r = walk_sges(
        dev,
        pdn,
        &op.sges,
        offset as u64,
        len,
        |mr, a, at, range| match mr.page_ranges(a, at, range.len(), |p| fits = fits && out.push(p))
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(MrError::Fault),
            Err(e) => Err(e),
        },
    );
    r.is_ok() && fits
}

/// The next message of the connection's read request queue (its message sequence number
/// taken): the READ `r`.
fn read_request(iw: &mut IwProto, r: ReadRequest) -> Segment {
    read_queue(iw, Inbound::Read(r))
}

/// The next message of the connection's read request queue (its message sequence number
/// taken): the READ or atomic `r`.
fn read_queue(iw: &mut IwProto, r: Inbound) -> Segment {
    iw.read_msn = iw.read_msn.wrapping_add(1);
    let (opcode, rdmap) = match r {
        Inbound::Read(r) => (Rdmap::ReadRequest, RdmapHeader::ReadRequest(r)),
        Inbound::Atomic(a) => (Rdmap::AtomicRequest, RdmapHeader::AtomicRequest(a)),
    };
    Segment {
        opcode,
        last: true,
        placement: Placement::Untagged {
            qn: QN_READ_REQUEST,
            msn: iw.read_msn,
            mo: 0,
            inv_stag: 0,
        },
        rdmap,
    }
}

/// Frames a TERMINATE reporting `t` (without copies of the offending headers).
fn frame_terminate(iw: &mut IwProto, t: TermCode, out: &mut [u8]) -> Option<usize> {
    let seg = Segment {
        opcode: Rdmap::Terminate,
        last: true,
        placement: Placement::Untagged {
            qn: QN_TERMINATE,
            msn: 1,
            mo: 0,
            inv_stag: 0,
        },
        rdmap: RdmapHeader::Terminate(Terminate {
            code: t,
            segment_len_valid: false,
            ddp_header: false,
            rdmap_header: false,
        }),
    };
    let mut hdr = [0u8; ddp::MAX_HDR_LEN];
    let h = seg.write(&mut hdr)?;
    let crc = iw.crc;
    iw.framer.frame_with(&crc, &[&hdr[..h]], out).ok()
}
