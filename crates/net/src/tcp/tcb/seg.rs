//! Segments as the control block sees them: [`SegIn`], a received segment parsed,
//! its data left in the buffers it arrived in ([`Payload`]); [`SegOut`], a segment to
//! send, naming its data in the send buffer; and the reset that answers a segment
//! belonging to no connection (RFC 9293 §3.10.7.1). Converts to and from
//! `wire::TcpRepr`, and calls nothing else.

pub use wire::TcpFastOpenCookie as FoCookie;

/// A received segment, parsed (see `SegIn::from_repr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegIn<'a> {
    pub seq: u32,
    /// The acknowledgment number, when the ACK flag is set.
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    /// Window as on the wire (unscaled).
    pub wnd: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_perm: bool,
    /// (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge).
    pub sack: [Option<(u32, u32)>; 4],
    /// ECN-Echo and Congestion Window Reduced (RFC 3168 §6.1).
    pub ece: bool,
    pub cwr: bool,
    /// The IP header carried Congestion Experienced (set by the caller).
    pub ce: bool,
    /// Fast Open option (RFC 7413): a cookie, or an empty one (a request).
    pub fast_open: Option<FoCookie>,
    pub payload: Payload<'a>,
}

/// The most pieces a [`Payload`] holds: a large segment (up to a 512 KiB one from a
/// device with segmentation offload) arrives as its header's buffer and the send
/// buffer's chunks it shares, a handful of buffers; one that software LRO merged
/// (`net::lro`) as the buffers of its frames, up to this many (Linux's
/// `MAX_SKB_FRAGS` is 17). Sixteen frames of 1448 bytes, against eight, made no
/// difference to `bench tcp`'s mpstack-polled row (13.6 Gbit/s, best of seven); a
/// 512 KiB segment (eight jumbo clusters, a header and the pieces at its ends) fits
/// in sixteen, where eight sent it through the copy: 146 against 66 Gbit/s.
pub const PAYLOAD_PIECES: usize = crate::link::lro::MAX_BUFS;

/// A received segment's data, in the pieces of the buffers it arrived in (the
/// sender's header buffer and the send-buffer chunks its segment shares, say), so
/// that nothing is copied to make it contiguous.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Payload<'a> {
    /// `p[..n]` are the pieces, none of them empty.
    p: [&'a [u8]; PAYLOAD_PIECES],
    n: u8,
}

impl<'a> Payload<'a> {
    /// `head` followed by `tail`.
    pub fn new(head: &'a [u8], tail: &'a [u8]) -> Self {
        let mut p = Payload::default();
        p.push(head);
        p.push(tail);
        p
    }

    /// Adds `piece` at the end; false (and nothing added) when it has
    /// [`PAYLOAD_PIECES`] already. An empty piece is always taken.
    pub fn push(&mut self, piece: &'a [u8]) -> bool {
        if piece.is_empty() {
            return true;
        }
        let Some(slot) = self.p.get_mut(usize::from(self.n)) else {
            return false;
        };
        *slot = piece;
        self.n += 1;
        true
    }

    fn slices(&self) -> &[&'a [u8]] {
        &self.p[..usize::from(self.n)]
    }

