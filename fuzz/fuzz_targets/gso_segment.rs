//! Arbitrary bytes as an IP packet marked for segmentation (any segment size, any
//! MTU, its bytes split over two buffers at any point): `net::gso::tcp_segment`
//! refuses it or cuts it, never panics; what it cuts fits the MTU, carries the
//! original's headers' length and its data in order, and nothing more.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mbuf::Mbuf;

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (ctl, pkt) = data.split_at(6);
    let segsz = u16::from_le_bytes([ctl[0], ctl[1]]);
    let mtu = usize::from(u16::from_le_bytes([ctl[2], ctl[3]]));
    let cut = usize::from(u16::from_le_bytes([ctl[4], ctl[5]])) % (pkt.len() + 1);
    let Ok(mut m) = Mbuf::from_slice(&pkt[..cut]) else {
        return;
    };
    let Ok(tail) = Mbuf::from_slice(&pkt[cut..]) else {
        return;
    };
    m.cat(tail);
    m.hdr.tso_segsz = segsz;
    let mut out = Vec::new();
    if net::gso::tcp_segment(&m, mtu, &mut out).is_err() {
        assert!(out.is_empty());
        return;
    }
    assert!(!out.is_empty());
    // Cut: an IPv4 or IPv6 header, then TCP's, both whole in the packet.
    let l3 = if pkt[0] >> 4 == 4 {
        usize::from(pkt[0] & 0xf) * 4
    } else {
        40
    };
    let h = l3 + usize::from(pkt[l3 + 12] >> 4) * 4;
    let mut data = Vec::new();
    for s in &out {
        assert!(s.len() <= mtu, "{} > {mtu}", s.len());
        assert_eq!(s.hdr.tso_segsz, 0);
        let b = s.to_vec();
        assert!(b.len() >= h);
        data.extend_from_slice(&b[h..]);
    }
    assert_eq!(data, pkt[h..], "the data, in order, and nothing else");
});
