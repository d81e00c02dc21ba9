//! Receive-side scaling: the Toeplitz hash NICs use to steer a flow to a queue.
//!
//! The key is the symmetric one (`0x6d5a` repeated, Woo and Park 2012), so both
//! directions of a flow hash alike and land on the same worker: what a stateful
//! firewall or a TCP connection needs. The input is the one Microsoft's RSS
//! specification defines: source and destination addresses, then the ports for TCP
//! and UDP (not for fragments).

/// The symmetric Toeplitz key, 40 bytes (enough for IPv6 addresses and ports).
pub const SYMMETRIC_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// The Toeplitz hash of `input` under `key` (`key.len() >= input.len() + 4`).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    debug_assert!(key.len() >= input.len() + 4);
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut result = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        let next = key.get(i + 4).copied().unwrap_or(0);
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    result
}

/// The RSS hash of an Ethernet frame, or 0 for frames that are not IP (ARP and the
/// like go to queue 0, as on a NIC).
pub fn frame_hash(frame: &[u8]) -> u32 {
    let mut off = 12;
    let mut ethertype = match frame.get(12..14) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => return 0,
    };
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        off += 4;
        ethertype = match frame.get(off..off + 2) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => return 0,
        };
    }
    let l3 = off + 2;
    let mut input = [0u8; 36];
    let n = match ethertype {
        0x0800 => {
            let Some(h) = frame.get(l3..l3 + 20) else {
                return 0;
            };
            let ihl = usize::from(h[0] & 0x0f) * 4;
            input[..8].copy_from_slice(&h[12..20]);
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
            match (h[9], frag, frame.get(l3 + ihl..l3 + ihl + 4)) {
                (6 | 17, false, Some(p)) if ihl >= 20 => {
                    input[8..12].copy_from_slice(p);
                    12
                }
                _ => 8,
            }
        }
        0x86dd => {
            let Some(h) = frame.get(l3..l3 + 40) else {
                return 0;
            };
            input[..32].copy_from_slice(&h[8..40]);
            match (h[6], frame.get(l3 + 40..l3 + 44)) {
                (6 | 17, Some(p)) => {
                    input[32..36].copy_from_slice(p);
                    36
                }
                _ => 32,
            }
        }
        _ => return 0,
    };
    toeplitz(&SYMMETRIC_KEY, &input[..n])
}

/// The queue of `n` queues a hash steers to.
pub fn queue_of(hash: u32, n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (hash as usize) % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verification suite of Microsoft's RSS specification (IPv4 with TCP
    /// ports) under its default key.
    #[test]
    fn microsoft_verification_vectors() {
        const MS_KEY: [u8; 40] = [
            0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
            0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
            0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
        ];
        // (src, dst, sport, dport, ipv4-only hash, with-ports hash)
        type Case = ([u8; 4], [u8; 4], u16, u16, u32, u32);
        let cases: [Case; 2] = [
            (
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                2794,
                1766,
                0x323e8fc2,
                0x51ccc178,
            ),
            (
                [199, 92, 111, 2],
                [65, 69, 140, 83],
                14230,
                4739,
                0xd718262a,
                0xc626b0ea,
            ),
        ];
        for (s, d, sp, dp, h2, h4) in cases {
            let mut input = Vec::new();
            input.extend_from_slice(&s);
            input.extend_from_slice(&d);
            assert_eq!(toeplitz(&MS_KEY, &input), h2);
            input.extend_from_slice(&sp.to_be_bytes());
            input.extend_from_slice(&dp.to_be_bytes());
            assert_eq!(toeplitz(&MS_KEY, &input), h4);
        }
    }

    fn udp4(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f
    }

    #[test]
    fn symmetric_key_hashes_both_directions_alike() {
        let a = frame_hash(&udp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 7));
        let b = frame_hash(&udp4([198, 18, 0, 2], [198, 18, 0, 1], 7, 1000));
        assert_eq!(a, b);
        assert_ne!(a, 0);
        let c = frame_hash(&udp4([198, 18, 0, 1], [198, 18, 0, 2], 1001, 7));
        assert_ne!(a, c, "a different flow hashes differently (here)");
    }

    #[test]
    fn short_and_non_ip_frames_hash_to_zero() {
        assert_eq!(frame_hash(&[]), 0);
        assert_eq!(frame_hash(&[0u8; 13]), 0);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(frame_hash(&arp), 0);
        let mut trunc = udp4([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
        trunc.truncate(20);
        assert_eq!(frame_hash(&trunc), 0);
    }
}
