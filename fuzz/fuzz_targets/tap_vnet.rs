//! Arbitrary bytes as a TAP read with the virtio-net header in front: `vnet_rx`
//! may refuse the header but never panic; a TCP checksum it leaves to the stack
//! (`CSUM_L4_NEEDED`) leaves the frame as it was, and a checksum it fills in sums
//! to zero over the range the header named. The same frame sent as one of our segments
//! (checksum left to the device, any segment size, any MTU): `vnet_tx` refuses or
//! describes it, never panics.
#![no_main]

use dev::tap::{vnet_gso_size, vnet_rx, vnet_tx, VNET_HDR};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < VNET_HDR + 4 {
        return;
    }
    let (ctl, rest) = data.split_at(4);
    let (hdr, frame) = rest.split_at(VNET_HDR);
    let hdr: &[u8; VNET_HDR] = hdr.try_into().unwrap();
    let mut f = frame.to_vec();
    let gso = vnet_gso_size(hdr);
    assert!(gso == 0 || matches!(hdr[1] & 0x7f, 1 | 4));
    if let Some(flags) = vnet_rx(hdr, &mut f) {
        assert!(flags & !(mbuf::CSUM_L4_VALID | mbuf::CSUM_L4_NEEDED) == 0);
        let start = usize::from(u16::from_ne_bytes([hdr[6], hdr[7]]));
        let at = start + usize::from(u16::from_ne_bytes([hdr[8], hdr[9]]));
        if flags & mbuf::CSUM_L4_NEEDED != 0 {
            // Left to the stack: only a TCP checksum, the frame untouched.
            assert!(hdr[0] & 1 != 0 && at - start == 16 && start + 20 <= f.len());
            assert_eq!(f, frame);
        } else if hdr[0] & 1 != 0 && (at - start) % 2 == 0 {
            // The field now holds the complement of the range's sum as it was, so the
            // range's new sum plus the field's old value is ones-complement zero.
            let old = u16::from_be_bytes([frame[at], frame[at + 1]]);
            let s = u32::from(wire::checksum::data(&f[start..])) + u32::from(old);
            let s = (s & 0xffff) + (s >> 16);
            assert!(s == 0xffff || s == 0, "sum {s:#x}");
        }
    }
    if let Ok(mut m) = mbuf::Mbuf::from_slice(frame) {
        m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
        m.hdr.tso_segsz = u16::from_le_bytes([ctl[0], ctl[1]]);
        let mtu = usize::from(u16::from_le_bytes([ctl[2], ctl[3]]));
        if let Some(h) = vnet_tx(&m, mtu) {
            let start = usize::from(u16::from_ne_bytes([h[6], h[7]]));
            assert!(start + 20 <= frame.len());
        }
    }
});
