//! 802.1Q VLAN interfaces (FreeBSD's `if_vlan`): the tag taken off frames that
//! arrive on a parent for one of its VLANs (`vlan_input`, before the parent's own
//! input), and put on frames a VLAN interface sends (`vlan_output`, onto the
//! parent's transmit vector). A tagged frame for a VLAN id the parent has no
//! interface for stays the parent's: bridged as it is when the parent is a bridge's
//! member, else dropped by `ether_input` (counted in `ether.vlandrop`).

use super::VlanConf;
use crate::ifindex::IfIndex;
use crate::link::LinkCx;
use crate::stats::DropReason;
use mbuf::Mbuf;

/// Bytes of the link header before the tag: destination and source.
const MACS: usize = 12;
/// The tag: type 0x8100 and the tag control information.
const TAG: usize = 4;

/// The VLAN id of an 802.1Q-tagged frame (`None` for an untagged one).
#[inline]
fn vid_of(cx: &LinkCx<'_>, m: &mut Mbuf) -> Option<u16> {
    if m.len() < MACS + TAG + 2 {
        return None;
    }
    let h = crate::hdr::hdr(cx.access, m, MACS, TAG).ok()?;
    (h[..2] == [0x81, 0x00]).then(|| u16::from_be_bytes([h[2], h[3]]) & 0x0fff)
}

/// Moves the frames of `pkts` tagged for one of `trunk`'s VLANs to `tagged`, the
/// tag taken off, each with its VLAN interface; the others stay in `pkts`, in
/// order (`rest` is scratch).
pub(crate) fn vlan_input(
    cx: &mut LinkCx<'_>,
    trunk: &[(u16, IfIndex)],
    pkts: &mut Vec<Mbuf>,
    tagged: &mut Vec<(IfIndex, Mbuf)>,
    rest: &mut Vec<Mbuf>,
) {
    for mut m in pkts.drain(..) {
        let Some(vid) = vid_of(cx, &mut m) else {
            rest.push(m);
            continue;
        };
        let Some(&(_, ifv)) = trunk.iter().find(|t| t.0 == vid) else {
            rest.push(m);
            continue;
        };
        cx.stats.vlan.ipackets += 1;
        match untag(cx, m) {
            Some(m) => tagged.push((ifv, m)),
            None => DropReason::VlanNoBufs.count(cx.stats),
        }
    }
    std::mem::swap(pkts, rest);
}

/// The frame without its tag: the addresses moved up over it.
fn untag(cx: &LinkCx<'_>, mut m: Mbuf) -> Option<Mbuf> {
    let mut macs = [0u8; MACS];
    macs.copy_from_slice(crate::hdr::hdr(cx.access, &mut m, 0, MACS).ok()?);
    m.adj((MACS + TAG) as isize);
    m.prepend(MACS).ok()?.copy_from_slice(&macs);
    Some(m)
}

/// `vlan_start`: frames sent on VLAN interface `v` (link header written), tagged,
/// onto its parent's transmit vector.
pub(crate) fn vlan_output(cx: &mut LinkCx<'_>, v: &VlanConf, frames: &mut Vec<Mbuf>) {
    for mut m in frames.drain(..) {
        let macs = match crate::hdr::hdr(cx.access, &mut m, 0, MACS) {
            Ok(h) => {
                let mut a = [0u8; MACS];
                a.copy_from_slice(h);
                a
            }
            Err(_) => {
                cx.drop_pkt(m, DropReason::EtherTooShort);
                continue;
            }
        };
        m.adj(MACS as isize);
        let Ok(h) = m.prepend(MACS + TAG) else {
            cx.drop_pkt(m, DropReason::VlanNoBufs);
            continue;
        };
        h[..MACS].copy_from_slice(&macs);
        h[MACS..MACS + 2].copy_from_slice(&[0x81, 0x00]);
        h[MACS + 2..].copy_from_slice(&(v.vid & 0x0fff).to_be_bytes());
        cx.stats.vlan.opackets += 1;
        match cx.tx.get_mut(v.parent.get()) {
            Some(q) => q.push(m),
            None => DropReason::EtherOutDropped.count(cx.stats),
        }
    }
}
