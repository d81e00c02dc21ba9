//! The bridge's data path (`bridge_input`, `bridge_forward`, `bridge_broadcast`
//! and `bridge_output` in FreeBSD's `if_bridge.c`), over the vectors of the
//! worker's stages.
//!
//! A member's burst comes here instead of `ether_input`: each frame's source is
//! checked and learned (the new addresses of the whole vector handed to the table
//! in one batch), the layer-2 input hooks run over the vector, then each frame goes
//! to the member its destination was learned on, to every other member (broadcast,
//! multicast, unknown unicast; the members share the frame's buffers), or to the
//! bridge's own interface, whose frames the worker runs through `ether_input` as
//! any interface's. BPDUs go to the spanning tree. Frames the host sends on the
//! bridge's interface reach the members through [`bridge_output`].

use super::{BridgeConf, Learn, StpOut, MAX_MEMBERS};
use crate::link::cx::PfilScratch;
use crate::link::iface::{IfIndex, Ifnet};
use crate::link::LinkCx;
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use dev::Instant;
use mbuf::Mbuf;
use wire::stp::{BRIDGE_GROUP_ADDRESS, LLC_STP};
use wire::{EtherType, EthernetAddress, EthernetFrame, StpBpdu, StpRepr};

const ETHER_HDR_LEN: usize = 14;

/// The bridge's vectors, kept by the worker from batch to batch.
#[derive(Debug, Default)]
pub(crate) struct BridgeVecs {
    /// Frames for the bridge's own interface, link header kept.
    pub local: Vec<Mbuf>,
    learn: Vec<Learn>,
    checked: Vec<(Mbuf, Dest)>,
    pf: PfilScratch<Dest>,
}

/// Where a frame is going: its destination address and VLAN.
#[derive(Clone, Copy, Debug)]
struct Dest {
    mac: EthernetAddress,
    vlan: u16,
}

/// Seconds of the stack's clock, the address table's time.
#[inline]
pub(crate) fn now_secs(now: Instant) -> u32 {
    (now.as_nanos() / 1_000_000_000) as u32
}

