//! Arbitrary bytes as a TPACKET_V3 block from the kernel's receive ring, walked as
//! an AF_PACKET queue walks it (`dev::packet::block_header`, `block_frame`): every
//! frame header, virtio-net header and VLAN field the bytes claim. No panic, no
//! read outside the block, every frame taken or counted.
#![no_main]

use dev::packet::{block_frame, block_header};
use dev::QueueStats;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut block = data.to_vec();
    let (n, mut off) = block_header(&block);
    let mut st = QueueStats::default();
    // The kernel's count is trusted no further than the walk: at most one frame a
    // header's worth of bytes.
    for _ in 0..n.min(4096) {
        let (next, m) = block_frame(&mut block, off, 0, &mut st);
        if let Some(m) = m {
            assert!(m.len() >= 14);
        }
        if next == 0 {
            break;
        }
        off = off.saturating_add(next);
    }
    assert!(st.ipackets + st.ierrors + st.idrops <= u64::from(n.min(4096)));
});
