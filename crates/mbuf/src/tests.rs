//! Unit tests of the chain operations (the pull strategies are tested in
//! `pull.rs`). Small enough to run under Miri.

use crate::{Mbuf, PktHdr, PullError, DEFAULT_HEADROOM, MCLBYTES, MHLEN, MH_OFF, MLEN};

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 + 1) as u8).collect()
}
fn lens(m: &Mbuf) -> Vec<usize> {
    m.segments().map(<[u8]>::len).collect()
}

#[test]
fn new_is_an_empty_cluster_with_headroom() {
    let m = Mbuf::new().unwrap();
    assert!(m.is_empty());
    assert_eq!((m.len(), m.nsegs(), m.headroom()), (0, 1, DEFAULT_HEADROOM));
    assert_eq!(m.first(), &[] as &[u8]);
    m.check();
}

#[test]
fn from_slice_spans_clusters_after_headroom() {
    let data = bytes(3000);
    let m = Mbuf::from_slice(&data).unwrap();
    assert_eq!(
        lens(&m),
        [
            MCLBYTES - DEFAULT_HEADROOM,
            3000 - (MCLBYTES - DEFAULT_HEADROOM)
        ]
    );
    assert_eq!(m.headroom(), DEFAULT_HEADROOM);
    assert_eq!(m.to_vec(), data);
    m.check();
    let e = Mbuf::from_slice(&[]).unwrap();
    assert_eq!((e.len(), e.nsegs()), (0, 1));
}

#[test]
fn buf_bytes_counts_whole_buffers_not_data() {
    let m = Mbuf::from_slice(&bytes(8)).unwrap();
    assert_eq!(m.buf_bytes(), MCLBYTES);
    let m = Mbuf::from_slice(&bytes(3000)).unwrap();
    assert_eq!(m.buf_bytes(), 2 * MCLBYTES);
    let m = Mbuf::devget(&bytes(MHLEN + 1)).unwrap();
    assert_eq!(m.buf_bytes(), 2 * MLEN);
}

#[test]
fn devget_follows_the_m_devget_policy() {
    for (n, want) in [
        (0, vec![0]),
        (60, vec![60]),
        (MHLEN, vec![MHLEN]),
        (MHLEN + 1, vec![MHLEN, 1]),
        (MHLEN + MLEN, vec![MHLEN, MLEN]),
        (MHLEN + MLEN + 1, vec![MHLEN + MLEN + 1]),
        (5000, vec![MCLBYTES, MCLBYTES, 5000 - 2 * MCLBYTES]),
    ] {
        let data = bytes(n);
        let m = Mbuf::devget(&data).unwrap();
        assert_eq!(lens(&m), want, "len {n}");
        assert_eq!(m.to_vec(), data);
        m.check();
    }
    let m = Mbuf::devget(&bytes(50)).unwrap();
    assert_eq!(m.segs.as_slice()[0].off(), MH_OFF);
    assert_eq!(Mbuf::devget(&bytes(300)).unwrap().headroom(), 0);
}

#[test]
fn from_parts_makes_one_segment_per_part() {
    let m = Mbuf::from_parts(&[b"abc", b"", &bytes(200), &bytes(MCLBYTES + 1)]).unwrap();
    assert_eq!(lens(&m), [3, 200, MCLBYTES, 1]);
    assert_eq!(m.segs.as_slice()[0].buf.cap(), MLEN);
    assert_eq!(m.segs.as_slice()[1].buf.cap(), MCLBYTES);
    m.check();
}

