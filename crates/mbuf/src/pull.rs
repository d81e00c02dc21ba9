//! Making headers contiguous: the three strategies the m_pulldown paper
//! (Itojun, "Mbuf issues in 4.4BSD IPv6/IPsec support", Freenix 2000) compares,
//! each counted in [`stats`](crate::stats) with the paper's Table 2 columns.
//!
//! | | limit | copies bytes before `off` | keeps earlier offsets valid |
//! |---|---|---|---|
//! | [`Mbuf::pullup`] (4.4BSD `m_pullup`) | `MHLEN` total | yes | no |
//! | [`Mbuf::pullup2`] (NRL `m_pullup2`) | `MCLBYTES` total | yes | no |
//! | [`Mbuf::pulldown`] (KAME `m_pulldown`) | `MCLBYTES` per header | no | yes |
//!
//! The stack uses `pulldown`; the other two exist so that the paper's comparison
//! runs here, on the same packets, with the same counters.

use crate::mbuf::{fill_new, gather, trim_segs_front};
use crate::pool::{Buf, Class};
use crate::seglist::Seg;
use crate::stats::{bump, Strategy};
use crate::{Mbuf, PullError, MCLBYTES, MHLEN, MH_OFF};

fn count_copy(which: Strategy, allocs: u64, bytes: usize) {
    bump(which, |s| {
        s.allocs += allocs;
        s.copies += 1;
        s.bytes_copied += bytes as u64;
    });
}

impl Mbuf {
    /// KAME `m_pulldown`: makes bytes `[off, off + len)` contiguous and writable
    /// and returns them — the caller views them with a `wire` type.
    ///
    /// Nothing before `off` is copied or moved, so offsets found earlier stay
    /// valid, and only the bytes that are not yet in place are copied. In order
    /// (the cases of KAME's `uipc_mbuf2.c`):
    /// 1. the region already lies in one unshared segment: returned as is, no
    ///    copy — the common case, which costs a call and a length check;
    /// 2. it lies in one segment whose buffer is shared: only the region is
    ///    copied, into a new buffer spliced in between the shared pieces;
    /// 3. it starts in segment *k* whose unshared buffer has tailroom for the
    ///    missing bytes: they are copied from the following segments to the end
    ///    of *k*;
    /// 4. the next segment is unshared, holds the rest of the region and has
    ///    headroom for the part in *k*: that part is copied to the front of it;
    /// 5. otherwise one new buffer (small if `len <= MLEN`, else a cluster)
    ///    receives exactly the region, and *k* is cut at `off`.
    ///
    /// Unlike KAME's original, (3) and (4) test the buffer actually written for
    /// being unshared (KAME tested only *k*, and only clusters), and (4) checks
    /// that the next segment holds the rest of the region (as NetBSD later added).
    ///
    /// Fails with `TooBig` if `len > MCLBYTES`, `OutOfRange` if the region ends
    /// past the packet, `NoBufs` if case 2 or 5 found no buffer; the packet is
    /// unchanged by a failure.
    #[inline]
    pub fn pulldown(&mut self, off: usize, len: usize) -> Result<&mut [u8], PullError> {
        bump(Strategy::Pulldown, |s| {
            s.calls += 1;
            s.len_checks += 1;
        });
        let (i, loff) = match self.pulldown_at(off, len) {
            Ok(at) => at,
            Err(e) => {
                bump(Strategy::Pulldown, |s| s.fails += 1);
                return Err(e);
            }
        };
        if len == 0 {
            return Ok(&mut []);
        }
        // Every path above leaves the region in one unshared segment.
        self.segs.as_mut_slice()[i]
            .data_mut(loff, len)
            .ok_or(PullError::NoBufs)
    }

    /// Restructures the chain; returns where the region now lies (segment, offset).
    fn pulldown_at(&mut self, off: usize, len: usize) -> Result<(usize, usize), PullError> {
        const WHO: Strategy = Strategy::Pulldown;
        if len > MCLBYTES {
            return Err(PullError::TooBig);
        }
        match off.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => return Err(PullError::OutOfRange),
        }
        if len == 0 {
            return Ok((0, 0));
        }
        let (k, loff) = self.locate(off);
        let seg = &self.segs.as_slice()[k];
        let seglen = seg.len();

        if loff + len <= seglen {
            if seg.buf.is_unique() {
                return Ok((k, loff));
            }
            return self.pulldown_unshare(k, loff, len);
        }

