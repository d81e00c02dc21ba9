//! The pool is bounded: beyond `set_limit` allocation fails with `NoBufs`, is
//! counted, and never grows memory; freed buffers make allocation work again.
//! A file of its own, since the limit is process-wide.

use mbuf::{pool, Mbuf, PullError};

#[test]
fn allocation_beyond_the_limit_fails_and_is_counted() {
    pool::set_limit(100);
    let before = pool::stats();
    let mut held = Vec::new();
    let err = loop {
        match Mbuf::new() {
            Ok(m) => held.push(m),
            Err(e) => break e,
        }
        assert!(held.len() <= 100, "limit not enforced");
    };
    assert_eq!(err, mbuf::NoBufs);
    let s = pool::stats();
    assert_eq!(s.clusters_total, 100);
    assert_eq!(s.cluster_limit, 100);
    assert_eq!(s.alloc_fail, before.alloc_fail + 1);

    // Operations that need a buffer fail cleanly and leave the packet intact.
    let mut m = Mbuf::devget(&[7u8; 128]).unwrap(); // small buffers: own limit
    let full = held.pop().unwrap();
    let mut big = Mbuf::from_parts(&[&[1u8; 200], &[2u8; 200]]);
    assert!(big.is_err(), "clusters exhausted");
    held.push(full);
    assert_eq!(m.pullup2(120), Err(PullError::NoBufs));
    assert_eq!(m.to_vec(), vec![7u8; 128]);
    let mut a = Mbuf::devget(&[1u8; 10]).unwrap();
    assert!(a.append(&[0u8; 500]).is_err());
    assert_eq!(a.to_vec(), vec![1u8; 10], "append is all or nothing");
    assert!(a.copyback(5, &[9u8; 600]).is_err());
    assert_eq!(a.to_vec(), vec![1u8; 10], "copyback is all or nothing");
    assert_eq!(stat_fails(), 1);

    drop(held);
    big = Mbuf::from_parts(&[&[1u8; 200], &[2u8; 200]]);
    assert!(big.is_ok(), "freed clusters are reused");
    assert_eq!(
        pool::stats().clusters_total,
        100,
        "no growth past the limit"
    );

    // Small buffers are bounded at 16x the cluster limit.
    let mut smalls = Vec::new();
    while let Ok(m) = Mbuf::devget(&[0u8; 10]) {
        smalls.push(m);
        assert!(smalls.len() <= 1600);
    }
    assert_eq!(pool::stats().small_total, 1600);

    // Packet records are bounded too (17x): the copies of a flood past the limit
    // fail one by one, and their references go back.
    let room = m.headroom();
    assert!(room > 0, "an unshared first buffer has headroom");
    let (mut copies, mut failed) = (Vec::new(), 0);
    for c in m.shares(200) {
        match c {
            Ok(c) => copies.push(c),
            Err(_) => failed += 1,
        }
    }
    assert!(failed > 0 && !copies.is_empty(), "{failed} failed");
    assert_eq!(copies.len() + failed, 200);
    assert_eq!(m.headroom(), 0, "shared with the copies");
    assert!(copies.iter().all(|c| c.to_vec() == m.to_vec()));
    drop(copies);
    assert_eq!(m.headroom(), room, "every reference went back");
    m.prepend(4).unwrap();
    pool::set_limit(pool::DEFAULT_CLUSTER_LIMIT);
    assert!(Mbuf::devget(&[0u8; 10]).is_ok());
}

fn stat_fails() -> u64 {
    mbuf::stats::snapshot().pullup2.fails
}