#[test]
fn prepend_uses_headroom_then_a_new_leading_buffer() {
    let mut m = Mbuf::from_slice(b"payload").unwrap();
    m.prepend(8).unwrap().copy_from_slice(b"udp hdr!");
    assert_eq!((m.nsegs(), m.headroom()), (1, DEFAULT_HEADROOM - 8));
    m.prepend(DEFAULT_HEADROOM - 8).unwrap().fill(b'i');
    assert_eq!((m.nsegs(), m.headroom()), (1, 0));
    m.prepend(14).unwrap().fill(b'e');
    assert_eq!(m.nsegs(), 2);
    assert_eq!(m.first(), &[b'e'; 14]);
    assert_eq!(
        m.headroom(),
        MLEN - 14,
        "new small buffer, bytes at its end"
    );
    let v = m.to_vec();
    assert_eq!(v.len(), 14 + DEFAULT_HEADROOM + 7);
    assert!(v.ends_with(b"udp hdr!payload"));
    m.prepend(500).unwrap().fill(1);
    assert_eq!(m.segs.as_slice()[0].buf.cap(), MCLBYTES);
    assert_eq!(m.len(), v.len() + 500);
    assert_eq!(m.prepend(0).unwrap().len(), 0);
    assert!(m.prepend(MCLBYTES + 1).is_err());
    m.check();
}

#[test]
fn prepend_does_not_write_into_a_shared_buffer() {
    let mut m = Mbuf::from_slice(b"data").unwrap();
    let c = m.try_clone().unwrap();
    assert_eq!(m.headroom(), 0, "shared: no usable headroom");
    m.prepend(4).unwrap().copy_from_slice(b"hdr:");
    assert_eq!(m.to_vec(), b"hdr:data");
    assert_eq!(c.to_vec(), b"data");
    drop(c);
    assert_eq!(m.nsegs(), 2);
    m.check();
}

#[test]
fn prepend_to_an_emptied_packet_reuses_its_first_buffer() {
    let mut m = Mbuf::from_slice(&bytes(100)).unwrap();
    m.truncate(0);
    assert_eq!((m.nsegs(), m.headroom()), (1, DEFAULT_HEADROOM));
    m.prepend(20).unwrap().fill(3);
    assert_eq!((m.nsegs(), m.to_vec()), (1, vec![3; 20]));
    // A shared empty first segment is replaced, not kept behind the new one.
    let mut e = Mbuf::new().unwrap();
    let _c = e.try_clone().unwrap();
    e.prepend(4).unwrap().fill(9);
    assert_eq!((e.nsegs(), e.to_vec()), (1, vec![9; 4]));
    e.check();
}

#[test]
fn adj_trims_head_and_tail_and_clamps() {
    let data = bytes(300);
    let mut m = Mbuf::from_parts(&[&data[..100], &data[100..200], &data[200..]]).unwrap();
    m.adj(100);
    assert_eq!(
        lens(&m),
        [100, 100],
        "a segment emptied from the head goes away"
    );
    m.adj(-150);
    assert_eq!(m.to_vec(), &data[100..150]);
    assert_eq!(lens(&m), [50]);
    m.adj(0);
    assert_eq!(m.len(), 50);
    m.adj(isize::MAX);
    assert_eq!((m.len(), m.nsegs()), (0, 1));
    m.adj(5);
    m.adj(-5);
    assert!(m.is_empty());
    m.check();
    let mut n = Mbuf::from_slice(&data).unwrap();
    n.adj(isize::MIN);
    assert!(n.is_empty());
    n.check();
}

#[test]
fn truncate_keeps_the_first_segment() {
    let data = bytes(300);
    let mut m = Mbuf::from_parts(&[&data[..100], &data[100..200], &data[200..]]).unwrap();
    m.truncate(400);
    assert_eq!(m.len(), 300);
    m.truncate(200);
    assert_eq!(lens(&m), [100, 100]);
    m.truncate(100);
    assert_eq!(lens(&m), [100]);
    m.truncate(0);
    assert_eq!(lens(&m), [0]);
    m.check();
}

#[test]
fn split_shares_the_cut_segment_and_copies_nothing() {
    let data = bytes(300);
    let mut m = Mbuf::from_parts(&[&data[..100], &data[100..]]).unwrap();
    m.hdr.rcvif = 7;
    let mut rest = m.split(150).unwrap();
    assert_eq!(
        (m.to_vec(), rest.to_vec()),
        (data[..150].to_vec(), data[150..].to_vec())
    );
    assert_eq!(rest.hdr.rcvif, 7);
    assert!(!m.segs.as_slice()[1].buf.is_unique());
    assert!(
        m.segs.as_slice()[0].buf.is_unique(),
        "uncut segment stays unshared"
    );
    // Writes copy first: neither packet sees the other's.
    rest.head_mut::<1>().unwrap()[0] = 0xaa;
    m.copyback(149, &[0xbb]).unwrap();
    assert_eq!(rest.to_vec()[0], 0xaa);
    assert_eq!(m.to_vec()[149], 0xbb);
    assert_eq!(rest.to_vec()[1..], data[151..]);
    m.check();
    rest.check();
}