        // The region takes `hlen` bytes from k and `tlen` from the segments after.
        let hlen = seglen - loff;
        let tlen = len - hlen;

        if seg.tailroom() >= tlen {
            let (head, tail) = self.segs.as_mut_slice().split_at_mut(k + 1);
            let s = &mut head[k];
            let end = s.end();
            if let Some(dst) = s.buf.bytes_mut(end, tlen) {
                gather(tail, 0, dst);
                s.set_len(seglen + tlen);
                trim_segs_front(&mut self.segs, k + 1, tlen);
                count_copy(WHO, 0, tlen);
                return Ok((k, loff));
            }
        }

        let next = &self.segs.as_slice()[k + 1];
        if next.headroom() >= hlen && next.len() >= tlen {
            let (head, tail) = self.segs.as_mut_slice().split_at_mut(k + 1);
            let src = &head[k].data()[loff..];
            let nx = &mut tail[0];
            let at = nx.off() - hlen;
            if let Some(dst) = nx.buf.bytes_mut(at, hlen) {
                dst.copy_from_slice(src);
                nx.grow_front(hlen);
                head[k].set_len(loff);
                count_copy(WHO, 0, hlen);
                if loff == 0 {
                    drop(self.segs.remove(k));
                    return Ok((k, 0));
                }
                return Ok((k + 1, 0));
            }
        }

