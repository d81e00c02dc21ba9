//! Arbitrary bytes as a receive burst of frames for software LRO (each frame's
//! length and whether the device checked its TCP checksum from the input; or, for
//! half the inputs, frames of one connection made from a template, with lengths,
//! sequence jumps and flags from the input, so that runs merge):
//! `net::lro::Lro` never panics, and what it hands on is the burst in order, each
//! frame as it came (less any Ethernet padding) or several consecutive ones merged,
//! whose headers are the first's and whose data are theirs, in order, and nothing
//! more.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mbuf::Mbuf;

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

/// Where TCP's data start in a frame that parses as Ethernet, IP and TCP, and where
/// the IP packet ends.
fn bounds(b: &[u8]) -> Option<(usize, usize)> {
    let be16 = |at: usize| Some(usize::from(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?])));
    let (l4, end) = match be16(12)? {
        0x0800 => (14 + usize::from(b.get(14)? & 0xf) * 4, 14 + be16(16)?),
        _ => (54, 54 + be16(18)?),
    };
    Some((l4 + usize::from(b.get(l4 + 12)? >> 4) * 4, end))
}

/// Frames made from a template: the first byte picks IPv4 or IPv6, then each 4
/// bytes give a frame: data length, a sequence number jump (mostly none), and a
/// byte XORed into the TCP flags (mostly none). Lengths and the IPv4 header
/// checksum are right, the TCP checksum marked checked: runs that merge.
fn templated(data: &[u8]) -> Vec<Mbuf> {
    let v6 = data.first().is_some_and(|b| b & 2 != 0);
    let mut hdr = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if v6 {
        hdr.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, 6, 64]);
        hdr.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        hdr.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        hdr.extend_from_slice(&[0x08, 0, 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        hdr.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
    }
    let l4 = hdr.len();
    hdr.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89, 0, 0, 0, 0, 0, 0, 0, 77, 0x80, 0x10]);
    hdr.extend_from_slice(&[0x03, 0xe8, 0, 0, 0, 0, 1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 5]);
    let mut seq = 1000u32;
    let mut frames = Vec::new();
    for c in data.get(1..).unwrap_or_default().chunks_exact(4).take(64) {
        let n = 1 + usize::from(u16::from_le_bytes([c[0], c[1]])) % 9000;
        if c[2] >= 0xf0 {
            seq = seq.wrapping_add(u32::from(c[2]) << 4);
        }
        let mut f = hdr.clone();
        f[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        if c[3] >= 0xf0 {
            f[l4 + 13] ^= c[3];
        }
        if v6 {
            f[18..20].copy_from_slice(&((32 + n) as u16).to_be_bytes());
        } else {
            f[16..18].copy_from_slice(&((52 + n) as u16).to_be_bytes());
            let sum = !wire::checksum::data(&f[14..34]);
            f[24..26].copy_from_slice(&sum.to_be_bytes());
        }
        f.extend((0..n).map(|i| (i as u32 + seq) as u8));
        seq = seq.wrapping_add(n as u32);
        let Ok(mut m) = Mbuf::devget(&f) else { break };
        m.hdr.csum_flags = mbuf::CSUM_L4_VALID;
        frames.push(m);
    }
    frames
}

fuzz_target!(|data: &[u8]| {
    let mut frames = Vec::new();
    if data.first().is_some_and(|b| b & 1 != 0) {
        frames = templated(data);
    }
    let mut rest = if frames.is_empty() { data } else { &[][..] };
    while rest.len() >= 3 && frames.len() < 64 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]])) % 9100;
        let checked = rest[2] & 1 != 0;
        rest = &rest[3..];
        let (f, r) = rest.split_at(n.min(rest.len()));
        rest = r;
        let Ok(mut m) = Mbuf::devget(f) else { return };
        if checked {
            m.hdr.csum_flags = mbuf::CSUM_L4_VALID;
        }
        frames.push(m);
    }
    let inputs: Vec<Vec<u8>> = frames.iter().map(|m| m.to_vec()).collect();
    let mut lro = net::lro::Lro::default();
    let mut out = Vec::new();
    let mut up = |m: Mbuf| out.push(m);
    for m in frames {
        lro.input(MAC, |_| true, m, &mut up);
    }
    lro.flush(&mut up);
    assert!(out.len() <= inputs.len());
    let mut next = inputs.iter();
    for m in &out {
        let b = m.to_vec();
        if m.hdr.tso_segsz == 0 {
            let i = next.next().expect("more out than in");
            assert!(i.starts_with(&b), "a frame passed on changed");
            continue;
        }
        assert!(m.nsegs() <= net::lro::MAX_BUFS);
        let (h, end) = bounds(&b).expect("a merged packet parses");
        assert_eq!(end, b.len(), "its IP length is its length");
        let mut got = Vec::new();
        let mut frames = 0;
        while got.len() < b.len() - h {
            let i = next.next().expect("merged from frames that came");
            let (ih, iend) = bounds(i).expect("a merged frame parses");
            assert_eq!(ih, h);
            got.extend_from_slice(&i[ih..iend]);
            frames += 1;
        }
        assert!(frames >= 2);
        assert_eq!(got, b[h..], "the frames' data, in order, and nothing else");
    }
    assert!(next.next().is_none(), "every frame handed on");
    assert_eq!(lro.stats.queued as usize, inputs.len() - out.len());
});