    pub fn len(&self) -> usize {
        self.slices().iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Without its first `n` bytes (empty when `n` is the length or more).
    pub fn skip(self, mut n: usize) -> Self {
        let mut out = Payload::default();
        for piece in self.pieces() {
            match piece.get(n..) {
                Some(rest) => {
                    out.push(rest);
                    n = 0;
                }
                None => n -= piece.len(),
            }
        }
        out
    }

    /// Its first `n` bytes (all of it when `n` is the length or more).
    pub fn take(self, mut n: usize) -> Self {
        let mut out = Payload::default();
        for piece in self.pieces() {
            if n == 0 {
                break;
            }
            let k = piece.len().min(n);
            out.push(&piece[..k]);
            n -= k;
        }
        out
    }

    /// The non-empty slices, in order.
    pub fn pieces(self) -> impl Iterator<Item = &'a [u8]> {
        self.p.into_iter().take(usize::from(self.n))
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(b: &'a [u8]) -> Self {
        Payload::new(b, &[])
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Payload<'a> {
    fn from(b: &'a [u8; N]) -> Self {
        Payload::new(b, &[])
    }
}

impl<'a> SegIn<'a> {
    pub fn from_repr(r: &wire::TcpRepr<'a>) -> Self {
        use wire::TcpFlags as F;
        SegIn {
            seq: r.seq_number.0,
            ack: r.flags.contains(F::ACK).then_some(r.ack_number.0),
            syn: r.flags.contains(F::SYN),
            fin: r.flags.contains(F::FIN),
            rst: r.flags.contains(F::RST),
            wnd: r.window_len,
            mss: r.max_seg_size,
            wscale: r.window_scale,
            sack_perm: r.sack_permitted,
            ts: r.timestamp.map(|t| (t.tsval, t.tsecr)),
            sack: r.sack_ranges,
            ece: r.flags.contains(F::ECE),
            cwr: r.flags.contains(F::CWR),
            ce: false,
            fast_open: r.fast_open,
            payload: r.payload.into(),
        }
    }

    /// What the peer parses from `seg` carrying `payload` (tests and fuzzing join
    /// two control blocks without the wire format).
    pub fn from_out(seg: &SegOut, payload: &'a [u8]) -> Self {
        SegIn {
            seq: seg.seq,
            ack: seg.ack_flag.then_some(seg.ack),
            syn: seg.syn,
            fin: seg.fin,
            rst: seg.rst,
            wnd: seg.wnd,
            mss: seg.mss,
            wscale: seg.wscale,
            sack_perm: seg.sack_perm,
            ts: seg.ts,
            sack: seg.sack,
            ece: seg.ece,
            cwr: seg.cwr,
            ce: false,
            fast_open: seg.fast_open,
            payload: payload.into(),
        }
    }

    /// Sequence space the segment occupies.
    pub fn seg_len(&self) -> u32 {
        self.payload.len() as u32 + u32::from(self.syn) + u32::from(self.fin)
    }
}

/// A segment to send. Its data are `data_len` bytes of the send buffer starting at
/// sequence number `seq` (after the SYN, if it carries one: Fast Open); see
/// [`Tcb::copy_payload`](super::Tcb::copy_payload).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegOut {
    pub seq: u32,
    /// Acknowledgment number; meaningful when `ack_flag` is set.
    pub ack: u32,
    pub ack_flag: bool,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
    pub wnd: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_perm: bool,
    pub ts: Option<(u32, u32)>,
    /// SACK blocks of data held out of order.
    pub sack: [Option<(u32, u32)>; 4],
    /// ECN-Echo and Congestion Window Reduced (RFC 3168 §6.1).
    pub ece: bool,
    pub cwr: bool,
    /// Sent ECN-capable: ECT(0) in the IP header (new data on a connection with
    /// ECN).
    pub ect: bool,
    /// Fast Open option (RFC 7413) on a SYN or SYN-ACK.
    pub fast_open: Option<FoCookie>,
    pub data_len: usize,
    /// For a segment built for segmentation offload (`data_len` beyond one MSS):
    /// the data bytes of each segment the device is to cut it into; 0 otherwise.
    pub tso_segsz: u16,
}

impl SegOut {
    /// The `wire` representation with `payload` as data.
    pub fn to_repr<'p>(
        &self,
        src_port: u16,
        dst_port: u16,
        payload: &'p [u8],
    ) -> wire::TcpRepr<'p> {
        use wire::TcpFlags as F;
        let mut flags = F::EMPTY;
        flags.set(F::SYN, self.syn);
        flags.set(F::FIN, self.fin);
        flags.set(F::RST, self.rst);
        flags.set(F::PSH, self.psh);
        flags.set(F::ACK, self.ack_flag);
        flags.set(F::ECE, self.ece);
        flags.set(F::CWR, self.cwr);
        wire::TcpRepr {
            src_port,
            dst_port,
            seq_number: wire::TcpSeqNumber(self.seq),
            ack_number: wire::TcpSeqNumber(if self.ack_flag { self.ack } else { 0 }),
            flags,
            window_len: self.wnd,
            urgent_at: 0,
            max_seg_size: self.mss,
            window_scale: self.wscale,
            sack_permitted: self.sack_perm,
            sack_ranges: self.sack,
            timestamp: self
                .ts
                .map(|(tsval, tsecr)| wire::TcpTimestampRepr { tsval, tsecr }),
            fast_open: self.fast_open,
            payload,
        }
    }
}

/// The reset answering a segment that belongs to no connection (RFC 9293 §3.10.7.1).
/// `None` for a segment that is itself a reset.
pub fn reset_for(seg: &SegIn<'_>) -> Option<SegOut> {
    if seg.rst {
        return None;
    }
    Some(reset_answering(seg.seq, seg.ack, seg.seg_len()))
}

/// The reset answering a segment of sequence number `seq`, acknowledgment `ack`
/// (when its ACK flag is set) and length `seg_len` (data, SYN and FIN counted):
/// `<SEQ=SEG.ACK><CTL=RST>`, or `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
pub fn reset_answering(seq: u32, ack: Option<u32>, seg_len: u32) -> SegOut {
    match ack {
        Some(a) => SegOut {
            seq: a,
            rst: true,
            ..SegOut::default()
        },
        None => SegOut {
            seq: 0,
            ack: seq.wrapping_add(seg_len),
            ack_flag: true,
            rst: true,
            ..SegOut::default()
        },
    }
}