/// One of IEEE 802.1D's reserved group addresses (01:80:c2:00:00:00-0f), which a
/// bridge never forwards (§7.12.6).
#[inline]
fn reserved(d: EthernetAddress) -> bool {
    d.0[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && d.0[5] & 0xf0 == 0
}

/// The frame's destination, source and VLAN id (0 when untagged).
#[inline]
fn header(
    cx: &LinkCx<'_>,
    m: &mut Mbuf,
) -> Result<(EthernetAddress, EthernetAddress, u16), DropReason> {
    let h =
        crate::hdr::hdr(cx.access, m, 0, ETHER_HDR_LEN).map_err(|_| DropReason::EtherTooShort)?;
    let f = EthernetFrame::new_unchecked(crate::hdr::fixed::<ETHER_HDR_LEN>(h));
    let (dst, src, ty) = (f.dst_addr(), f.src_addr(), f.ethertype());
    if ty != EtherType::Vlan {
        return Ok((dst, src, 0));
    }
    let h =
        crate::hdr::hdr(cx.access, m, ETHER_HDR_LEN, 2).map_err(|_| DropReason::EtherTooShort)?;
    Ok((dst, src, u16::from_be_bytes([h[0], h[1]]) & 0x0fff))
}

/// `bridge_input` over a burst received on member `mi` of `bc` (`ifp`): see the
/// module. Frames for the bridge's own interface are left in `v.local`.
pub(crate) fn bridge_input(
    cx: &mut LinkCx<'_>,
    ifp: &Ifnet,
    bc: &BridgeConf,
    mi: usize,
    pkts: &mut Vec<Mbuf>,
    v: &mut BridgeVecs,
) {
    cx.stats.bridge.ipackets += pkts.len() as u64;
    let br = &*bc.br;
    let me = bc.members[mi];
    let state = br.port_state(me.slot as usize);
    let now_s = now_secs(cx.now);
    let hooks = cx.pfil_active_on(PfilPoint::Ether, Dir::In, ifp.index);
    let out_hooks = cx.pfil_active(PfilPoint::Ether, Dir::Out);
    let rcvif = ifp.index.0;
    if br.rt.is_large() {
        // Every frame's two lookups started at once, before any is needed.
        let mut touched = 0u64;
        for m in pkts.iter() {
            if let Some(h) = m.first().first_chunk::<12>() {
                let d = EthernetAddress([h[0], h[1], h[2], h[3], h[4], h[5]]);
                let s = EthernetAddress([h[6], h[7], h[8], h[9], h[10], h[11]]);
                touched ^= br.rt.touch(0, d) ^ br.rt.touch(0, s);
            }
        }
        std::hint::black_box(touched);
    }
    for mut m in pkts.drain(..) {
        m.hdr.rcvif = rcvif;
        let (dst, src, vlan) = match header(cx, &mut m) {
            Ok(x) => x,
            Err(why) => {
                cx.drop_pkt(m, why);
                continue;
            }
        };
        if src.is_multicast() {
            cx.drop_pkt(m, DropReason::EtherBadAddr);
            continue;
        }
        if reserved(dst) {
            if dst == BRIDGE_GROUP_ADDRESS {
                stp_input(cx, bc, mi, m);
            } else {
                cx.drop_pkt(m, DropReason::BridgeReserved);
            }
            continue;
        }
        if !state.learns() {
            cx.drop_pkt(m, DropReason::BridgeBlocked);
            continue;
        }
        if me.flags.learning && br.rt.needs_learning(vlan, src, rcvif, now_s) {
            v.learn.push(Learn {
                vlan,
                mac: src,
                member: rcvif,
                sticky: me.flags.sticky,
            });
        }
        if !state.forwards() {
            cx.drop_pkt(m, DropReason::BridgeBlocked);
            continue;
        }
        let d = Dest { mac: dst, vlan };
        if hooks {
            v.checked.push((m, d));
        } else {
            bridge_forward(cx, bc, Some(mi), m, d, now_s, out_hooks, &mut v.local);
        }
    }
    if !v.learn.is_empty() {
        if !br.rt.try_learn(&v.learn, now_s) {
            cx.stats.bridge.learnbusy += v.learn.len() as u64;
        }
        v.learn.clear();
    }
    if !hooks {
        return;
    }
    let at = (ifp.index, Some(ifp.index));
    let mut checked = std::mem::take(&mut v.checked);
    cx.pfil_vec(
        PfilPoint::Ether,
        Dir::In,
        DropReason::PfilEtherIn,
        &mut checked,
        &mut v.pf,
        |_| at,
    );
    for (m, d) in checked.drain(..) {
        bridge_forward(cx, bc, Some(mi), m, d, now_s, out_hooks, &mut v.local);
    }
    v.checked = checked;
}

/// `bridge_forward`: a frame from member `from` (`None`: from the host, through
/// the bridge's interface) to where its destination is: the bridge itself
/// (`local`), the member the table says, or every other member.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bridge_forward(
    cx: &mut LinkCx<'_>,
    bc: &BridgeConf,
    from: Option<usize>,
    mut m: Mbuf,
    d: Dest,
    now_s: u32,
    out_hooks: bool,
    local: &mut Vec<Mbuf>,
) {
    let br = &*bc.br;
    if d.mac.is_multicast() {
        m.hdr.flags |= if d.mac.is_broadcast() {
            mbuf::M_BCAST
        } else {
            mbuf::M_MCAST
        };
        return bridge_broadcast(cx, bc, from, m, true, out_hooks, local);
    }
    if d.mac == br.mac {
        if from.is_none() {
            return cx.drop_pkt(m, DropReason::BridgeFiltered);
        }
        cx.stats.bridge.local += 1;
        return local.push(m);
    }
    let Some(e) = br.rt.lookup(d.vlan, d.mac, now_s) else {
        return bridge_broadcast(cx, bc, from, m, false, out_hooks, local);
    };
    let to = IfIndex(e.member);
    if from.is_some_and(|k| bc.members[k].ifindex == to) {
        // The destination is on the segment the frame came from.
        return cx.drop_pkt(m, DropReason::BridgeFiltered);
    }
    let forwards = match cx.bridges.role(to) {
        super::L2Role::Member { m: k, .. } => bc
            .members
            .get(k as usize)
            .is_some_and(|mb| mb.ifindex == to && br.port_state(mb.slot as usize).forwards()),
        _ => false,
    };
    if !forwards {
        return cx.drop_pkt(m, DropReason::BridgeBlocked);
    }
    cx.stats.bridge.forwarded += 1;
    enqueue(cx, to, m, from.is_some() && out_hooks);
}

/// A frame onto member `to`'s transmit vector, through the layer-2 output hooks
/// when `hooks`.
#[inline(always)]
fn enqueue(cx: &mut LinkCx<'_>, to: IfIndex, m: Mbuf, hooks: bool) {
    let m = if hooks {
        match cx.pfil(PfilPoint::Ether, Dir::Out, to, m, DropReason::PfilEtherOut) {
            Some(m) => m,
            None => return,
        }
    } else {
        m
    };
    cx.stats.ether.opackets += 1;
    match cx.tx.get_mut(to.get()) {
        Some(q) => q.push(m),
        None => DropReason::BridgeOutDropped.count(cx.stats),
    }
}

