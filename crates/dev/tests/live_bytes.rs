//! The counting allocator's live-bytes counter follows allocations, frees and reallocs.

#[global_allocator]
static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

#[test]
fn live_bytes_follow_alloc_realloc_and_free() {
    let before = dev::alloc_count::live_bytes();
    let mut v: Vec<u8> = Vec::with_capacity(1 << 20);
    let grown = dev::alloc_count::live_bytes();
    // Other test threads may allocate meanwhile; a megabyte stands out of that noise.
    assert!(grown >= before + (1 << 20) - 4096, "{before} -> {grown}");
    v.reserve_exact(3 << 20);
    let more = dev::alloc_count::live_bytes();
    assert!(more >= before + (3 << 20) - 4096, "{before} -> {more}");
    drop(v);
    let after = dev::alloc_count::live_bytes();
    assert!(after < before + 65536, "{before} -> {after}");
}
