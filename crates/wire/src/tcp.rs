//! TCP header and options (RFC 9293 §3.1; MSS RFC 9293 §3.7.1, window scale and timestamps
//! RFC 7323, SACK RFC 2018, Fast Open RFC 7413).
//!
//! The view and the `Repr` are lossless for every header field (all nine flags, the
//! urgent pointer); the `Repr` keeps the options TCP acts on and drops unknown ones.
//! The options one by one ([`TcpOption`], [`TcpOptionsIter`]) are in `tcp/option.rs`.

use crate::{checksum, read_u16, read_u32, write_u16, write_u32, Error, IpProtocol, Result};
use core::{cmp, fmt, ops};
use std::net::IpAddr;

mod option;
pub use option::{TcpFastOpenCookie, TcpOption, TcpOptionsIter, TcpTimestampRepr};

/// A TCP sequence number: arithmetic wraps modulo 2^32 and comparison is RFC 1982 serial
/// number comparison (`a < b` iff `(b - a) as i32 > 0`), as RFC 9293 §3.4 requires.
///
/// This order is not transitive across more than half the space, so the type implements
/// `PartialOrd` but not `Ord`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpSeqNumber(pub u32);

impl TcpSeqNumber {
    /// The later of two sequence numbers.
    pub fn max(self, other: TcpSeqNumber) -> TcpSeqNumber {
        if self > other {
            self
        } else {
            other
        }
    }

    /// The earlier of two sequence numbers.
    pub fn min(self, other: TcpSeqNumber) -> TcpSeqNumber {
        if self < other {
            self
        } else {
            other
        }
    }

    /// `self - other` as a signed distance (negative if `other` is later).
    pub fn distance(self, other: TcpSeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// True if `start <= self < start + len` (modulo 2^32).
    pub fn in_window(self, start: TcpSeqNumber, len: u32) -> bool {
        self.0.wrapping_sub(start.0) < len
    }
}

impl fmt::Display for TcpSeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl ops::Add<usize> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    /// Wraps; `rhs` is taken modulo 2^32.
    fn add(self, rhs: usize) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl ops::Sub<usize> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    fn sub(self, rhs: usize) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_sub(rhs as u32))
    }
}

impl ops::AddAssign<usize> for TcpSeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl ops::Sub for TcpSeqNumber {
    type Output = i32;
    /// Signed distance; never panics (unlike smoltcp's, which panics when negative).
    fn sub(self, rhs: TcpSeqNumber) -> i32 {
        self.distance(rhs)
    }
}

impl PartialOrd for TcpSeqNumber {
    fn partial_cmp(&self, other: &TcpSeqNumber) -> Option<cmp::Ordering> {
        Some(self.distance(*other).cmp(&0))
    }
}

/// The nine TCP flag bits (RFC 9293 §3.1, RFC 3168 for ECE/CWR, RFC 3540 for NS).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

flag_set_ops!(TcpFlags);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECN-Echo.
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// ECN nonce (historic, RFC 8311).
    pub const NS: TcpFlags = TcpFlags(0x100);
    /// No flag.
    pub const EMPTY: TcpFlags = TcpFlags(0);

    /// The raw nine bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Flags from raw bits; bits above the ninth are dropped.
    pub const fn from_bits_truncate(bits: u16) -> TcpFlags {
        TcpFlags(bits & 0x1ff)
    }
}

