//! How input code makes a header contiguous before viewing it: the three ways the
//! m_pulldown paper (Freenix 2000) compares, chosen per stack
//! ([`crate::StackConfig::hdr_access`]). The stack's own is `pulldown`; the other two
//! exist so that `mpstack bench mbuf` can run the same input path three times and
//! count what each costs.
//!
//! `hdr` is KAME's `IP6_EXTHDR_CHECK`: a length check on the first buffer, and a
//! call only when it fails. `pullup` and `pullup2` make everything from the start of
//! the packet contiguous (so they copy earlier headers again, and `pullup` fails past
//! `MHLEN`); `pulldown` makes exactly the header at hand contiguous. Each call is
//! counted in `mbuf::stats` with the paper's Table 2 columns.

use mbuf::stats::{count_len_check_of, Strategy};
use mbuf::{Mbuf, PullError};

/// The header-access strategy of a stack's input path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HdrAccess {
    /// KAME `m_pulldown`: only the header at hand, wherever it lies.
    #[default]
    Pulldown,
    /// 4.4BSD `m_pullup`: everything up to the header's end, at most `MHLEN`.
    Pullup,
    /// NRL `m_pullup2`: everything up to the header's end, at most `MCLBYTES`.
    Pullup2,
}

impl HdrAccess {
    #[inline(always)]
    fn strategy(self) -> Strategy {
        match self {
            HdrAccess::Pulldown => Strategy::Pulldown,
            HdrAccess::Pullup => Strategy::Pullup,
            HdrAccess::Pullup2 => Strategy::Pullup2,
        }
    }
}

/// Bytes `[off, off + len)` of `m`, contiguous, by strategy `a`, to read.
#[inline(always)]
pub(crate) fn hdr(a: HdrAccess, m: &mut Mbuf, off: usize, len: usize) -> Result<&[u8], PullError> {
    match off.checked_add(len) {
        Some(end) if m.first().len() >= end => {
            // IP6_EXTHDR_CHECK's fast path: already in the first buffer, no call.
            count_len_check_of(a.strategy());
            Ok(&m.first()[off..end])
        }
        _ => hdr_slow(a, m, off, len),
    }
}

/// [`hdr`] when the bytes are not all in the first buffer.
#[inline(never)]
fn hdr_slow(a: HdrAccess, m: &mut Mbuf, off: usize, len: usize) -> Result<&[u8], PullError> {
    let end = off.checked_add(len).ok_or(PullError::OutOfRange)?;
    match a {
        HdrAccess::Pulldown => m.pulldown(off, len).map(|b| &*b),
        HdrAccess::Pullup => {
            m.pullup(end)?;
            Ok(&m.first()[off..end])
        }
        HdrAccess::Pullup2 => {
            m.pullup2(end)?;
            Ok(&m.first()[off..end])
        }
    }
}

/// The one's complement sum of `len` bytes of `m` from `off` (not complemented),
/// across segment boundaries: each segment's partial sum, rotated when it starts
/// at an odd offset, added unfolded, and one fold at the end (`in_cksum` over a
/// chain).
pub(crate) fn mbuf_sum(m: &Mbuf, off: usize, len: usize) -> u16 {
    use wire::checksum::{add, finish, partial};
    let end = off + len;
    let mut sum: u64 = 0;
    let mut pos = 0usize;
    let mut odd = false;
    for seg in m.segments() {
        let start = pos;
        pos += seg.len();
        if pos <= off {
            continue;
        }
        if start >= end {
            break;
        }
        let a = off.saturating_sub(start);
        let b = seg.len().min(end - start);
        // The bulk in vectors where the CPU has them (`mbuf::csum`), the rest
        // (an even offset on: the blocks are 64 bytes) as `wire` sums it.
        let (bulk, rest) = mbuf::csum::sum_blocks(&seg[a..b]);
        let s = add(bulk, partial(rest));
        sum = add(sum, if odd { s.rotate_left(8) } else { s });
        if (b - a) % 2 == 1 {
            odd = !odd;
        }
    }
    finish(sum)
}

/// The length an IP header's length field (IPv4's Total Length, IPv6's Payload
/// Length) says `field` for the bytes of `m` from `from` on (the header's start, or
/// the end of IPv6's fixed header). As Linux's `iph_totlen` (BIG TCP): 0 there, in a
/// segment larger than the field can say that a device with segmentation offload
/// handed over whole (`tso_segsz` set), means all of them. Anything else is the
/// field, and a 0 fails the length checks after.
pub(crate) fn length_field(field: u16, m: &Mbuf, from: usize) -> usize {
    let rest = m.len().saturating_sub(from);
    if field == 0 && m.hdr.tso_segsz != 0 && rest > 65535 {
        rest
    } else {
        usize::from(field)
    }
}

/// The first `N` bytes of `b`, as an array, for a view whose getters need no
/// bounds check of their own. The callers have `hdr`'s guarantee that `b` holds
/// them; a shorter `b` (never seen) reads as zeros.
#[inline(always)]
pub(crate) fn fixed<const N: usize>(b: &[u8]) -> &[u8; N] {
    const ZEROS: [u8; 64] = [0; 64];
    match b.first_chunk::<N>() {
        Some(h) => h,
        None => ZEROS.first_chunk::<N>().unwrap_or(&[0; N]),
    }
}
