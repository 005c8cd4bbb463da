// SPDX-License-Identifier: GPL-2.0
//! What one run of an iWARP QP hands to its socket, in stream order: bytes framed into the
//! transmit buffer (length fields, headers, trailers, payload copied), and payload left in
//! the pages of process memory regions, which the socket references and sends from
//! (zero-copy).

use crate::ox::page_ref::PageRange;
use crate::ox::tcp::TcpSocket;
use kernel::alloc::{flags::GFP_KERNEL, KVec};
use kernel::prelude::*;

/// Pieces a plan holds at most.
const ITEMS: usize = 64;
/// Page pieces one FPDU's payload may have to go without copying.
pub(super) const PAGES_PER_FPDU: usize = 18;
/// Plan pieces an FPDU takes at most: head, payload pages, trailer.
pub(super) const ITEMS_PER_FPDU: usize = PAGES_PER_FPDU + 2;
/// Page pieces one `send_pages` call takes at most.
const PAGES_PER_SEND: usize = 16;

enum Item {
    /// `buf[start..end]`.
    Buf { start: usize, end: usize },
    /// Bytes of a page, sent from the page.
    Page(PageRange),
}

/// The transmit plan of a connection.
///
/// # Invariants
///
/// `items[..count]` are `Some`, the rest `None`; `next <= count`; `Buf` items lie within
/// `buf[..len]`.
pub(super) struct TxPlan {
    buf: KVec<u8>,
    len: usize,
    items: KVec<Option<Item>>,
    count: usize,
    /// The first item not entirely in the socket.
    next: usize,
    /// Page pieces were handed to the socket (or are about to be) since the last reset.
    pages: bool,
}

impl TxPlan {
    /// An empty plan framing into a buffer of `size` bytes.
    pub(super) fn new(size: usize) -> Result<Self> {
        let mut items = KVec::with_capacity(ITEMS, GFP_KERNEL)?;
        for _ in 0..ITEMS {
            items.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            buf: KVec::from_elem(0u8, size, GFP_KERNEL)?,
            len: 0,
            items,
            count: 0,
            next: 0,
            pages: false,
        })
    }

    /// Whether everything planned is in the socket.
    pub(super) fn is_sent(&self) -> bool {
        self.next == self.count
    }

    /// Whether page pieces were planned since the last reset.
    pub(super) fn had_pages(&self) -> bool {
        self.pages
    }

    /// Empties the plan (dropping its page references).
    pub(super) fn reset(&mut self) {
        for it in self.items[..self.count].iter_mut() {
            *it = None;
        }
        self.len = 0;
        self.count = 0;
        self.next = 0;
        self.pages = false;
    }

    /// Free bytes of the buffer.
    pub(super) fn room(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Free pieces.
    pub(super) fn slots(&self) -> usize {
        ITEMS - self.count
    }

    /// The free part of the buffer, to frame into; [`TxPlan::commit`] adds what was.
    pub(super) fn tail(&mut self) -> &mut [u8] {
        &mut self.buf[self.len..]
    }

    /// Adds the `n` bytes framed at the start of [`TxPlan::tail`]. `false` (nothing added) if
    /// they do not fit, or no piece is free for them.
    pub(super) fn commit(&mut self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        if n > self.room() {
            return false;
        }
        let (start, end) = (self.len, self.len + n);
        if self.count > self.next {
            if let Some(Some(Item::Buf { end: e, .. })) = self.items.get_mut(self.count - 1) {
                if *e == start {
                    *e = end;
                    self.len = end;
                    return true;
                }
            }
        }
        if !self.push(Item::Buf { start, end }) {
            return false;
        }
        self.len = end;
        true
    }

    /// Adds a page piece; `false` if no piece is free.
    pub(super) fn push_page(&mut self, r: PageRange) -> bool {
        if r.is_empty() {
            return true;
        }
        self.pages = true;
        self.push(Item::Page(r))
    }

    fn push(&mut self, it: Item) -> bool {
        let Some(slot) = self.items.get_mut(self.count) else {
            return false;
        };
        *slot = Some(it);
        self.count += 1;
        true
    }

    /// Hands the plan to the socket, as much as it takes now: `Ok(true)` once all of it is
    /// in, `Ok(false)` when the socket is full, or the socket's error.
    pub(super) fn send(&mut self, sock: &TcpSocket) -> Result<bool> {
        while self.next < self.count {
            let mut run = self.next;
            let r = match &self.items[self.next] {
                Some(Item::Buf { start, end }) => {
                    run += 1;
                    sock.send(&[&self.buf[*start..*end]], run < self.count)
                }
                Some(Item::Page(_)) => {
                    while run < self.count
                        && run - self.next < PAGES_PER_SEND
                        && matches!(self.items[run], Some(Item::Page(_)))
                    {
                        run += 1;
                    }
                    let pages = self.items[self.next..run].iter().filter_map(|it| match it {
                        Some(Item::Page(r)) => Some(r),
                        _ => None,
                    });
                    sock.send_pages(pages, run < self.count)
                }
                None => return Err(EINVAL),
            };
            let mut n = match r {
                Ok(n) => n,
                Err(e) if e == EAGAIN => return Ok(false),
                Err(e) => return Err(e),
            };
            // What the socket took: whole pieces, then the start of one.
            while n > 0 && self.next < self.count {
                let left = match self.items[self.next].as_mut() {
                    Some(Item::Buf { start, end }) => {
                        let k = n.min(*end - *start);
                        *start += k;
                        n -= k;
                        *end - *start
                    }
                    Some(Item::Page(p)) => {
                        let k = n.min(p.len());
                        p.advance(k);
                        n -= k;
                        p.len()
                    }
                    None => 0,
                };
                if left > 0 {
                    return Ok(false);
                }
                self.items[self.next] = None;
                self.next += 1;
            }
        }
        Ok(true)
    }
}

/// Page pieces of one FPDU's payload, collected before it is framed.
pub(super) struct PageList {
    items: [Option<PageRange>; PAGES_PER_FPDU],
    len: usize,
}

impl PageList {
    pub(super) fn new() -> Self {
        Self {
            items: core::array::from_fn(|_| None),
            len: 0,
        }
    }

    /// Adds a piece; `false` if the list is full.
    pub(super) fn push(&mut self, r: PageRange) -> bool {
        let Some(slot) = self.items.get_mut(self.len) else {
            return false;
        };
        *slot = Some(r);
        self.len += 1;
        true
    }

    /// Moves the pieces into `plan`, in order: `false` if it lacks free pieces (the rest
    /// are dropped).
    pub(super) fn move_to(&mut self, plan: &mut TxPlan) -> bool {
        let mut ok = true;
        for it in self.items[..self.len].iter_mut() {
            if let Some(r) = it.take() {
                ok = ok && plan.push_page(r);
            }
        }
        self.len = 0;
        ok
    }
}
