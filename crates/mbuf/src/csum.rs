//! The Internet checksum's inner loop over a packet's data, in the widest vectors
//! the CPU offers: what `in_cksum` is machine-dependent code for in FreeBSD
//! (`sys/amd64/amd64/in_cksum.c`) and `csum_partial` in Linux. The checksum itself
//! (headers, folding, pseudo-headers) is `wire::checksum`'s; this is only the
//! bulk of a long buffer, which a TCP transfer without checksum offload sums twice
//! (the sender's segments and the receiver's check): a fifth of the time of
//! `bench tcp`'s mpstack-polled row went to `wire`'s scalar loop.
//!
//! It lives here because it needs `unsafe` (calling code compiled for a feature
//! the build does not assume, after checking the CPU has it), which the stack's
//! crates forbid.

/// Bytes summed a step.
const BLOCK: usize = 64;

/// The sum of the longest prefix of `bytes` made of 64-byte blocks, as a 64-bit
/// one's complement sum of native-endian words (the form of
/// `wire::checksum::partial`, to which it adds with end-around carry), and the
/// bytes after it. On a CPU without AVX2 (or under Miri), or for fewer than four
/// blocks, nothing is summed: `(0, bytes)`.
#[inline]
pub fn sum_blocks(bytes: &[u8]) -> (u64, &[u8]) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if bytes.len() >= 4 * BLOCK && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just now), the one target feature the
        // function is compiled for.
        return unsafe { sum_blocks_avx2(bytes) };
    }
    (0, bytes)
}

/// [`sum_blocks`] with AVX2: each 32-bit word widened into a 64-bit lane and
/// added, four accumulators of four lanes, no carries to chase (a lane overflows
/// after 2^32 words, 16 GiB). A 32-bit native word is `lo + hi * 2^16`, which is
/// `lo + hi` modulo 2^16 - 1: the same one's complement sum as 16-bit words.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2")]
unsafe fn sum_blocks_avx2(bytes: &[u8]) -> (u64, &[u8]) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi64, _mm256_loadu_si256, _mm256_setzero_si256, _mm256_storeu_si256,
        _mm256_unpackhi_epi32, _mm256_unpacklo_epi32,
    };
    let z = _mm256_setzero_si256();
    let mut acc = [z; 4];
    let mut blocks = bytes.chunks_exact(BLOCK);
    for b in &mut blocks {
        let p = b.as_ptr().cast::<__m256i>();
        // SAFETY: `b` holds 64 bytes, so both 32-byte reads are inside it; they
        // need no alignment (`loadu`).
        let (v0, v1) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
        acc[0] = _mm256_add_epi64(acc[0], _mm256_unpacklo_epi32(v0, z));
        acc[1] = _mm256_add_epi64(acc[1], _mm256_unpackhi_epi32(v0, z));
        acc[2] = _mm256_add_epi64(acc[2], _mm256_unpacklo_epi32(v1, z));
        acc[3] = _mm256_add_epi64(acc[3], _mm256_unpackhi_epi32(v1, z));
    }
    let all = _mm256_add_epi64(
        _mm256_add_epi64(acc[0], acc[1]),
        _mm256_add_epi64(acc[2], acc[3]),
    );
    let mut lanes = [0u64; 4];
    // SAFETY: `lanes` is 32 bytes; the write needs no alignment (`storeu`).
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast::<__m256i>(), all) };
    let mut sum = 0u64;
    for l in lanes {
        let (s, c) = sum.overflowing_add(l);
        sum = s + u64::from(c);
    }
    (sum, blocks.remainder())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 the slow way: 16-bit big-endian words, folded at the end.
    fn naive(bytes: &[u8]) -> u16 {
        let mut s: u64 = 0;
        for c in bytes.chunks(2) {
            s += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        fold(s)
    }

    fn fold(mut s: u64) -> u16 {
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    /// A native-endian 64-bit sum folded and put in network order, as
    /// `wire::checksum::finish` does.
    fn finish(s: u64) -> u16 {
        u16::from_be(fold(s))
    }

    #[test]
    fn blocks_and_the_rest_sum_to_the_whole() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 151 + i / 7) as u8).collect();
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        let vector = std::is_x86_feature_detected!("avx2");
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let vector = false;
        for len in [0, 1, 63, 255, 256, 257, 1448, 1449, 4096, 5000] {
            for skip in [0, 1, 3] {
                let b = &bytes[skip.min(len)..len];
                let (s, rest) = sum_blocks(b);
                let done = b.len() - rest.len();
                assert_eq!(rest, &b[done..]);
                if vector && b.len() >= 4 * BLOCK {
                    assert_eq!(done, b.len() / BLOCK * BLOCK, "the blocks summed");
                } else {
                    assert_eq!((s, done), (0, 0));
                }
                // The rest added the slow way, in the same form.
                let mut total = s;
                for c in rest.chunks(2) {
                    let w = u64::from(u16::from_ne_bytes([c[0], *c.get(1).unwrap_or(&0)]));
                    let (x, carry) = total.overflowing_add(w);
                    total = x + u64::from(carry);
                }
                // 0 and 0xffff are the same one's complement number.
                assert_eq!(finish(total) % 0xffff, naive(b) % 0xffff, "{len} {skip}");
            }
        }
    }
}
