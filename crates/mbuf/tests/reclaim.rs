//! `pool::reclaim` gives slabs back once every buffer in them is free, wherever the
//! free buffers were cached, and keeps the slabs of buffers still held. A file of
//! its own, since the pool is process-wide: here nothing else allocates.

use mbuf::{pool, Mbuf};
use std::sync::mpsc;

/// Packets of `len` bytes: small buffers, clusters or jumbo clusters.
fn packets(n: usize, len: usize) -> Vec<Mbuf> {
    (0..n)
        .map(|i| {
            let mut m = Mbuf::with_capacity(len).unwrap();
            m.append(&vec![i as u8; len]).unwrap();
            m
        })
        .collect()
}

#[test]
fn reclaim_frees_whole_slabs_from_every_threads_cache_and_keeps_held_ones() {
    // A crowd's worth: 4,000 clusters (8 MiB), 64 jumbo clusters (4 MiB).
    let mut crowd = packets(4000, 1500);
    crowd.extend(packets(64, 60_000));
    let peak = pool::stats();
    assert!(
        peak.clusters_total >= 4000 && peak.jumbo_total >= 64,
        "{peak:?}"
    );

    // Half the crowd ends on another thread, which keeps those buffers in its own
    // cache until it is idle and answers.
    let other_half = crowd.split_off(crowd.len() / 2);
    let (go, asked) = mpsc::channel::<()>();
    let (done, answered) = mpsc::channel::<usize>();
    let other = std::thread::spawn(move || {
        drop(other_half);
        asked.recv().unwrap();
        done.send(pool::reclaim_if_asked()).unwrap();
        // Asked once, answered once.
        assert_eq!(pool::reclaim_if_asked(), 0);
    });

    // One packet held: its slab stays, and its bytes with it.
    let keep = crowd.pop().unwrap();
    drop(crowd);
    let freed_here = pool::reclaim();
    let after_here = pool::stats();
    assert!(freed_here > 0, "nothing freed: {after_here:?}");
    assert!(after_here.slabs < peak.slabs, "{peak:?} -> {after_here:?}");
    go.send(()).unwrap();
    let freed_there = answered.recv().unwrap();
    other.join().unwrap();
    let end = pool::stats();
    assert!(
        freed_there > 0,
        "the other thread's cache freed nothing: {end:?}"
    );
    // What stays: the held packet's slabs (a cluster's and a small buffer's, its
    // record's), no more.
    assert!(
        end.slabs <= 3,
        "slabs held after every cache answered: {end:?}"
    );
    assert!(end.clusters_total <= 64 && end.jumbo_total == 0, "{end:?}");
    let mut first = [0u8; 4];
    keep.copydata(0, &mut first).unwrap();
    assert_eq!(first, [keep.first()[0]; 4]);
    assert_eq!(keep.len(), 1500);

    // The pool grows again as before.
    let again = packets(1000, 1500);
    assert!(pool::stats().clusters_total >= 1000);
    for (i, m) in again.iter().enumerate() {
        assert_eq!(m.first()[..4], [i as u8; 4]);
    }
}