#[test]
fn copym_shares_every_segment_of_its_range() {
    let data = bytes(5000);
    let mut m = Mbuf::from_parts(&[&data[..100], &data[100..300], &data[300..]]).unwrap();
    m.hdr.rcvif = 3;
    for (off, len) in [
        (0, 5000),
        (50, 100),
        (100, 200),
        (99, 2),
        (4000, 9000),
        (5000, 1),
        (0, 0),
    ] {
        let c = m.copym(off, len).unwrap();
        let end = (off + len).min(data.len());
        assert_eq!(c.to_vec(), data[off.min(end)..end], "{off}+{len}");
        assert_eq!(c.hdr.rcvif, 3);
        c.check();
    }
    let c = m.copym(150, 100).unwrap();
    assert_eq!(lens(&c), [100]);
    assert!(!m.segs.as_slice()[1].buf.is_unique(), "shared, not copied");
    // A write through either copies first.
    m.copyback(150, &[0xee]).unwrap();
    assert_eq!(c.to_vec(), data[150..250]);
    drop(c);
    m.check();
}

#[test]
fn split_at_edges() {
    let data = bytes(200);
    let mut m = Mbuf::from_parts(&[&data[..100], &data[100..]]).unwrap();
    let r = m.split(100).unwrap();
    assert_eq!((lens(&m), lens(&r)), (vec![100], vec![100]));
    assert!(
        m.segs.as_slice()[0].buf.is_unique(),
        "cut at a boundary: nothing shared"
    );
    let r2 = m.split(100).unwrap();
    assert!(r2.is_empty());
    let r3 = m.split(1000).unwrap();
    assert!(r3.is_empty() && m.len() == 100);
    let r4 = m.split(0).unwrap();
    assert_eq!((m.len(), r4.len()), (0, 100));
    m.check();
    r4.check();
}

#[test]
fn cat_moves_segments_and_drops_an_empty_leading_one() {
    let mut a = Mbuf::from_slice(b"head").unwrap();
    let mut b = Mbuf::new().unwrap();
    b.append(b"tail").unwrap();
    a.cat(b);
    assert_eq!(a.to_vec(), b"headtail");
    a.cat(Mbuf::new().unwrap());
    let mut e = Mbuf::new().unwrap();
    e.truncate(0);
    a.cat(Mbuf::from_parts(&[b"", b"!"]).unwrap());
    assert_eq!(a.to_vec(), b"headtail!");
    a.check();
    // An empty packet's first segment stays (it carries the headroom).
    let mut n = Mbuf::new().unwrap();
    n.cat(Mbuf::from_slice(b"xyz").unwrap());
    assert_eq!(lens(&n), [0, 3]);
    assert_eq!(n.first(), &[] as &[u8]);
    n.pullup(3).unwrap();
    assert_eq!(n.first(), b"xyz");
    n.check();
}

#[test]
fn cat_joins_consecutive_windows_of_one_buffer() {
    // Frames cut from one segment, each a header and a window of the data: put
    // back together, the windows are one segment again.
    let data = bytes(1500);
    let whole = Mbuf::from_slice(&data).unwrap();
    let mut m = Mbuf::from_slice(b"hdr").unwrap();
    for (off, len) in [(0, 500), (500, 400), (900, 600)] {
        assert_eq!(m.joins(&whole, off), off > 0, "{off}");
        let mut f = Mbuf::from_slice(b"frame header").unwrap();
        f.cat(whole.copym(off, len).unwrap());
        assert!(!m.joins(&f, 0), "a buffer of its own");
        f.adj(12);
        m.cat(f);
    }
    assert_eq!(lens(&m), [3, 1500]);
    assert_eq!(&m.to_vec()[3..], &data[..]);
    m.check();
    // Not joined: a gap, or the windows out of order.
    let mut g = whole.copym(0, 100).unwrap();
    g.cat(whole.copym(101, 100).unwrap());
    g.cat(whole.copym(0, 10).unwrap());
    assert_eq!(lens(&g), [100, 100, 10]);
    // The joined segment holds one reference; dropping every other holder makes
    // it the only one again, and writable.
    drop(whole);
    let mut n = Mbuf::empty(PktHdr::default()).unwrap();
    n.append_shared(&m, 3, 1497).unwrap();
    assert_eq!(lens(&n), [1497]);
    drop(m);
    n.copyback(0, &[7]).unwrap();
    assert_eq!(n.to_vec()[..2], [7, data[1]]);
    n.check();
    g.check();
}