impl fmt::Display for TcpFlags {
    /// tcpdump style: `S`, `S.`, `P.`, `F.`, `R`, `.` (ACK alone), `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(TcpFlags, char); 8] = [
            (TcpFlags::FIN, 'F'),
            (TcpFlags::SYN, 'S'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::ACK, '.'),
        ];
        if self.is_empty() {
            return f.write_str("none");
        }
        for (flag, c) in NAMES {
            if self.contains(flag) {
                write!(f, "{c}")?;
            }
        }
        if self.contains(TcpFlags::NS) {
            f.write_str("N")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ_NUM: usize = 4;
    pub const ACK_NUM: usize = 8;
    pub const FLAGS: usize = 12;
    pub const WIN_SIZE: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const OPTIONS: usize = 20;

    pub const OPT_END: u8 = 0x00;
    pub const OPT_NOP: u8 = 0x01;
    pub const OPT_MSS: u8 = 0x02;
    pub const OPT_WS: u8 = 0x03;
    pub const OPT_SACKPERM: u8 = 0x04;
    pub const OPT_SACKRNG: u8 = 0x05;
    pub const OPT_TSTAMP: u8 = 0x08;
    /// TCP Fast Open (RFC 7413 §4.1.1).
    pub const OPT_FASTOPEN: u8 = 34;
    /// The experimental option (RFC 6994) Fast Open used before kind 34, with
    /// its magic number.
    pub const OPT_EXP: u8 = 254;
    pub const FASTOPEN_EXP_MAGIC: u16 = 0xf989;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Longest TCP header: data offset 15.
pub const MAX_HEADER_LEN: usize = 60;

/// A read/write view of a TCP segment. The buffer must be exactly the segment (the IP
/// payload): TCP has no length field, so the payload is everything after the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 20 bytes or the data offset;
    /// `Err(Malformed)` if the data offset is below 5 (RFC 9293 §3.1).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < header_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(read_u32(self.buffer.as_ref(), field::SEQ_NUM))
    }

    /// Acknowledgment number (meaningful only with ACK).
    pub fn ack_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(read_u32(self.buffer.as_ref(), field::ACK_NUM))
    }

    /// Header length in bytes (data offset · 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) * 4
    }

    /// All nine flags.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(read_u16(self.buffer.as_ref(), field::FLAGS))
    }

    /// FIN.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// SYN.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// RST.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// PSH.
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// ACK.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// URG.
    pub fn urg(&self) -> bool {
        self.flags().contains(TcpFlags::URG)
    }

    /// ECE.
    pub fn ece(&self) -> bool {
        self.flags().contains(TcpFlags::ECE)
    }

    /// CWR.
    pub fn cwr(&self) -> bool {
        self.flags().contains(TcpFlags::CWR)
    }

    /// Window (unscaled).
    pub fn window_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WIN_SIZE)
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// Sequence space the segment occupies: payload length plus one for SYN and for FIN.
    pub fn segment_len(&self) -> usize {
        let data = self.buffer.as_ref();
        let payload = data.len().saturating_sub(usize::from(self.header_len()));
        payload + usize::from(self.syn()) + usize::from(self.fin())
    }

    /// True if the checksum verifies over the pseudo-header and the whole buffer.
    pub fn verify_checksum(&self, src_addr: &IpAddr, dst_addr: &IpAddr) -> bool {
        let data = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_header(src_addr, dst_addr, IpProtocol::Tcp, data.len() as u32),
            checksum::data(data),
        ]) == !0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// The raw options (between the fixed header and the data offset).
    pub fn options(&self) -> &'a [u8] {
        let header_len = usize::from(self.header_len());
        &self.buffer.as_ref()[HEADER_LEN..header_len]
    }

    /// The options, one by one.
    pub fn options_iter(&self) -> TcpOptionsIter<'a> {
        TcpOptionsIter::new(self.options())
    }

    /// The payload.
    pub fn payload(&self) -> &'a [u8] {
        let header_len = usize::from(self.header_len());
        &self.buffer.as_ref()[header_len..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, value)
    }

    /// Set the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, value)
    }

    /// Set the sequence number.
    pub fn set_seq_number(&mut self, value: TcpSeqNumber) {
        write_u32(self.buffer.as_mut(), field::SEQ_NUM, value.0)
    }

    /// Set the acknowledgment number.
    pub fn set_ack_number(&mut self, value: TcpSeqNumber) {
        write_u32(self.buffer.as_mut(), field::ACK_NUM, value.0)
    }

    /// Set the header length in bytes (a multiple of 4, 20..=60); keeps the flags.
    pub fn set_header_len(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::FLAGS] = (data[field::FLAGS] & 0x0f) | ((value / 4) << 4);
    }

    /// Set all flags; keeps the data offset, clears the reserved bits.
    pub fn set_flags(&mut self, value: TcpFlags) {
        let data = self.buffer.as_mut();
        let offset = u16::from(data[field::FLAGS] & 0xf0) << 8;
        write_u16(data, field::FLAGS, offset | value.bits())
    }

    /// Clear all flags.
    pub fn clear_flags(&mut self) {
        self.set_flags(TcpFlags::EMPTY)
    }

    fn set_flag(&mut self, flag: TcpFlags, value: bool) {
        let mut flags = self.flags();
        flags.set(flag, value);
        self.set_flags(flags)
    }

    /// Set or clear FIN.
    pub fn set_fin(&mut self, value: bool) {
        self.set_flag(TcpFlags::FIN, value)
    }

    /// Set or clear SYN.
    pub fn set_syn(&mut self, value: bool) {
        self.set_flag(TcpFlags::SYN, value)
    }

    /// Set or clear RST.
    pub fn set_rst(&mut self, value: bool) {
        self.set_flag(TcpFlags::RST, value)
    }

    /// Set or clear PSH.
    pub fn set_psh(&mut self, value: bool) {
        self.set_flag(TcpFlags::PSH, value)
    }

    /// Set or clear ACK.
    pub fn set_ack(&mut self, value: bool) {
        self.set_flag(TcpFlags::ACK, value)
    }

    /// Set or clear URG.
    pub fn set_urg(&mut self, value: bool) {
        self.set_flag(TcpFlags::URG, value)
    }

    /// Set or clear ECE.
    pub fn set_ece(&mut self, value: bool) {
        self.set_flag(TcpFlags::ECE, value)
    }

    /// Set or clear CWR.
    pub fn set_cwr(&mut self, value: bool) {
        self.set_flag(TcpFlags::CWR, value)
    }

    /// Set the window.
    pub fn set_window_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::WIN_SIZE, value)
    }

    /// Set the checksum.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value)
    }

    /// Set the urgent pointer.
    pub fn set_urgent_at(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::URGENT, value)
    }

    /// The options, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let header_len = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..header_len]
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let header_len = usize::from(self.header_len());
        &mut self.buffer.as_mut()[header_len..]
    }

    /// Compute the checksum over the pseudo-header and the whole buffer and store it.
    pub fn fill_checksum(&mut self, src_addr: &IpAddr, dst_addr: &IpAddr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let sum = checksum::combine(&[
            checksum::pseudo_header(src_addr, dst_addr, IpProtocol::Tcp, data.len() as u32),
            checksum::data(data),
        ]);
        self.set_checksum(!sum)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TcpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed TCP segment. Unknown options are dropped; the payload is borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: TcpSeqNumber,
    /// Acknowledgment number (meaningful only if `flags` has ACK).
    pub ack_number: TcpSeqNumber,
    /// All nine flags.
    pub flags: TcpFlags,
    /// Window (unscaled, as on the wire).
    pub window_len: u16,
    /// Urgent pointer (meaningful only if `flags` has URG).
    pub urgent_at: u16,
    /// MSS option.
    pub max_seg_size: Option<u16>,
    /// Window scale option.
    pub window_scale: Option<u8>,
    /// SACK-permitted option.
    pub sack_permitted: bool,
    /// SACK blocks. `emit` writes as many as fit in 40 bytes of options after the others
    /// (RFC 2018 §3: three with timestamps, four without).
    pub sack_ranges: [Option<(u32, u32)>; 4],
    /// Timestamps option.
    pub timestamp: Option<TcpTimestampRepr>,
    /// Fast Open option (RFC 7413): a cookie or a cookie request. `emit` writes it
    /// after the others, as FreeBSD does, and leaves it out when it does not fit.
    pub fast_open: Option<TcpFastOpenCookie>,
    /// Data.
    pub payload: &'a [u8],
}

