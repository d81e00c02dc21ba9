//! mbuf micro-benchmarks, each group with its baseline in the same run:
//! pool alloc/free against `Vec::with_capacity(2048)`, header prepend, the
//! three pull strategies on a hit and on a two-segment packet (the paper's
//! `m_devget` layout), split/cat, copydata.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use mbuf::Mbuf;

/// The m_pulldown paper's routing-header packet length: 96 + 32 under devget.
const RTHDR_PKT: usize = 128;

/// The header accesses (off, len) of the paper's IPv6 input path for the
/// routing-header packet (see `ip6_input_rthdr0` in the crate's tests): four
/// loopback passes with segments left, a fifth that delivers ICMPv6.
fn rthdr0_accesses() -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    for _ in 0..4 {
        v.extend([(0, 40), (40, 4), (40, 72), (0, 40), (40, 72)]);
    }
    v.extend([(0, 40), (40, 4), (40, 72), (112, 8), (112, 16)]);
    v
}

fn alloc_free(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_free");
    g.bench_function("Mbuf::new+drop", |b| {
        b.iter(|| black_box(Mbuf::new().unwrap()))
    });
    g.bench_function("baseline Vec::with_capacity(2048)+drop", |b| {
        b.iter(|| black_box(Vec::<u8>::with_capacity(2048)))
    });
    let payload = vec![0x5au8; 1500];
    g.bench_function("Mbuf::from_slice(1500)+drop", |b| {
        b.iter(|| black_box(Mbuf::from_slice(black_box(&payload)).unwrap()))
    });
    g.bench_function("baseline Vec from 1500 bytes+drop", |b| {
        b.iter(|| black_box(black_box(&payload[..]).to_vec()))
    });
    let held = Mbuf::from_slice(&payload).unwrap();
    g.bench_function("try_clone+drop", |b| {
        b.iter(|| black_box(held.try_clone().unwrap()))
    });
    g.finish();
}

fn prepend(c: &mut Criterion) {
    let mut g = c.benchmark_group("prepend");
    let payload = vec![0x5au8; 1500];
    let mut m = Mbuf::from_slice(&payload).unwrap();
    g.bench_function("prepend 14 into headroom (+adj back)", |b| {
        b.iter(|| {
            m.prepend(14).unwrap().fill(0xff);
            m.adj(14);
        })
    });
    let mut v = payload.clone();
    g.bench_function("baseline Vec splice 14 at front (+drain back)", |b| {
        b.iter(|| {
            v.splice(0..0, [0xffu8; 14]);
            v.drain(..14);
        })
    });
    let shared = Mbuf::from_slice(&payload).unwrap();
    g.bench_function("prepend 14 to a shared packet (new buffer)", |b| {
        b.iter_batched(
            || shared.try_clone().unwrap(),
            |mut m| {
                m.prepend(14).unwrap().fill(0xff);
                m
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn pull(c: &mut Criterion) {
    let mut g = c.benchmark_group("pull");
    let pkt = vec![0x60u8; RTHDR_PKT];
    let mut flat = Mbuf::from_slice(&[0x60u8; 1500]).unwrap();
    g.bench_function("pulldown hit (54 bytes at 0)", |b| {
        b.iter(|| black_box(flat.pulldown(black_box(0), 54).unwrap()[0]))
    });
    g.bench_function("pullup2 hit (54)", |b| {
        b.iter(|| {
            flat.pullup2(black_box(54)).unwrap();
            black_box(flat.first()[0])
        })
    });
    g.bench_function("baseline copydata 54 into a stack buffer", |b| {
        b.iter(|| {
            let mut h = [0u8; 54];
            flat.copydata(black_box(0), &mut h).unwrap();
            black_box(h[0])
        })
    });
    g.bench_function("devget 96+32 (setup cost, for reference)", |b| {
        b.iter(|| black_box(Mbuf::devget(black_box(&pkt)).unwrap()))
    });
    g.bench_function("devget + pulldown(40, 72) across 96+32", |b| {
        b.iter(|| {
            let mut m = Mbuf::devget(black_box(&pkt)).unwrap();
            black_box(m.pulldown(40, 72).unwrap()[0]);
            m
        })
    });
    g.bench_function("devget + pullup2(112) across 96+32", |b| {
        b.iter(|| {
            let mut m = Mbuf::devget(black_box(&pkt)).unwrap();
            m.pullup2(112).unwrap();
            black_box(m.first()[40]);
            m
        })
    });
    let acc = rthdr0_accesses();
    g.bench_function("paper path (25 accesses): pulldown", |b| {
        b.iter(|| {
            let mut m = Mbuf::devget(black_box(&pkt)).unwrap();
            for &(off, len) in &acc {
                black_box(m.pulldown(off, len).unwrap()[0]);
            }
            m
        })
    });
    g.bench_function("paper path (25 accesses): pullup2", |b| {
        b.iter(|| {
            let mut m = Mbuf::devget(black_box(&pkt)).unwrap();
            for &(off, len) in &acc {
                m.pullup2(off + len).unwrap();
                black_box(m.first()[off]);
            }
            m
        })
    });
    g.finish();
}

fn split_cat(c: &mut Criterion) {
    let mut g = c.benchmark_group("split_cat");
    let mut m = Mbuf::from_slice(&[0x5au8; 1500]).unwrap();
    g.bench_function("split(700)+cat", |b| {
        b.iter(|| {
            let rest = m.split(black_box(700)).unwrap();
            m.cat(rest);
        })
    });
    let mut v = vec![0x5au8; 1500];
    g.bench_function("baseline Vec split_off(700)+extend", |b| {
        b.iter(|| {
            let rest = v.split_off(black_box(700));
            v.extend_from_slice(&rest);
        })
    });
    g.finish();
}

fn copydata(c: &mut Criterion) {
    let mut g = c.benchmark_group("copydata");
    let payload = vec![0x5au8; 1500];
    let one = Mbuf::from_slice(&payload).unwrap();
    let three =
        Mbuf::from_parts(&[&payload[..500], &payload[500..1000], &payload[1000..]]).unwrap();
    let mut out = vec![0u8; 1500];
    g.bench_function("copydata 1500, 1 segment", |b| {
        b.iter(|| one.copydata(black_box(0), &mut out).unwrap())
    });
    g.bench_function("copydata 1500, 3 segments", |b| {
        b.iter(|| three.copydata(black_box(0), &mut out).unwrap())
    });
    g.bench_function("baseline copy_from_slice 1500", |b| {
        b.iter(|| out.copy_from_slice(black_box(&payload)))
    });
    g.finish();
}

criterion_group!(benches, alloc_free, prepend, pull, split_cat, copydata);
criterion_main!(benches);