#[test]
fn buf_bytes_except_leaves_out_a_buffer_held_elsewhere() {
    let a = Mbuf::from_slice(&bytes(100)).unwrap();
    let b = Mbuf::from_slice(&bytes(100)).unwrap();
    let mut m = a.copym(0, 50).unwrap();
    m.cat(b.copym(0, 50).unwrap());
    assert_eq!(m.buf_bytes(), 2 * MCLBYTES);
    assert_eq!(m.buf_bytes_except(a.last_buf()), MCLBYTES);
    assert_eq!(m.buf_bytes_except(None), 2 * MCLBYTES);
    assert_eq!(m.last_buf(), b.last_buf());
    assert_ne!(a.last_buf(), b.last_buf());
    assert_eq!(Mbuf::empty(PktHdr::default()).unwrap().last_buf(), None);
}

#[test]
fn append_shared_shares_a_range_and_joins_its_first_segment() {
    let data = bytes(5000);
    let src = Mbuf::from_parts(&[&data[..100], &data[100..300], &data[300..]]).unwrap();
    let mut m = Mbuf::from_slice(b"h").unwrap();
    m.append_shared(&src, 50, 100).unwrap();
    assert_eq!(lens(&m), [1, 50, 50]);
    // Continuing where the last one ended: joined to it.
    m.append_shared(&src, 150, 3000).unwrap();
    assert_eq!(lens(&m), [1, 50, 200, MCLBYTES, 2850 - MCLBYTES]);
    assert_eq!(m.len(), 1 + 3100);
    assert_eq!(&m.to_vec()[1..], &data[50..3150]);
    // Clamped to the source.
    m.append_shared(&src, 4990, 100).unwrap();
    m.append_shared(&src, 9000, 100).unwrap();
    assert_eq!(m.len(), 1 + 3110);
    m.check();
}

#[test]
fn headers_of_their_own_take_a_small_buffer_when_they_fit() {
    let mut m = Mbuf::with_headers(&bytes(52)).unwrap();
    assert_eq!(
        (m.len(), m.buf_bytes(), m.headroom()),
        (52, MLEN, MLEN - 52)
    );
    assert_eq!(m.to_vec(), bytes(52));
    m.prepend(14).unwrap();
    assert_eq!((m.nsegs(), m.len()), (1, 66), "a link header fits in front");
    m.check();
    // Too long to leave a link header's room: a cluster, as with_capacity.
    let m = Mbuf::with_headers(&bytes(MLEN - crate::LINK_HEADROOM + 1)).unwrap();
    assert_eq!((m.buf_bytes(), m.headroom()), (MCLBYTES, DEFAULT_HEADROOM));
    assert_eq!(m.to_vec(), bytes(MLEN - crate::LINK_HEADROOM + 1));
    m.check();
}

#[test]
fn append_fills_tailroom_then_clusters() {
    let mut m = Mbuf::devget(&bytes(10)).unwrap();
    m.append(&bytes(86)).unwrap();
    assert_eq!(lens(&m), [96], "header buffer filled to MHLEN");
    m.append(&bytes(5000)).unwrap();
    assert_eq!(lens(&m), [96, MCLBYTES, MCLBYTES, 5000 - 2 * MCLBYTES]);
    m.append(&[]).unwrap();
    m.check();
    let mut want = bytes(10);
    want.extend(bytes(86));
    want.extend(bytes(5000));
    assert_eq!(m.to_vec(), want);
}