/// Options space in a TCP header.
const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

impl<'a> TcpRepr<'a> {
    /// Read a segment. `Err(Malformed)` for port 0 or a malformed option; `Err(Checksum)` if
    /// `verify_checksum` and it does not verify.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        src_addr: &IpAddr,
        dst_addr: &IpAddr,
        verify_checksum: bool,
    ) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::Checksum);
        }
        let mut repr = TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            fast_open: None,
            payload: packet.payload(),
        };
        for option in packet.options_iter() {
            match option? {
                TcpOption::MaxSegmentSize(mss) => repr.max_seg_size = Some(mss),
                TcpOption::WindowScale(shift) => repr.window_scale = Some(shift),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::SackRange(ranges) => repr.sack_ranges = ranges,
                TcpOption::Timestamps { tsval, tsecr } => {
                    repr.timestamp = Some(TcpTimestampRepr { tsval, tsecr })
                }
                TcpOption::FastOpen(c) => repr.fast_open = Some(c),
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
            }
        }
        Ok(repr)
    }

    /// How many SACK blocks `emit` writes, and the options length without them.
    /// How many SACK blocks fit, and the options' length with them.
    fn layout(&self) -> (usize, usize) {
        let wanted = self.sack_ranges.iter().flatten().count();
        (0..=wanted)
            .rev()
            .map(|b| (b, self.options_len(b)))
            .find(|&(_, len)| len <= MAX_OPTIONS_LEN)
            .unwrap_or((0, self.options_len(0)))
    }

    /// The Fast Open option `emit` writes: the one asked for, if it fits beside
    /// the others (FreeBSD's `tcp_addoptions` leaves it out when it does not).
    fn fast_open_fits(&self) -> Option<TcpFastOpenCookie> {
        let c = self.fast_open?;
        let before = self.options_len_unpadded(0, None);
        (before + 2 + c.len() <= MAX_OPTIONS_LEN).then_some(c)
    }

    /// The options' length with `blocks` SACK blocks, laid out as [`TcpRepr::emit`]
    /// writes them.
    fn options_len(&self, blocks: usize) -> usize {
        let fo = self
            .fast_open
            .filter(|c| self.options_len_unpadded(0, None) + 2 + c.len() <= MAX_OPTIONS_LEN);
        self.options_len_unpadded(blocks, fo).next_multiple_of(4)
    }

    /// [`TcpRepr::options_len`] before the padding, with `fo` as the Fast Open
    /// option.
    fn options_len_unpadded(&self, blocks: usize, fo: Option<TcpFastOpenCookie>) -> usize {
        let mut n = 0;
        if self.max_seg_size.is_some() {
            n += 4;
        }
        if self.window_scale.is_some() {
            while n == 0 || n % 2 != 1 {
                n += 1;
            }
            n += 3;
        }
        if self.sack_permitted {
            n += n % 2;
            n += 2;
        }
        if self.timestamp.is_some() {
            while n == 0 || n % 4 != 2 {
                n += 1;
            }
            n += 10;
        }
        if blocks > 0 {
            while n == 0 || n % 4 != 2 {
                n += 1;
            }
            n += 2 + 8 * blocks;
        }
        if let Some(c) = fo {
            // Unaligned, as FreeBSD writes it.
            n += 2 + c.len();
        }
        n
    }

    /// Header length `emit` writes: 20 plus the options, padded to 4 bytes.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.layout().1
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Sequence space: payload plus SYN plus FIN.
    pub fn segment_len(&self) -> usize {
        self.payload.len()
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }

    /// Write the segment (header, options, payload) and fill the checksum if
    /// `fill_checksum` (else write 0, for a NIC to fill).
    ///
    /// Options go as FreeBSD's `tcp_addoptions` lays them out: MSS; window scale
    /// after NOPs to an odd offset; SACK-permitted at an even one; timestamps and
    /// SACK blocks after NOPs to offset 2 modulo 4; then EOL and padding to 4
    /// bytes. A SYN: `mss,nop,wscale,sackOK,TS`; a segment: `nop,nop,TS,nop,nop,sack`.
    /// (Linux puts SACK-permitted and timestamps before the window scale.)
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len). The checksum covers
    /// the whole buffer, so pass exactly `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src_addr: &IpAddr,
        dst_addr: &IpAddr,
        fill_checksum: bool,
    ) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_window_len(self.window_len);
        packet.set_urgent_at(self.urgent_at);
        let header_len = self.header_len();
        packet.set_header_len(header_len as u8);
        packet.set_flags(self.flags);

        let (blocks, _) = self.layout();
        let mut out = packet.options_mut();
        let mut n = 0;
        let nop = |out: &mut &mut [u8], n: &mut usize| {
            *out = TcpOption::NoOperation.emit(std::mem::take(out));
            *n += 1;
        };
        if let Some(mss) = self.max_seg_size {
            out = TcpOption::MaxSegmentSize(mss).emit(out);
            n += 4;
        }
        if let Some(shift) = self.window_scale {
            while n == 0 || n % 2 != 1 {
                nop(&mut out, &mut n);
            }
            out = TcpOption::WindowScale(shift).emit(out);
            n += 3;
        }
        if self.sack_permitted {
            while n % 2 != 0 {
                nop(&mut out, &mut n);
            }
            out = TcpOption::SackPermitted.emit(out);
            n += 2;
        }
        if let Some(ts) = self.timestamp {
            while n == 0 || n % 4 != 2 {
                nop(&mut out, &mut n);
            }
            out = TcpOption::Timestamps {
                tsval: ts.tsval,
                tsecr: ts.tsecr,
            }
            .emit(out);
            n += 10;
        }
        if blocks > 0 {
            while n == 0 || n % 4 != 2 {
                nop(&mut out, &mut n);
            }
            let mut ranges = [None; 4];
            for (slot, range) in ranges.iter_mut().zip(self.sack_ranges.iter().flatten()) {
                *slot = Some(*range);
            }
            ranges[blocks..].fill(None);
            out = TcpOption::SackRange(ranges).emit(out);
            n += 2 + 8 * blocks;
        }
        if let Some(c) = self.fast_open_fits() {
            out = TcpOption::FastOpen(c).emit(out);
            n += 2 + c.len();
        }
        // The end of the list, and padding (both zero) to a 4-byte boundary.
        while n % 4 != 0 {
            out = TcpOption::EndOfList.emit(out);
            n += 1;
        }
        debug_assert!(out.is_empty());

        packet.payload_mut()[..self.payload.len()].copy_from_slice(self.payload);
        if fill_checksum {
            packet.fill_checksum(src_addr, dst_addr)
        } else {
            packet.set_checksum(0)
        }
    }
}