        let mut buf = Buf::alloc(Class::for_len(len))?;
        let dst = buf.bytes_mut(0, len).ok_or(PullError::NoBufs)?;
        gather(&self.segs.as_slice()[k..], loff, dst);
        count_copy(WHO, 1, len);
        let new = Seg::new(buf, 0, len);
        trim_segs_front(&mut self.segs, k + 1, tlen);
        if loff == 0 {
            self.segs.as_mut_slice()[k] = new;
            Ok((k, 0))
        } else {
            self.segs.as_mut_slice()[k].set_len(loff);
            self.segs.insert(k + 1, new);
            Ok((k + 1, 0))
        }
    }

    /// Case 2: the region is inside segment `k`, whose buffer is shared.
    fn pulldown_unshare(
        &mut self,
        k: usize,
        loff: usize,
        len: usize,
    ) -> Result<(usize, usize), PullError> {
        let mut buf = Buf::alloc(Class::for_len(len))?;
        let s = &self.segs.as_slice()[k];
        fill_new(&mut buf, 0, &s.data()[loff..loff + len])?;
        count_copy(Strategy::Pulldown, 1, len);
        let after = (loff + len < s.len()).then(|| s.share(loff + len, s.len() - loff - len));
        let new = Seg::new(buf, 0, len);
        let at = if loff == 0 {
            self.segs.as_mut_slice()[k] = new;
            k
        } else {
            self.segs.as_mut_slice()[k].set_len(loff);
            self.segs.insert(k + 1, new);
            k + 1
        };
        if let Some(a) = after {
            self.segs.insert(at + 1, a);
        }
        Ok((at, 0))
    }

    /// 4.4BSD `m_pullup`: makes the first `len` bytes contiguous in the first
    /// segment, so that [`Mbuf::first`] holds them. Fails with `TooBig` if
    /// `len > MHLEN` — what the paper saw on IPv6, whose headers easily exceed it.
    ///
    /// If the first segment already holds `len` bytes nothing happens. If its
    /// buffer is unshared and has room, the missing bytes are copied to its end
    /// (as 4.4BSD extends a plain mbuf in place); otherwise a new packet-header
    /// small buffer receives the first `len` bytes. Exactly `len` bytes are
    /// made contiguous (4.4BSD pulled up `max(len, max_protohdr)` when it could).
    pub fn pullup(&mut self, len: usize) -> Result<(), PullError> {
        self.pullup_with(Strategy::Pullup, MHLEN, len)
    }

    /// NRL `m_pullup2`: [`Mbuf::pullup`] up to `MCLBYTES`; a new first buffer is a
    /// cluster when `len > MHLEN`. Fails (`TooBig`) only beyond `MCLBYTES`.
    pub fn pullup2(&mut self, len: usize) -> Result<(), PullError> {
        self.pullup_with(Strategy::Pullup2, MCLBYTES, len)
    }

    fn pullup_with(&mut self, who: Strategy, limit: usize, len: usize) -> Result<(), PullError> {
        bump(who, |s| {
            s.calls += 1;
            s.len_checks += 1;
        });
        let r = self.pullup_at(who, limit, len);
        if r.is_err() {
            bump(who, |s| s.fails += 1);
        }
        r
    }

    fn pullup_at(&mut self, who: Strategy, limit: usize, len: usize) -> Result<(), PullError> {
        if len > limit {
            return Err(PullError::TooBig);
        }
        if len > self.len {
            return Err(PullError::OutOfRange);
        }
        let Some(first) = self.segs.first() else {
            return Ok(()); // len == 0 == self.len
        };
        let have = first.len();
        if have >= len {
            return Ok(());
        }
        if first.tailroom() >= len - have {
            let (head, tail) = self.segs.as_mut_slice().split_at_mut(1);
            let s = &mut head[0];
            let end = s.end();
            if let Some(dst) = s.buf.bytes_mut(end, len - have) {
                gather(tail, 0, dst);
                s.set_len(len);
                trim_segs_front(&mut self.segs, 1, len - have);
                count_copy(who, 0, len - have);
                return Ok(());
            }
        }
        let (class, off) = if len <= MHLEN {
            (Class::Small, MH_OFF)
        } else {
            (Class::Cluster, 0)
        };
        let mut buf = Buf::alloc(class)?;
        let dst = buf.bytes_mut(off, len).ok_or(PullError::NoBufs)?;
        gather(self.segs.as_slice(), 0, dst);
        count_copy(who, 1, len);
        trim_segs_front(&mut self.segs, 0, len);
        self.segs.insert(0, Seg::new(buf, off, len));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{self, PullStats};
    use crate::MLEN;

    /// `ipv6-rthdr0-icmp6-echo.hex` (shared test vectors): the m_pulldown paper's
    /// figure "Packets with IPv6 routing header". IPv6 header (40), type 0 routing
    /// header with 4 addresses, segments left 4 (72), ICMPv6 echo request (16).
    const RTHDR0_ECHO: &str = "
        6000 0000 0058 2b40 2001 0240 0000 0200
        0260 97ff fe07 69ea 2001 0240 0000 0200
        0a00 5aff fe38 6f86 3a08 0004 0000 0000
        2001 0240 0000 0200 0a00 5aff fe38 6f86
        2001 0240 0000 0200 0a00 5aff fe38 6f86
        2001 0240 0000 0200 0a00 5aff fe38 6f86
        2001 0240 0000 0200 0a00 5aff fe38 6f86
        8000 b650 030e 00c8 ce6e fd38 d553 0700";

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Way {
        Pulldown,
        Pullup,
        Pullup2,
    }

    /// One header access of the input path, through the strategy under test: the
    /// bytes `[off, off + len)`, contiguous and writable.
    fn access(m: &mut Mbuf, way: Way, off: usize, len: usize) -> Result<&mut [u8], PullError> {
        match way {
            Way::Pulldown => m.pulldown(off, len),
            Way::Pullup | Way::Pullup2 => {
                if way == Way::Pullup {
                    m.pullup(off + len)?;
                } else {
                    m.pullup2(off + len)?;
                }
                Ok(&mut m.try_first_mut()?[off..off + len])
            }
        }
    }

    /// The IPv6 input path of the paper's end node for this packet, as KAME ran
    /// it: node B finds itself as the next address each time, so `ip6_rthdr0`
    /// forwards the packet to itself and it re-enters `ip6_input` through the
    /// loopback interface, once per segment left (4 times), and is delivered to
    /// `icmp6_input` on the fifth pass. Accesses:
    ///
    /// - every pass: `ip6_input` IPv6 header (0, 40); `route6_input` fixed part of
    ///   the routing header (40, 4), then the whole routing header (40, 72);
    /// - passes 1–4 (segments left > 0), `ip6_rthdr0` per RFC 2460 §4.4: swap the
    ///   IPv6 destination with the next address — IPv6 header (0, 40), routing
    ///   header (40, 72) — and decrement segments left;
    /// - pass 5: `icmp6_input` ICMPv6 header (112, 8), then the echo request
    ///   (112, 16) that the reply reflects.
    ///
    /// 25 accesses. Returns the ICMPv6 message once delivered.
    fn ip6_input_rthdr0(m: &mut Mbuf, way: Way) -> Result<Vec<u8>, PullError> {
        loop {
            let ip6 = access(m, way, 0, 40)?;
            assert_eq!(ip6[6], 43, "next header: routing");
            let rh = access(m, way, 40, 4)?;
            let rhlen = (usize::from(rh[1]) + 1) * 8;
            let rh = access(m, way, 40, rhlen)?;
            let (nxt, naddr, segleft) = (rh[0], usize::from(rh[1]) / 2, usize::from(rh[3]));
            if segleft > 0 {
                let i = naddr - segleft;
                let addr: [u8; 16] = rh[8 + 16 * i..24 + 16 * i].try_into().unwrap();
                rh[3] -= 1;
                let ip6 = access(m, way, 0, 40)?;
                let dst: [u8; 16] = ip6[24..40].try_into().unwrap();
                ip6[24..40].copy_from_slice(&addr);
                access(m, way, 40, rhlen)?[8 + 16 * i..24 + 16 * i].copy_from_slice(&dst);
                continue; // ip6_forward → looutput → ip6_input
            }
            assert_eq!(nxt, 58, "next header: ICMPv6");
            let off = 40 + rhlen;
            let icmp6 = access(m, way, off, 8)?;
            assert_eq!(icmp6[0], 128, "echo request");
            let plen = m.len() - off;
            return Ok(access(m, way, off, plen)?.to_vec());
        }
    }

    fn icmp6_checksum_ok(m: &Mbuf, icmp6: &[u8]) -> bool {
        let mut hdr = [0u8; 40];
        m.copydata(0, &mut hdr).unwrap();
        let mut sum: u32 = 0;
        let mut add = |b: &[u8]| {
            for w in b.chunks(2) {
                sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            }
        };
        add(&hdr[8..40]); // source, destination
        add(&(icmp6.len() as u32).to_be_bytes());
        add(&[0, 0, 0, 58]);
        add(icmp6);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum == 0xffff
    }

    fn run(way: Way) -> (Result<Vec<u8>, PullError>, Mbuf, PullStats) {
        let pkt = hex(RTHDR0_ECHO);
        assert_eq!(pkt.len(), 128);
        let mut m = Mbuf::devget(&pkt).unwrap();
        assert_eq!(
            m.segments().map(<[u8]>::len).collect::<Vec<_>>(),
            [MHLEN, 32],
            "m_devget: len > MHLEN and <= MHLEN + MLEN takes two small mbufs"
        );
        stats::reset();
        let r = ip6_input_rthdr0(&mut m, way);
        let s = stats::snapshot();
        let s = match way {
            Way::Pulldown => s.pulldown,
            Way::Pullup => s.pullup,
            Way::Pullup2 => s.pullup2,
        };
        m.check();
        (r, m, s)
    }

    /// The paper's Table 2, test (5), for one packet: the routing-header packet
    /// held in two mbufs (96 + 32), through the 25 accesses of
    /// [`ip6_input_rthdr0`]:
    ///
    /// | strategy | calls | allocs | copies | bytes copied | fails |
    /// |---|---|---|---|---|---|
    /// | pulldown | 25 | 1 | 1 | 72 | 0 |
    /// | pullup2 | 25 | 1 | 3 | 128 | 0 |
    /// | pullup | 3 | 0 | 0 | 0 | 1 (the packet is lost) |
    ///
    /// `pulldown` copies once: the routing header straddles the two buffers, no
    /// buffer has room at the right end, so one small buffer receives exactly the
    /// 72 header bytes; the IPv6 header before it is neither copied nor moved, and
    /// every later access (four more passes, the ICMPv6 header right after) finds
    /// its bytes in place. `pullup2` must copy everything up to the end of each
    /// header into the first buffer: 112 bytes (a new cluster) for the routing
    /// header, then 8 and 8 more for the ICMPv6 header and message, intermediate
    /// headers included. `pullup` cannot hold 112 bytes in MHLEN (96): the first
    /// finding of the paper, "m_pullup actually failed on IPv6 traffic".
    ///
    /// The paper reports 7 copies for m_pullup2 against 1: its m_pullup2 numbers
    /// were simulated inside m_pulldown, against the chain m_pulldown had
    /// shaped, so they count a copy wherever that chain's first mbuf was too
    /// short. Here each strategy runs for real on its own copy of the packet, and
    /// a real m_pullup2 keeps what it pulled up; the direction and the cause are
    /// the paper's, the count is smaller.
    #[test]
    fn pulldown_copies_less_than_pullup2_on_rthdr0_packet_in_two_mbufs() {
        let (r, m, s) = run(Way::Pulldown);
        let icmp6 = r.unwrap();
        assert_eq!(icmp6.len(), 16);
        assert!(
            icmp6_checksum_ok(&m, &icmp6),
            "bytes intact after restructuring"
        );
        assert_eq!(
            s,
            PullStats {
                calls: 25,
                len_checks: 25,
                allocs: 1,
                copies: 1,
                bytes_copied: 72,
                fails: 0
            }
        );
        assert_eq!(
            m.segments().map(<[u8]>::len).collect::<Vec<_>>(),
            [40, 72, 16],
            "IPv6 header left in place, routing header in its own buffer"
        );

        let (r2, m2, s2) = run(Way::Pullup2);
        assert_eq!(r2.unwrap(), icmp6);
        assert_eq!(m2.to_vec(), m.to_vec());
        assert_eq!(
            s2,
            PullStats {
                calls: 25,
                len_checks: 25,
                allocs: 1,
                copies: 3,
                bytes_copied: 128,
                fails: 0
            }
        );
        assert!(s.copies * 3 <= s2.copies && s.bytes_copied < s2.bytes_copied);

        let (r1, _, s1) = run(Way::Pullup);
        assert_eq!(r1, Err(PullError::TooBig));
        assert_eq!((s1.calls, s1.fails, s1.copies), (3, 1, 0));
    }

    /// "To process a TCP-over-IPv6 packet, at least 3 checks would be made
    /// against m->m_len": IPv6 header (40), TCP header (20), TCP header with
    /// options (data offset). A 120-byte segment with 40 bytes of options arrives
    /// in two small mbufs (96 + 24) and its options cross the boundary.
    #[test]
    fn tcp_over_ipv6_takes_three_length_checks() {
        let mut pkt = vec![0u8; 120];
        pkt[6] = 6; // next header TCP
        pkt[40 + 12] = 15 << 4; // data offset: 60 bytes of TCP header
        let path = |m: &mut Mbuf, way: Way| -> Result<(), PullError> {
            access(m, way, 0, 40)?;
            let th = access(m, way, 40, 20)?;
            let thlen = usize::from(th[12] >> 4) * 4;
            access(m, way, 40, thlen)?;
            Ok(())
        };
        for way in [Way::Pulldown, Way::Pullup2, Way::Pullup] {
            let mut m = Mbuf::devget(&pkt).unwrap();
            stats::reset();
            let r = path(&mut m, way);
            let all = stats::snapshot();
            let s = match way {
                Way::Pulldown => all.pulldown,
                Way::Pullup => all.pullup,
                Way::Pullup2 => all.pullup2,
            };
            assert_eq!(s.len_checks, 3, "{way:?}");
            match way {
                // Options 40..100 straddle 96: one small buffer gets those 60 bytes.
                Way::Pulldown => assert_eq!((s.allocs, s.copies, s.bytes_copied), (1, 1, 60)),
                // 100 bytes from offset 0 into a new cluster.
                Way::Pullup2 => assert_eq!((s.allocs, s.copies, s.bytes_copied), (1, 1, 100)),
                Way::Pullup => assert_eq!((r, s.fails), (Err(PullError::TooBig), 1)),
            }
            assert_eq!(m.to_vec(), pkt);
        }
    }

    fn fresh() -> PullStats {
        stats::reset();
        PullStats::default()
    }
    fn pd() -> PullStats {
        stats::snapshot().pulldown
    }
    fn lens(m: &Mbuf) -> Vec<usize> {
        m.segments().map(<[u8]>::len).collect()
    }
    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn pulldown_hit_copies_nothing() {
        let data = bytes(300);
        let mut m = Mbuf::from_slice(&data).unwrap();
        let mut want = fresh();
        assert_eq!(m.pulldown(14, 20).unwrap(), &data[14..34]);
        want.calls = 1;
        want.len_checks = 1;
        assert_eq!(pd(), want);
    }

    #[test]
    fn pulldown_extends_into_tailroom_of_the_segment_holding_off() {
        // Segment 0 is a small buffer (108) holding 10 bytes: tailroom 98.
        let data = bytes(70);
        let mut m = Mbuf::from_parts(&[&data[..10], &data[10..40], &data[40..]]).unwrap();
        fresh();
        assert_eq!(m.pulldown(4, 50).unwrap(), &data[4..54]);
        let s = pd();
        assert_eq!((s.allocs, s.copies, s.bytes_copied), (0, 1, 44));
        assert_eq!(lens(&m), [54, 16], "segment 1 consumed, segment 2 trimmed");
        assert_eq!(m.to_vec(), data);
        m.check();
    }

    #[test]
    fn pulldown_moves_head_part_into_headroom_of_the_next_segment() {
        // Segment 0: a cluster filled to the end (no tailroom); segment 1 with
        // headroom (after a trim).
        let data = bytes(MCLBYTES + 100);
        let mut m = Mbuf::from_parts(&[&data[..MCLBYTES], &data[MCLBYTES - 20..]]).unwrap();
        m.segs.as_mut_slice()[1].trim_front(20); // headroom 20 in segment 1
        m.len -= 20;
        assert_eq!(m.to_vec(), data);
        fresh();
        let off = MCLBYTES - 8;
        assert_eq!(m.pulldown(off, 30).unwrap(), &data[off..off + 30]);
        let s = pd();
        assert_eq!((s.allocs, s.copies, s.bytes_copied), (0, 1, 8));
        assert_eq!(lens(&m), [MCLBYTES - 8, 108]);
        assert_eq!(m.to_vec(), data);
        m.check();
    }

    #[test]
    fn pulldown_allocates_exactly_the_region_when_no_room() {
        let data = bytes(128);
        let mut m = Mbuf::devget(&data).unwrap();
        fresh();
        assert_eq!(m.pulldown(40, 72).unwrap(), &data[40..112]);
        let s = pd();
        assert_eq!((s.allocs, s.copies, s.bytes_copied), (1, 1, 72));
        assert_eq!(lens(&m), [40, 72, 16]);
        assert_eq!(
            m.segs.as_slice()[1].buf.cap(),
            MLEN,
            "small when len <= MLEN"
        );
        // Region spanning three segments and larger than MLEN: a cluster.
        let data = bytes(400);
        let mut m = Mbuf::from_parts(&[&data[..100], &data[100..200], &data[200..]]).unwrap();
        // Segment 0 (small, tailroom 8) and segment 1 (no headroom) have no room.
        assert_eq!(m.pulldown(50, 300).unwrap(), &data[50..350]);
        assert_eq!(m.to_vec(), data);
        m.check();
    }

    #[test]
    fn pulldown_at_segment_start_replaces_the_segment() {
        // Region starts exactly at a boundary: nothing before off is touched.
        let data = bytes(2 * MCLBYTES);
        let mut m = Mbuf::from_parts(&[&data[..MCLBYTES], &data[MCLBYTES..]]).unwrap();
        let mut tiny = Mbuf::from_parts(&[&data[..3]]).unwrap();
        tiny.cat(m.split(MCLBYTES - 5).unwrap());
        // tiny: [3][5 shared][2048]; pull 8 bytes at 3 spanning shared + next.
        let want: Vec<u8> = data[..3]
            .iter()
            .chain(&data[MCLBYTES - 5..])
            .copied()
            .collect();
        assert_eq!(tiny.to_vec(), want);
        assert_eq!(tiny.pulldown(3, 20).unwrap(), &want[3..23]);
        assert_eq!(tiny.to_vec(), want);
        assert_eq!(lens(&tiny)[0], 3);
        tiny.check();
        assert_eq!(
            m.to_vec(),
            &data[..MCLBYTES - 5],
            "the other holder is untouched"
        );
    }

    #[test]
    fn pulldown_on_shared_buffer_copies_only_the_region() {
        let data = bytes(200);
        let mut m = Mbuf::from_slice(&data).unwrap();
        let c = m.try_clone().unwrap();
        fresh();
        let r = m.pulldown(20, 30).unwrap();
        r.fill(0xee);
        let s = pd();
        assert_eq!((s.allocs, s.copies, s.bytes_copied), (1, 1, 30));
        assert_eq!(lens(&m), [20, 30, 150]);
        assert_eq!(c.to_vec(), data, "the clone does not see the write");
        let mut want = data.clone();
        want[20..50].fill(0xee);
        assert_eq!(m.to_vec(), want);
        m.check();
        // At offset 0 and to the end of the segment: one piece each way.
        let mut m2 = c.try_clone().unwrap();
        m2.pulldown(0, 200).unwrap();
        assert_eq!(lens(&m2), [200]);
        assert_eq!(m2.to_vec(), data);
    }

    #[test]
    fn pulldown_edges() {
        let data = bytes(100);
        let mut m = Mbuf::devget(&data).unwrap();
        let mut want = fresh();
        assert_eq!(m.pulldown(100, 0).unwrap(), &[] as &[u8]);
        assert_eq!(m.pulldown(0, 0).unwrap(), &[] as &[u8]);
        assert_eq!(m.pulldown(96, 4).unwrap(), &data[96..], "off at a boundary");
        assert_eq!(m.pulldown(99, 2), Err(PullError::OutOfRange));
        assert_eq!(m.pulldown(101, 0), Err(PullError::OutOfRange));
        assert_eq!(m.pulldown(usize::MAX, 2), Err(PullError::OutOfRange));
        assert_eq!(m.pulldown(0, MCLBYTES + 1), Err(PullError::TooBig));
        want.calls = 7;
        want.len_checks = 7;
        want.fails = 4;
        assert_eq!(pd(), want);
        let mut e = Mbuf::new().unwrap();
        assert_eq!(e.pulldown(0, 0).unwrap().len(), 0);
        assert_eq!(e.pulldown(0, 1), Err(PullError::OutOfRange));
    }

    #[test]
    fn pulldown_largest_region_is_a_cluster() {
        let data = bytes(3 * MCLBYTES);
        let mut m = Mbuf::devget(&data).unwrap();
        assert_eq!(
            m.pulldown(100, MCLBYTES).unwrap(),
            &data[100..100 + MCLBYTES]
        );
        assert_eq!(m.to_vec(), data);
        m.check();
    }

    #[test]
    fn pullup_extends_in_place_or_allocates_a_header_buffer() {
        let data = bytes(150);
        // First segment: small buffer with 10 bytes, room for 98 more.
        let mut m = Mbuf::from_parts(&[&data[..10], &data[10..]]).unwrap();
        stats::reset();
        m.pullup(60).unwrap();
        assert_eq!(m.first(), &data[..60]);
        let s = stats::snapshot().pullup;
        assert_eq!((s.allocs, s.copies, s.bytes_copied), (0, 1, 50));
        m.pullup(40).unwrap(); // already there
        assert_eq!(stats::snapshot().pullup.copies, 1);
        assert_eq!(m.pullup(MHLEN + 1), Err(PullError::TooBig));
        assert_eq!(stats::snapshot().pullup.fails, 1);

        // devget layout: the header buffer is full; a new one is allocated.
        let mut m = Mbuf::devget(&data).unwrap();
        m.pullup(MHLEN).unwrap();
        assert_eq!(stats::snapshot().pullup.copies, 1, "already holds MHLEN");
        let mut c = Mbuf::from_parts(&[&data[..50], &data[50..]]).unwrap();
        let c2 = c.try_clone().unwrap(); // shared: no in-place extension
        c.pullup(80).unwrap();
        assert_eq!(c.first(), &data[..80]);
        assert_eq!(c.segs.as_slice()[0].off(), MH_OFF);
        assert_eq!(c.to_vec(), data);
        assert_eq!(c2.to_vec(), data);
        c.check();
        assert_eq!(m.pullup(151), Err(PullError::TooBig));
        let mut small = Mbuf::devget(&data[..20]).unwrap();
        assert_eq!(small.pullup(21), Err(PullError::OutOfRange));
        assert_eq!(small.pullup(0), Ok(()));
    }

    #[test]
    fn pullup2_uses_a_cluster_beyond_mhlen() {
        let data = bytes(300);
        let mut m = Mbuf::devget(&data[..200]).unwrap();
        stats::reset();
        m.pullup2(150).unwrap();
        assert_eq!(m.first(), &data[..150]);
        assert_eq!(m.segs.as_slice()[0].buf.cap(), MCLBYTES);
        m.pullup2(200).unwrap(); // in place, in the cluster
        let s = stats::snapshot().pullup2;
        assert_eq!((s.allocs, s.copies, s.bytes_copied), (1, 2, 200));
        assert_eq!(lens(&m), [200]);
        let mut big = Mbuf::devget(&bytes(3000)).unwrap();
        assert_eq!(big.pullup2(MCLBYTES + 1), Err(PullError::TooBig));
        big.pullup2(MCLBYTES).unwrap();
        assert_eq!(big.to_vec(), bytes(3000));
        let mut e = Mbuf::from_parts(&[]).unwrap();
        assert_eq!(e.pullup2(0), Ok(()));
    }
}