#[test]
fn append_never_writes_into_a_shared_tail() {
    let data = bytes(100);
    let mut m = Mbuf::from_slice(&data).unwrap();
    let rest = m.split(50).unwrap();
    m.append(b"new bytes").unwrap();
    assert_eq!(
        rest.to_vec(),
        &data[50..],
        "tailroom of a shared buffer is not ours"
    );
    assert_eq!(m.len(), 59);
    m.check();
}

#[test]
fn copydata_reads_across_segments() {
    let data = bytes(300);
    let m = Mbuf::from_parts(&[&data[..7], &data[7..150], &data[150..]]).unwrap();
    let mut out = [0u8; 200];
    m.copydata(5, &mut out).unwrap();
    assert_eq!(out[..], data[5..205]);
    m.copydata(300, &mut []).unwrap();
    assert_eq!(m.copydata(101, &mut out), Err(PullError::OutOfRange));
    assert_eq!(m.copydata(usize::MAX, &mut out), Err(PullError::OutOfRange));
}

#[test]
fn copyback_writes_copies_shared_and_extends() {
    let data = bytes(300);
    let mut m = Mbuf::from_parts(&[&data[..100], &data[100..]]).unwrap();
    let c = m.try_clone().unwrap();
    m.copyback(90, &[0; 20]).unwrap();
    let mut want = data.clone();
    want[90..110].fill(0);
    assert_eq!(m.to_vec(), want);
    assert_eq!(c.to_vec(), data, "clone unchanged");
    m.copyback(295, b"0123456789").unwrap();
    want.truncate(295);
    want.extend_from_slice(b"0123456789");
    assert_eq!(m.to_vec(), want);
    m.copyback(310, b"gap").unwrap();
    want.extend_from_slice(&[0, 0, 0, 0, 0]);
    want.extend_from_slice(b"gap");
    assert_eq!(m.to_vec(), want);
    m.copyback(313, &[]).unwrap();
    assert_eq!(m.len(), 313);
    assert!(m.copyback(usize::MAX, b"x").is_err());
    m.check();
}

#[test]
fn try_clone_shares_buffers() {
    let data = bytes(3000);
    let mut m = Mbuf::from_slice(&data).unwrap();
    m.hdr.rss_hash = 42;
    let mut c = m.try_clone().unwrap();
    assert_eq!(c.hdr.rss_hash, 42);
    assert_eq!(c.to_vec(), data);
    for (a, b) in m.segs.as_slice().iter().zip(c.segs.as_slice()) {
        assert!(!a.buf.is_unique() && !b.buf.is_unique());
    }
    c.head_mut::<1>().unwrap()[0] ^= 0xff;
    assert_eq!(m.to_vec(), data);
    assert_eq!(c.to_vec()[0], data[0] ^ 0xff);
    assert!(
        c.segs.as_slice()[0].buf.is_unique(),
        "written segment copied"
    );
    assert!(!c.segs.as_slice()[1].buf.is_unique(), "others still shared");
    assert_eq!(c.headroom(), DEFAULT_HEADROOM, "copy keeps the geometry");
    c.check();
}

#[test]
fn shares_take_the_references_of_every_copy_at_once() {
    let data = bytes(3000);
    let mut m = Mbuf::from_slice(&data).unwrap();
    m.hdr.rss_hash = 42;
    assert_eq!(m.nsegs(), 2);
    let mut s = m.shares(3);
    assert_eq!(s.left(), 3);
    for seg in m.segs.as_slice() {
        assert_eq!(
            seg.buf.refs(),
            4,
            "one add took all three copies' references"
        );
    }
    let mut copies: Vec<Mbuf> = s.by_ref().map(Result::unwrap).collect();
    assert_eq!((copies.len(), s.left()), (3, 0));
    assert!(s.next().is_none());
    drop(s);
    for c in &copies {
        assert_eq!((c.hdr.rss_hash, c.to_vec()), (42, data.clone()));
        assert_eq!(c.headroom(), 0, "shared: no headroom to write into");
        c.check();
    }
    for seg in m.segs.as_slice() {
        assert_eq!(seg.buf.refs(), 4);
    }
    // A write copies the segment first, as for try_clone's copies.
    copies[0].head_mut::<1>().unwrap()[0] ^= 0xff;
    assert!(copies[0].segs.as_slice()[0].buf.is_unique());
    assert_eq!(m.segs.as_slice()[0].buf.refs(), 3);
    assert_eq!(m.to_vec(), data);
    assert_eq!(copies[1].to_vec(), data);
    drop(copies);
    for seg in m.segs.as_slice() {
        assert!(seg.buf.is_unique());
    }
}