impl fmt::Display for TcpRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TCP src={} dst={} [{}] seq={}",
            self.src_port, self.dst_port, self.flags, self.seq_number
        )?;
        if self.flags.contains(TcpFlags::ACK) {
            write!(f, " ack={}", self.ack_number)?;
        }
        write!(f, " win={} len={}", self.window_len, self.payload.len())?;
        if let Some(mss) = self.max_seg_size {
            write!(f, " mss={mss}")?;
        }
        if let Some(ws) = self.window_scale {
            write!(f, " wscale={ws}")?;
        }
        if self.sack_permitted {
            f.write_str(" sackOK")?;
        }
        if let Some(ts) = self.timestamp {
            write!(f, " TS val {} ecr {}", ts.tsval, ts.tsecr)?;
        }
        if let Some(c) = self.fast_open {
            f.write_str(" FO")?;
            for b in c.as_bytes() {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    // Captured on a Linux veth link (tests/data/linux-veth.txt), IP header removed. The
    // SYN of 10.0.0.1:45030 -> 10.0.0.2:8080: MSS 1460, SACK permitted, timestamps, window
    // scale 10 ...
    static SYN: [u8; 40] = [
        0xaf, 0xe6, 0x1f, 0x90, 0x56, 0x94, 0xad, 0x92, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x18, 0xca, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x30, 0x18,
        0x1c, 0x8a, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a,
    ];

    // ... the SYN-ACK ...
    static SYN_ACK: [u8; 40] = [
        0x1f, 0x90, 0xaf, 0xe6, 0xeb, 0x1d, 0x44, 0x12, 0x56, 0x94, 0xad, 0x93, 0xa0, 0x12, 0xfe,
        0x88, 0xa5, 0x01, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0xbe, 0xcb,
        0x82, 0x23, 0x30, 0x18, 0x1c, 0x8a, 0x01, 0x03, 0x03, 0x0a,
    ];

    // ... and the request: PSH+ACK, NOP NOP timestamps, 18 bytes of data.
    static DATA: [u8; 50] = [
        0xaf, 0xe6, 0x1f, 0x90, 0x56, 0x94, 0xad, 0x93, 0xeb, 0x1d, 0x44, 0x13, 0x80, 0x18, 0x00,
        0x3f, 0xf3, 0x60, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x30, 0x18, 0x1c, 0x8a, 0xbe, 0xcb,
        0x82, 0x23, 0x47, 0x45, 0x54, 0x20, 0x2f, 0x20, 0x48, 0x54, 0x54, 0x50, 0x2f, 0x31, 0x2e,
        0x30, 0x0d, 0x0a, 0x0d, 0x0a,
    ];

    // The IPv6 SYN, fd00::1 -> fd00::2 (MSS 1440).
    static SYN6: [u8; 40] = [
        0xb8, 0x2a, 0x1f, 0x90, 0x4d, 0x38, 0x61, 0x04, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfd,
        0x20, 0xdc, 0xa6, 0x00, 0x00, 0x02, 0x04, 0x05, 0xa0, 0x04, 0x02, 0x08, 0x0a, 0x57, 0x11,
        0x97, 0x3c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a,
    ];

    fn round_trip<'a>(bytes: &'a [u8], src: &IpAddr, dst: &IpAddr) -> TcpRepr<'a> {
        let packet = TcpPacket::new_checked(bytes).unwrap();
        assert!(packet.verify_checksum(src, dst));
        let repr = TcpRepr::parse(&packet, src, dst, true).unwrap();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), src, dst, true);
        // Our options are laid out as FreeBSD's, not as Linux's: the same options,
        // the same length, another order.
        assert_eq!(out.len(), bytes.len(), "{repr}");
        let back = TcpPacket::new_checked(&out[..]).unwrap();
        assert!(back.verify_checksum(src, dst));
        assert_eq!(TcpRepr::parse(&back, src, dst, true).unwrap(), repr);
        repr
    }

    /// A SYN with an MSS and no other option, for the option-layout tests.
    fn syn_base() -> TcpRepr<'static> {
        TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq_number: TcpSeqNumber(0),
            ack_number: TcpSeqNumber(0),
            flags: TcpFlags::SYN,
            window_len: 65535,
            urgent_at: 0,
            max_seg_size: Some(1460),
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            fast_open: None,
            payload: &[],
        }
    }

    /// The layouts FreeBSD's packetdrill suite expects (tcp_addoptions).
    #[test]
    fn options_are_laid_out_as_freebsd_does() {
        let ts = Some(TcpTimestampRepr {
            tsval: 100,
            tsecr: 0,
        });
        let base = syn_base();
        let options = |r: &TcpRepr<'_>| {
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &SRC, &DST, true);
            b[20..].to_vec()
        };
        let tsb = [8, 10, 0, 0, 0, 100, 0, 0, 0, 0];
        // mss,nop,wscale 6,sackOK,TS
        let all = TcpRepr {
            window_scale: Some(6),
            sack_permitted: true,
            timestamp: ts,
            ..base
        };
        let mut want = vec![2, 4, 5, 180, 1, 3, 3, 6, 4, 2];
        want.extend_from_slice(&tsb);
        assert_eq!(options(&all), want);
        // mss,sackOK,eol,eol
        let sack = TcpRepr {
            sack_permitted: true,
            ..base
        };
        assert_eq!(options(&sack), [2, 4, 5, 180, 4, 2, 0, 0]);
        // mss,nop,wscale,nop,nop,TS
        let nosack = TcpRepr {
            window_scale: Some(6),
            timestamp: ts,
            ..base
        };
        let mut want = vec![2, 4, 5, 180, 1, 3, 3, 6, 1, 1];
        want.extend_from_slice(&tsb);
        assert_eq!(options(&nosack), want);
        // mss alone
        assert_eq!(options(&base), [2, 4, 5, 180]);
        // A segment: nop,nop,TS,nop,nop,sack
        let data = TcpRepr {
            flags: TcpFlags::ACK,
            max_seg_size: None,
            timestamp: ts,
            sack_ranges: [Some((5, 9)), None, None, None],
            ..base
        };
        let mut want = vec![1, 1];
        want.extend_from_slice(&tsb);
        want.extend_from_slice(&[1, 1, 5, 10, 0, 0, 0, 5, 0, 0, 0, 9]);
        assert_eq!(options(&data), want);
    }

    #[test]
    fn linux_syn() {
        let packet = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(packet.src_port(), 45030);
        assert_eq!(packet.dst_port(), 8080);
        assert_eq!(packet.seq_number(), TcpSeqNumber(0x5694_ad92));
        assert_eq!(packet.header_len(), 40);
        assert!(packet.syn() && !packet.ack() && !packet.fin() && !packet.rst());
        assert_eq!(packet.window_len(), 64240);
        assert_eq!(packet.segment_len(), 1);
        assert!(packet.payload().is_empty());
        let options: Vec<_> = packet.options_iter().collect::<Result<_>>().unwrap();
        assert_eq!(
            options,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps {
                    tsval: 0x3018_1c8a,
                    tsecr: 0
                },
                TcpOption::NoOperation,
                TcpOption::WindowScale(10),
            ]
        );
        let repr = round_trip(&SYN, &A, &B);
        assert_eq!(repr.flags, TcpFlags::SYN);
        assert_eq!(repr.max_seg_size, Some(1460));
        assert_eq!(repr.window_scale, Some(10));
        assert!(repr.sack_permitted);
        assert_eq!(
            repr.to_string(),
            "TCP src=45030 dst=8080 [S] seq=1452584338 win=64240 len=0 mss=1460 wscale=10 \
             sackOK TS val 806886538 ecr 0"
        );
        // The pseudo-header sum is symmetric in the addresses, but not blind to them.
        assert!(!TcpPacket::new_checked(&SYN[..])
            .unwrap()
            .verify_checksum(&A, &A));
    }

    #[test]
    fn linux_syn_ack_and_data() {
        let syn_ack = round_trip(&SYN_ACK, &B, &A);
        assert_eq!(syn_ack.flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(syn_ack.ack_number, TcpSeqNumber(0x5694_ad93));
        let data = round_trip(&DATA, &A, &B);
        assert_eq!(data.flags, TcpFlags::PSH | TcpFlags::ACK);
        assert_eq!(data.payload, b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!(data.seq_number, syn_ack.ack_number);
        assert_eq!(data.ack_number, syn_ack.seq_number + 1);
        assert_eq!(
            data.timestamp,
            Some(TcpTimestampRepr {
                tsval: 0x3018_1c8a,
                tsecr: 0xbecb_8223
            })
        );
        assert_eq!(data.max_seg_size, None);
    }

    #[test]
    fn linux_syn_over_ipv6() {
        let src = IpAddr::V6("fd00::1".parse().unwrap());
        let dst = IpAddr::V6("fd00::2".parse().unwrap());
        let repr = round_trip(&SYN6, &src, &dst);
        assert_eq!(repr.max_seg_size, Some(1440));
    }

    #[test]
    fn corrupted_checksum_is_rejected() {
        let mut bytes = DATA;
        bytes[30] ^= 0x01;
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &A, &B, true), Err(Error::Checksum));
        assert!(TcpRepr::parse(&packet, &A, &B, false).is_ok());
    }

    #[test]
    fn seq_number_wraps_and_compares() {
        let a = TcpSeqNumber(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b, TcpSeqNumber(2));
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - a, 4);
        assert_eq!(a - b, -4);
        assert_eq!(b - 4, a);
        assert!(TcpSeqNumber(1).in_window(a, 4));
        assert!(!TcpSeqNumber(2).in_window(a, 4));
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
    }

    #[test]
    fn flags_display_like_tcpdump() {
        assert_eq!((TcpFlags::SYN | TcpFlags::ACK).to_string(), "S.");
        assert_eq!(TcpFlags::ACK.to_string(), ".");
        assert_eq!(TcpFlags::EMPTY.to_string(), "none");
    }

    #[test]
    fn malformed_options_error_and_stop() {
        // Length 0 would loop forever in a naive parser.
        let mut iter = TcpOptionsIter::new(&[0x02, 0x00, 0x01]);
        assert_eq!(iter.next(), Some(Err(Error::Malformed)));
        assert_eq!(iter.next(), None);
        // Length 1, length past the end, missing length, MSS with length 3.
        for bad in [
            &[0xfe, 0x01][..],
            &[0xfe, 0x05, 0],
            &[0xfe],
            &[0x02, 0x03, 0x05],
        ] {
            assert_eq!(
                TcpOptionsIter::new(bad).next(),
                Some(Err(Error::Malformed)),
                "{bad:?}"
            );
        }
        // SACK with a partial block.
        assert_eq!(TcpOption::parse(&[5, 6, 0, 0, 0, 0]), Err(Error::Malformed));
    }

    #[test]
    fn unknown_options_are_skipped_by_length() {
        // TCP fast open cookie (kind 34), then NOP, then MSS.
        let bytes = [34, 4, 0xaa, 0xbb, 1, 2, 4, 0x05, 0xb4];
        let options: Vec<_> = TcpOptionsIter::new(&bytes).collect::<Result<_>>().unwrap();
        assert_eq!(
            options,
            [
                TcpOption::Unknown {
                    kind: 34,
                    data: &[0xaa, 0xbb]
                },
                TcpOption::NoOperation,
                TcpOption::MaxSegmentSize(1460),
            ]
        );
        let mut out = [0u8; 4];
        options[0].emit(&mut out);
        assert_eq!(out, bytes[..4]);
    }

    /// The SYN of a Fast Open connection with an 8-byte cookie as FreeBSD lays it
    /// out (the fast-open scripts' `mss 1460,nop,wscale 6,sackOK,TS val 0 ecr
    /// 0,FO 0102030405060708,eol,eol`): the option after the others, unaligned,
    /// then EOL padding.
    #[test]
    fn fast_open_option_goes_last_as_freebsd_writes_it() {
        let cookie = TcpFastOpenCookie::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let repr = TcpRepr {
            window_scale: Some(6),
            sack_permitted: true,
            timestamp: Some(TcpTimestampRepr { tsval: 0, tsecr: 0 }),
            fast_open: Some(cookie),
            ..syn_base()
        };
        let mut b = vec![0u8; repr.buffer_len()];
        repr.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &A, &B, true);
        assert_eq!(
            &b[20..],
            &[
                2, 4, 0x05, 0xb4, 1, 3, 3, 6, 4, 2, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 34, 10, 1, 2, 3,
                4, 5, 6, 7, 8, 0, 0
            ]
        );
        let parsed = TcpRepr::parse(&TcpPacket::new_checked(&b[..]).unwrap(), &A, &B, true);
        assert_eq!(parsed.unwrap().fast_open, Some(cookie));
        // A cookie request is the bare option.
        let req = TcpRepr {
            fast_open: Some(TcpFastOpenCookie::REQUEST),
            ..repr
        };
        assert_eq!(req.header_len(), 20 + 24);
    }

    /// RFC 7413 §4.1.1: cookies of 4 to 16 bytes, even; other lengths are not a
    /// cookie (the option is kept as unknown, the segment is not malformed). The
    /// experimental kind 254 with its magic parses as the same option.
    #[test]
    fn fast_open_cookie_lengths_and_the_experimental_kind() {
        for n in 0..=38usize {
            let mut opt = vec![34, (n + 2) as u8];
            opt.extend(std::iter::repeat_n(0xab, n));
            let (_, o) = TcpOption::parse(&opt).unwrap();
            let valid = n == 0 || ((4..=16).contains(&n) && n % 2 == 0);
            assert_eq!(matches!(o, TcpOption::FastOpen(_)), valid, "length {n}");
        }
        let (_, o) = TcpOption::parse(&[254, 8, 0xf9, 0x89, 1, 2, 3, 4]).unwrap();
        assert_eq!(
            o,
            TcpOption::FastOpen(TcpFastOpenCookie::new(&[1, 2, 3, 4]).unwrap())
        );
        let (_, o) = TcpOption::parse(&[254, 4, 0x12, 0x34]).unwrap();
        assert!(matches!(o, TcpOption::Unknown { kind: 254, .. }));
    }

    #[test]
    fn end_of_list_stops_iteration() {
        let bytes = [1, 0, 0xff, 0xff];
        let options: Vec<_> = TcpOptionsIter::new(&bytes).collect();
        assert_eq!(
            options,
            [Ok(TcpOption::NoOperation), Ok(TcpOption::EndOfList)]
        );
    }

    #[test]
    fn bad_data_offset() {
        let mut bytes = [0u8; 20];
        bytes[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&bytes[..]).unwrap_err(),
            Error::Malformed
        );
        bytes[12] = 0x60;
        assert_eq!(
            TcpPacket::new_checked(&bytes[..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            TcpPacket::new_checked(&bytes[..19]).unwrap_err(),
            Error::Truncated
        );
    }

    fn sack_ranges() -> impl Strategy<Value = [Option<(u32, u32)>; 4]> {
        (0usize..=4, any::<[(u32, u32); 4]>()).prop_map(|(n, r)| {
            let mut out = [None; 4];
            for i in 0..n {
                out[i] = Some(r[i]);
            }
            out
        })
    }

    prop_compose! {
        fn repr_fields()(
            ports in (1u16.., 1u16..),
            seq in any::<u32>(), ack in any::<u32>(), flags in 0u16..0x200,
            window_len in any::<u16>(), urgent_at in any::<u16>(),
            max_seg_size in any::<Option<u16>>(), window_scale in any::<Option<u8>>(),
            sack_permitted in any::<bool>(), sack_ranges in sack_ranges(),
            timestamp in any::<Option<(u32, u32)>>(),
            fo_len in prop::sample::select(vec![None, Some(0usize), Some(4), Some(10), Some(16)]),
        ) -> (TcpRepr<'static>, ) {
            (TcpRepr {
                src_port: ports.0, dst_port: ports.1,
                seq_number: TcpSeqNumber(seq), ack_number: TcpSeqNumber(ack),
                flags: TcpFlags::from_bits_truncate(flags), window_len, urgent_at,
                max_seg_size, window_scale, sack_permitted, sack_ranges,
                timestamp: timestamp.map(|(tsval, tsecr)| TcpTimestampRepr { tsval, tsecr }),
                fast_open: fo_len.and_then(|n| TcpFastOpenCookie::new(&[0xa5; 16][..n])),
                payload: &[],
            },)
        }
    }

    proptest! {
        #[test]
        fn repr_round_trip(
            (mut repr,) in repr_fields(),
            payload in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            repr.payload = &payload;
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &SRC, &DST, true);
            prop_assert!(repr.header_len() <= MAX_HEADER_LEN);
            let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
            let parsed = TcpRepr::parse(&packet, &SRC, &DST, true).unwrap();
            // Blocks that did not fit are dropped, the rest must survive.
            let (blocks, _) = repr.layout();
            let mut expected = repr;
            expected.sack_ranges[blocks..].fill(None);
            prop_assert_eq!(parsed, expected);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            for option in TcpOptionsIter::new(&bytes) {
                let _ = option;
            }
            if let Ok(packet) = TcpPacket::new_checked(&bytes[..]) {
                let _ = (packet.options(), packet.payload(), packet.segment_len());
                if let Ok(repr) = TcpRepr::parse(&packet, &SRC, &DST, false) {
                    let _ = repr.to_string();
                    let mut out = vec![0u8; repr.buffer_len()];
                    repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &SRC, &DST, true);
                }
            }
        }
    }
}