/// `bridge_broadcast`: a frame to every forwarding member that is up but the one
/// it came from (only to those that `discover` when it is unknown unicast, not `group`),
/// and to the bridge itself when it is a group frame from a member. The copies
/// share the frame's buffers, whose references are taken for all of them at once
/// ([`Mbuf::shares`]); the frame itself goes to the bridge or the last member.
#[allow(clippy::too_many_arguments)]
fn bridge_broadcast(
    cx: &mut LinkCx<'_>,
    bc: &BridgeConf,
    from: Option<usize>,
    m: Mbuf,
    group: bool,
    out_hooks: bool,
    local: &mut Vec<Mbuf>,
) {
    let br = &*bc.br;
    let hooks = from.is_some() && out_hooks;
    let mut to = [IfIndex(0); MAX_MEMBERS];
    let mut n = 0;
    for (k, mb) in bc.members.iter().enumerate() {
        if Some(k) == from
            || !(group || mb.flags.discover)
            || !br.port_state(mb.slot as usize).forwards()
            || cx.ifaces.get(mb.ifindex.get()).is_some_and(|i| !i.is_up())
        {
            continue;
        }
        // A bridge has at most MAX_MEMBERS members (`bridge_add_member`).
        if let Some(t) = to.get_mut(n) {
            *t = mb.ifindex;
            n += 1;
        }
    }
    cx.stats.bridge.flooded += 1;
    let up = group && from.is_some();
    let copies = if up { n } else { n.saturating_sub(1) };
    let mut shares = m.shares(copies);
    for &p in &to[..copies] {
        match shares.next() {
            Some(Ok(c)) => enqueue(cx, p, c, hooks),
            _ => DropReason::BridgeNoClone.count(cx.stats),
        }
    }
    drop(shares);
    if up {
        cx.stats.bridge.local += 1;
        local.push(m);
    } else if let Some(&p) = to[..n].last() {
        enqueue(cx, p, m, hooks);
    }
    // Else no other member: nowhere to go, as on a hub with one port (`m` dropped).
}

/// `bridge_output`: frames the host sent on the bridge's interface (link header
/// written, its output hooks run), to the members.
pub(crate) fn bridge_output(cx: &mut LinkCx<'_>, bc: &BridgeConf, frames: &mut Vec<Mbuf>) {
    let now_s = now_secs(cx.now);
    let mut none = Vec::new();
    cx.stats.bridge.hostout += frames.len() as u64;
    for mut m in frames.drain(..) {
        match header(cx, &mut m) {
            Ok((dst, _, vlan)) => {
                let d = Dest { mac: dst, vlan };
                bridge_forward(cx, bc, None, m, d, now_s, false, &mut none);
            }
            Err(why) => cx.drop_pkt(m, why),
        }
    }
}

/// A BPDU received on member `mi`, to the spanning tree; what the tree sends in
/// answer goes out at once. On a member with BPDU guard a BPDU disables the
/// member instead (whether or not the tree runs: a bridge where none may be is
/// the danger either way).
fn stp_input(cx: &mut LinkCx<'_>, bc: &BridgeConf, mi: usize, mut m: Mbuf) {
    cx.stats.bridge.bpdus += 1;
    let br = &*bc.br;
    let me = bc.members[mi];
    if !(me.flags.bpduguard || br.stp_enabled() && me.flags.stp) {
        return cx.drop_pkt(m, DropReason::BridgeBpduNoStp);
    }
    let repr = {
        let len = m
            .len()
            .min(ETHER_HDR_LEN + LLC_STP.len() + wire::stp::RST_LEN);
        let Ok(h) = crate::hdr::hdr(cx.access, &mut m, 0, len) else {
            return cx.drop_pkt(m, DropReason::BridgeBpduBad);
        };
        match parse_bpdu(h) {
            Some(r) => r,
            None => return cx.drop_pkt(m, DropReason::BridgeBpduBad),
        }
    };
    let slot = usize::from(me.slot);
    let now = cx.now.as_nanos();
    if me.flags.bpduguard {
        if br.guard_trip(&bc.members, slot, now) {
            tracing::warn!(
                target: "bridge",
                "bridge {}: BPDU guard: a BPDU ({repr:?}) on member {}: disabled until its flags are set again",
                br.ifindex.0,
                me.ifindex.0
            );
        }
        return cx.drop_pkt(m, DropReason::BridgeBpduGuard);
    }
    let mut send = Vec::new();
    let mut got = super::Received::Taken;
    br.with_stp(
        &bc.members,
        |stp, out| got = stp.input(slot, &repr, now, out),
        Some(&mut send),
    );
    if got == super::Received::RootGuard {
        cx.stats.bridge.rootguard += 1;
    }
    stp_send(cx, bc, &mut send);
}