#[test]
fn shares_not_taken_give_their_references_back() {
    let m = Mbuf::from_slice(&bytes(100)).unwrap();
    let refs = || m.segs.as_slice()[0].buf.refs();
    let mut s = m.shares(5);
    let a = s.next().unwrap().unwrap();
    let b = s.next().unwrap().unwrap();
    assert_eq!(refs(), 6);
    drop(s);
    assert_eq!(refs(), 3, "the three copies never made gave theirs back");
    drop((a, b));
    assert_eq!(refs(), 1);
    assert!(m.shares(0).next().is_none());
    assert_eq!(refs(), 1);
}

#[test]
fn shares_of_a_long_chain_hold_every_segment() {
    let data = bytes(1000);
    let parts: Vec<&[u8]> = data.chunks(50).collect();
    let m = Mbuf::from_parts(&parts).unwrap();
    let copies: Vec<Mbuf> = m.shares(2).map(Result::unwrap).collect();
    for c in &copies {
        assert_eq!((c.nsegs(), c.to_vec()), (20, data.clone()));
        c.check();
    }
    for seg in m.segs.as_slice() {
        assert_eq!(seg.buf.refs(), 3);
    }
}

#[test]
fn shared_buffers_are_freed_once_and_records_go_back() {
    // A thread of its own: its pool cache counts only what this test does.
    std::thread::spawn(|| {
        let m = Mbuf::from_slice(&bytes(3000)).unwrap();
        drop((0..8).map(|_| m.try_clone().unwrap()).collect::<Vec<_>>());
        let before = crate::pool::cached();
        let ids: Vec<_> = m.segs.as_slice().iter().map(|s| s.buf.id()).collect();
        for _ in 0..3 {
            let copies: Vec<Mbuf> = m.shares(4).map(Result::unwrap).collect();
            drop(copies);
            assert_eq!(crate::pool::cached(), before, "records back, buffers held");
        }
        for &id in &ids {
            assert_eq!(crate::pool::times_free(id), 0);
        }
        drop(m.shares(4));
        let last = m.shares(1).next().unwrap().unwrap();
        drop(m);
        for &id in &ids {
            assert_eq!(crate::pool::times_free(id), 0, "the last copy holds it");
        }
        drop(last);
        for &id in &ids {
            assert_eq!(crate::pool::times_free(id), 1, "freed once");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn first_mut_of_no_segment_is_empty() {
    let mut m = Mbuf::from_parts(&[]).unwrap();
    assert_eq!(m.try_first_mut().unwrap().len(), 0);
    assert!(m.head_mut::<1>().is_none());
    assert_eq!(m.nsegs(), 0);
    assert_eq!(m.headroom(), 0);
    m.append(b"x").unwrap();
    assert_eq!(m.to_vec(), b"x");
    m.check();
}

#[test]
fn long_chains_spill_and_still_work() {
    let data = bytes(1000);
    let parts: Vec<&[u8]> = data.chunks(50).collect();
    let mut m = Mbuf::from_parts(&parts).unwrap();
    assert_eq!(m.nsegs(), 20);
    let mut r = m.split(333).unwrap();
    assert_eq!(r.pulldown(10, 200).unwrap(), &data[343..543]);
    m.cat(r);
    assert_eq!(m.to_vec(), data);
    m.check();
}

#[test]
fn packets_move_between_threads() {
    let data = bytes(500);
    let m = Mbuf::from_slice(&data).unwrap();
    let c = m.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        let mut c = c;
        c.copyback(0, b"other thread").unwrap();
        c.to_vec()
    });
    let theirs = t.join().unwrap();
    assert_eq!(&theirs[..12], b"other thread");
    assert_eq!(m.to_vec(), data);
    let t = std::thread::spawn(move || drop(m));
    t.join().unwrap();
}

#[test]
fn debug_shows_layout() {
    let m = Mbuf::devget(&bytes(100)).unwrap();
    let s = format!("{m:?}");
    assert!(s.contains("len: 100"), "{s}");
}

#[test]
fn errors_display() {
    assert_eq!(
        crate::NoBufs.to_string(),
        "no buffer space available (ENOBUFS)"
    );
    assert!(PullError::TooBig.to_string().contains("longer"));
    assert_eq!(PullError::from(crate::NoBufs), PullError::NoBufs);
}

#[test]
fn packets_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Mbuf>();
}

#[test]
fn with_capacity_takes_one_buffer_of_the_size_needed() {
    let m = Mbuf::with_capacity(1000).unwrap();
    assert_eq!((m.nsegs(), m.headroom()), (1, DEFAULT_HEADROOM));
    assert_eq!(m.buf_bytes(), MCLBYTES);
    // A 64 KiB segment for a device with segmentation offload: one jumbo cluster,
    // filled by append without a second buffer.
    let mut m = Mbuf::with_capacity(65_535).unwrap();
    assert_eq!(m.buf_bytes(), crate::MJUMBYTES);
    let data: Vec<u8> = (0..65_535u32).map(|i| i as u8).collect();
    m.append(&data).unwrap();
    assert_eq!((m.nsegs(), m.len()), (1, 65_535));
    assert_eq!(m.first(), &data[..]);
    // Room for Ethernet in front.
    m.prepend(14).unwrap();
    assert_eq!(m.nsegs(), 1);
    // Past a jumbo cluster, one 256 KiB cluster: an application's large write.
    let mut m = Mbuf::with_capacity(crate::MJUMBYTES).unwrap();
    assert_eq!(m.buf_bytes(), crate::MJUM256BYTES);
    // (Just past a jumbo cluster's worth: enough, and quick under Miri.)
    let data: Vec<u8> = (0..70_000u32).map(|i| (i / 7) as u8).collect();
    m.append(&data).unwrap();
    assert_eq!((m.nsegs(), m.len()), (1, data.len()));
    assert_eq!(m.to_vec(), data);
    drop(m);
    assert!(crate::pool::stats().jum256_total >= 1);
    assert!(Mbuf::with_capacity(crate::MJUM256BYTES).is_err());
    assert!(Mbuf::with_capacity(usize::MAX).is_err());
}

#[test]
fn recycle_reuses_an_unshared_first_buffer() {
    let mut m = Mbuf::from_slice(&[1u8; 300]).unwrap();
    m.hdr.rcvif = 3;
    m.prepend(14).unwrap().fill(7);
    m.recycle(&[9u8; 64]).unwrap();
    m.check();
    assert_eq!(m.to_vec(), vec![9u8; 64]);
    assert_eq!(m.hdr, PktHdr::default());
    assert_eq!(m.headroom(), DEFAULT_HEADROOM);
    // A shared buffer is not written: the packet moves to a new one.
    let keep = m.try_clone().unwrap();
    m.recycle(&[5u8; 10]).unwrap();
    m.check();
    assert_eq!(keep.to_vec(), vec![9u8; 64]);
    assert_eq!(m.to_vec(), vec![5u8; 10]);
}

#[test]
fn a_fill_buffer_hands_out_its_pieces_and_keeps_writing_after_them() {
    let data = bytes(3000);
    let mut f = crate::FillBuf::new(2000).unwrap();
    assert_eq!(f.room(), MCLBYTES);
    let a = f.fill(&data[..1000]).unwrap();
    let b = f.fill(&data[1000..1500]).unwrap();
    // More than there is room for: what fits.
    let c = f.fill(&data[1500..]).unwrap();
    assert_eq!((a.len(), b.len(), c.len(), f.room()), (1000, 500, 548, 0));
    assert!(f.fill(&data[..10]).unwrap().is_empty());
    assert_eq!(a.to_vec(), data[..1000]);
    assert_eq!(b.to_vec(), data[1000..1500]);
    assert_eq!(c.to_vec(), data[1500..2048]);
    // The pieces are consecutive windows of one buffer: put together, one segment.
    let mut all = a.try_clone().unwrap();
    all.cat(b);
    all.cat(c);
    assert_eq!((all.nsegs(), all.to_vec()), (1, data[..2048].to_vec()));
    // Shared (the filler and the pieces hold it): a write copies first.
    let mut w = a;
    w.copyback(0, &[0xaa]).unwrap();
    assert_eq!(all.to_vec(), data[..2048]);
    drop(f);
    all.check();
    w.check();
}

#[test]
fn a_fill_buffer_lends_its_room_and_keeps_what_was_not_claimed() {
    let mut f = crate::FillBuf::new(2000).unwrap();
    // Lent at most `max`; claims three bytes of the ten.
    let a = f
        .fill_with(10, |dst| {
            assert_eq!(dst.len(), 10);
            dst[..3].copy_from_slice(b"abc");
            3
        })
        .unwrap();
    assert_eq!((a.to_vec(), f.room()), (b"abc".to_vec(), MCLBYTES - 3));
    // A claim beyond the loan is cut to it; the next piece follows the first.
    let b = f
        .fill_with(4, |dst| {
            dst.copy_from_slice(b"defg");
            100
        })
        .unwrap();
    assert_eq!(b.to_vec(), b"defg");
    // Nothing claimed: an empty packet, the room kept.
    assert!(f.fill_with(10, |_| 0).unwrap().is_empty());
    assert_eq!(f.room(), MCLBYTES - 7);
    let mut ab = a.try_clone().unwrap();
    ab.cat(b);
    assert_eq!((ab.nsegs(), ab.to_vec()), (1, b"abcdefg".to_vec()));
    // No room: `f` is not called.
    let mut full = crate::FillBuf::new(100).unwrap();
    full.fill(&vec![1u8; MCLBYTES]).unwrap();
    assert!(full
        .fill_with(10, |_| unreachable!("no room to lend"))
        .unwrap()
        .is_empty());
    a.check();
}

#[test]
fn pieces_are_read_on_another_thread_while_the_buffer_fills() {
    // Miri checks that the writes after the mark race with no read of a piece.
    let data = bytes(4000);
    let mut f = crate::FillBuf::new(4000).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Mbuf>();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        while let Ok(m) = rx.recv() {
            got.extend_from_slice(&m.to_vec());
        }
        got
    });
    for piece in data.chunks(300) {
        tx.send(f.fill(piece).unwrap()).unwrap();
    }
    drop(tx);
    assert_eq!(reader.join().unwrap(), data);
}

