//! Data and FIN in (RFC 9293 §3.10.7.4, its seventh and eighth steps; FreeBSD's
//! `tcp_reass` for what arrives out of order): trimmed to the window, in-order bytes
//! go to a waiting reader or the receive buffer, out-of-order ones wait in a bounded
//! queue, and the ACK goes at once or is delayed (RFC 1122 §4.2.3.2). The peer's FIN
//! moves the state on. Calls nothing beyond the control block.

use super::seq::{diff, le, lt};
use super::{Payload, SegIn, State, Tcb};
use crate::stats::TcpStat;
use dev::Instant;

/// Out-of-order data waiting for the hole before it.
#[derive(Debug)]
pub(super) struct OooSeg {
    pub(super) seq: u32,
    pub(super) data: Vec<u8>,
    pub(super) fin: bool,
}

impl Tcb {
    pub(super) fn receive_data(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(Payload<'_>) -> usize,
    ) {
        if !self.state.can_receive() {
            return;
        }
        let mut seq = seg.seq;
        let mut data = seg.payload;
        let mut fin = seg.fin;
        self.note_dsack(seq, data.len());
        // Trim what we already have.
        if lt(seq, self.rcv_nxt) {
            let dup = diff(self.rcv_nxt, seq) as usize;
            if dup >= data.len() {
                // Only a FIN (or nothing) is new.
                st.rcvpartduppack += u64::from(!data.is_empty());
                data = Payload::default();
                seq = self.rcv_nxt;
                if !fin || diff(self.rcv_nxt, seg.seq) as usize > seg.payload.len() {
                    fin = false;
                }
            } else {
                st.rcvpartduppack += 1;
                st.rcvdupbyte += dup as u64;
                data = data.skip(dup);
                seq = self.rcv_nxt;
            }
        }
        // Trim what does not fit the window.
        let room = self.offered(self.rcv_window()) as usize;
        let off = diff(seq, self.rcv_nxt) as usize;
        if off + data.len() > room {
            let keep = room.saturating_sub(off);
            data = data.take(keep);
            fin = false;
            st.rcvpackafterwin += 1;
        }
        let arrived = (seq, seq.wrapping_add(data.len() as u32));
        self.receive_in_window(seq, data, fin, now, st, direct);
        if !data.is_empty() {
            self.update_sack_list(arrived);
        }
    }

    /// The rest of [`Tcb::receive_data`]: `data` (and `fin`) at `seq`, trimmed to
    /// what is new and fits the window.
    fn receive_in_window(
        &mut self,
        seq: u32,
        data: Payload<'_>,
        mut fin: bool,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(Payload<'_>) -> usize,
    ) {
        if seq == self.rcv_nxt {
            // Straight to a waiting reader while nothing is buffered ahead of it.
            let mut n = 0;
            if self.rcvbuf.is_empty() {
                n = direct(data).min(data.len());
                self.app_unread += n;
            }
            let space = self.rcvbuf_limit().saturating_sub(self.rcvbuf.len());
            let k = (data.len() - n).min(space);
            for piece in data.skip(n).take(k).pieces() {
                self.rcvbuf.extend(piece);
            }
            n += k;
            self.rcv_advance(n as u32);
            if n > 0 {
                st.rcvpack += 1;
                st.rcvbyte += n as u64;
            }
            if n < data.len() {
                fin = false;
                // Dropped for the memory clamp (`tcp::mem`), not the buffer's size.
                if self.mem_clamp < self.cfg.rcvbuf {
                    st.memrefused += 1;
                }
            }
            let had_ooo = !self.ooo.is_empty();
            if fin {
                self.take_fin(now);
            } else {
                self.drain_ooo(now, st);
            }
            // A segment larger than our MSS (from a sender with segmentation
            // offload, received whole) counts as the wire segments it stands for,
            // so every other one is still acknowledged at once (RFC 1122 §4.2.3.2).
            self.unacked_segs += (n as u32).div_ceil(u32::from(self.cfg.mss.max(1))).max(1);
            if had_ooo || fin || self.unacked_segs >= 2 || self.cfg.delack.is_zero() {
                self.ack_now = true;
            } else if self.delack_deadline.is_none() {
                self.delack_deadline = Some(now + self.cfg.delack);
            }
        } else {
            // Out of order: keep it (bounded) and send a duplicate ACK at once.
            st.rcvoopack += 1;
            st.rcvoobyte += data.len() as u64;
            self.dupacks_owed += 1;
            let end = seq.wrapping_add(data.len() as u32);
            let pos = self
                .ooo
                .iter()
                .position(|o| lt(seq, o.seq))
                .unwrap_or(self.ooo.len());
            // What an entry already holds whole is not kept twice.
            let held = self.ooo.iter().any(|o| {
                le(o.seq, seq)
                    && le(end, o.seq.wrapping_add(o.data.len() as u32))
                    && (o.fin || !fin)
            });
            // A segment that continues the entry before it joins it (the common
            // case: everything after a hole arrives in order), so the queue holds
            // an entry per hole, not per segment, and a window of segments behind
            // one loss fits (FreeBSD coalesces its reassembly queue likewise).
            let joins = pos > 0 && {
                let p = &self.ooo[pos - 1];
                !p.fin && p.seq.wrapping_add(p.data.len() as u32) == seq
            };
            if held {
                // A repeat (its D-SACK is owed already).
            } else if joins {
                let p = &mut self.ooo[pos - 1];
                for piece in data.pieces() {
                    p.data.extend_from_slice(piece);
                }
                p.fin = fin;
                // Not merged with an entry it now reaches: that would copy the
                // entry's bytes again at each such fill (a peer could make it
                // quadratic); adjacent entries make one SACK block and drain in turn.
            } else if self.ooo.len() < self.cfg.ooo_max_segs && (!data.is_empty() || fin) {
                let mut buf = self.ooo_free.pop().unwrap_or_default();
                buf.clear();
                for piece in data.pieces() {
                    buf.extend_from_slice(piece);
                }
                self.ooo.insert(
                    pos,
                    OooSeg {
                        seq,
                        data: buf,
                        fin,
                    },
                );
            } else {
                st.rcvoodrop += 1;
            }
            self.ack_now = true;
        }
    }

    pub(super) fn drain_ooo(&mut self, now: Instant, st: &mut TcpStat) {
        loop {
            let Some(i) = self.ooo.iter().position(|o| le(o.seq, self.rcv_nxt)) else {
                return;
            };
            let mut o = self.ooo.remove(i);
            let skip = diff(self.rcv_nxt, o.seq) as usize;
            if skip > o.data.len() || (skip == o.data.len() && !o.fin) {
                // Nothing new in it.
                self.recycle_ooo(o.data);
                continue;
            }
            let new = &o.data[skip..];
            let space = self.rcvbuf_limit().saturating_sub(self.rcvbuf.len());
            let n = new.len().min(space);
            let rest = new.len() - n;
            self.rcvbuf.extend(&new[..n]);
            self.rcv_advance(n as u32);
            st.rcvbyte += n as u64;
            if rest > 0 {
                // The receive buffer took part of it: the rest waits, in place.
                o.data.drain(..skip + n);
                o.seq = self.rcv_nxt;
                self.ooo.insert(0, o);
                return;
            }
            let fin = o.fin;
            self.recycle_ooo(o.data);
            if fin {
                self.take_fin(now);
                while let Some(o) = self.ooo.pop() {
                    self.recycle_ooo(o.data);
                }
                return;
            }
        }
    }

    fn recycle_ooo(&mut self, buf: Vec<u8>) {
        // Buffers that grew with a run of segments are let go, not kept idle.
        if self.ooo_free.len() < self.cfg.ooo_max_segs
            && buf.capacity() <= 4 * usize::from(self.cfg.mss)
        {
            self.ooo_free.push(buf);
        }
    }

    fn take_fin(&mut self, now: Instant) {
        self.rcv_advance(1);
        self.rcv_fin = true;
        self.ack_now = true;
        self.state = match self.state {
            State::Established => State::CloseWait,
            State::FinWait1 => {
                if self.snd_una == self.snd_max && self.fin_queued {
                    self.enter_time_wait(now);
                    State::TimeWait
                } else {
                    State::Closing
                }
            }
            State::FinWait2 => {
                self.enter_time_wait(now);
                State::TimeWait
            }
            s => s,
        };
    }
}