/// The BPDU in a frame (link header, 802.3 length, LLC header, BPDU).
pub(crate) fn parse_bpdu(frame: &[u8]) -> Option<StpRepr> {
    let f = EthernetFrame::new_checked(frame).ok()?;
    let len = usize::from(u16::from(f.ethertype()));
    // An 802.3 length, not an Ethernet type: what follows is LLC.
    if len > 1500 {
        return None;
    }
    let llc = f.payload().get(..len)?;
    let bpdu = wire::stp::strip_llc(llc).ok()?;
    StpRepr::parse(&StpBpdu::new_checked(bpdu).ok()?).ok()
}

/// A BPDU frame from `src`: padded to the Ethernet minimum of 60 bytes.
pub(crate) fn bpdu_frame(src: EthernetAddress, bpdu: &StpRepr) -> Option<Mbuf> {
    let blen = bpdu.buffer_len();
    let mut buf = [0u8; 64];
    {
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        f.set_dst_addr(BRIDGE_GROUP_ADDRESS);
        f.set_src_addr(src);
        f.set_ethertype(EtherType::from((LLC_STP.len() + blen) as u16));
    }
    buf[ETHER_HDR_LEN..ETHER_HDR_LEN + 3].copy_from_slice(&LLC_STP);
    let at = ETHER_HDR_LEN + LLC_STP.len();
    bpdu.emit(&mut StpBpdu::new_unchecked(&mut buf[at..at + blen]));
    let mut m = Mbuf::new().ok()?;
    m.append(&buf[..(at + blen).max(60)]).ok()?;
    Some(m)
}

/// Sends the BPDUs the spanning tree asked for, each on its member.
pub(crate) fn stp_send(cx: &mut LinkCx<'_>, bc: &BridgeConf, send: &mut Vec<StpOut>) {
    for o in send.drain(..) {
        let Some(mb) = bc.members.iter().find(|mb| usize::from(mb.slot) == o.port) else {
            continue;
        };
        let Some(ifp) = cx.ifaces.get(mb.ifindex.get()) else {
            continue;
        };
        match bpdu_frame(ifp.mac, &o.bpdu) {
            Some(m) => {
                cx.stats.bridge.bpdusent += 1;
                cx.stats.ether.opackets += 1;
                cx.tx[mb.ifindex.get()].push(m);
            }
            None => DropReason::BridgeOutDropped.count(cx.stats),
        }
    }
}

/// The bridge's timers (worker 0): the spanning tree's when due, and the address
/// table's ageing once a second. Returns when the spanning tree next has work.
pub(crate) fn bridge_timer(cx: &mut LinkCx<'_>, bc: &BridgeConf) -> Option<Instant> {
    use std::sync::atomic::Ordering;
    let br = &*bc.br;
    let now_s = now_secs(cx.now);
    // Read first: a store on every poll would pull the line the other workers
    // read the bridge's fields from.
    if br.aged.load(Ordering::Relaxed) != now_s {
        br.aged.store(now_s, Ordering::Relaxed);
        br.rt.age(now_s, 4096);
    }
    if !br.stp_enabled() {
        return None;
    }
    let now = cx.now.as_nanos();
    if br.stp_next.load(Ordering::Relaxed) <= now {
        let mut send = Vec::new();
        let members = &bc.members;
        br.with_stp(
            members,
            |stp, out| {
                // The member list changed: ports of new members (in the tree, not
                // disabled by BPDU guard) come up, those of members gone go down;
                // members' edge and guard settings reach their ports.
                for slot in 0..MAX_MEMBERS {
                    let m = members.iter().find(|m| usize::from(m.slot) == slot);
                    if let Some(m) = m {
                        stp.set_port_options(slot, m.flags.port_options(), now, out);
                    }
                    let member = m.is_some_and(|m| m.flags.stp) && !br.guard_disabled(slot);
                    let up = stp.port_state(slot) != super::PortState::Disabled;
                    if member && !up {
                        stp.enable_port(slot, now, out);
                    } else if !member && up {
                        stp.disable_port(slot, now, out);
                    }
                }
                stp.tick(now, out);
            },
            Some(&mut send),
        );
        stp_send(cx, bc, &mut send);
    }
    match br.stp_next.load(Ordering::Relaxed) {
        u64::MAX => None,
        t => Some(Instant::from_nanos(t)),
    }
}