#[test]
fn a_one_segment_packets_record_is_one_cache_line_and_its_copies_too() {
    let m = Mbuf::from_slice(&[7u8; 64]).unwrap();
    let rec = std::ptr::from_ref::<crate::Pkt>(&m) as usize;
    assert_eq!(rec % 64, 0, "a record starts on a cache line");
    assert!(m.used_bytes() <= 64, "{} bytes", m.used_bytes());
    let mut copies: Vec<Mbuf> = m.shares(3).map(Result::unwrap).collect();
    for c in &copies {
        assert_eq!(c.to_vec(), m.to_vec());
        assert_eq!(c.hdr, m.hdr);
        c.check();
    }
    // A copy written is copied first; the others keep the frame.
    copies[0].copyback(0, &[1, 2]).unwrap();
    assert_eq!(&copies[0].to_vec()[..3], &[1, 2, 7]);
    assert_eq!(copies[1].to_vec(), vec![7u8; 64]);
    // Four segments fill the inline list: the whole record is copied.
    let parts: [&[u8]; 4] = [&[1; 8], &[2; 8], &[3; 8], &[4; 8]];
    let m4 = Mbuf::from_parts(&parts).unwrap();
    assert_eq!(m4.used_bytes(), std::mem::size_of::<crate::Pkt>());
    let c4: Vec<Mbuf> = m4.shares(2).map(Result::unwrap).collect();
    assert!(c4.iter().all(|c| c.to_vec() == m4.to_vec()));
}
