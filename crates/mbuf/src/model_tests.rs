//! Property test: random sequences of operations on a few packets (which share
//! buffers through clones and splits) against a `Vec<u8>` model of each. After
//! every operation each packet's bytes equal its model and the chain invariants
//! hold; every pulldown/pullup result equals the model's bytes; writes through
//! one packet never show in another.

use proptest::prelude::*;

use crate::{Mbuf, PullError, MCLBYTES, MHLEN};

#[derive(Clone, Debug)]
enum Op {
    Prepend(usize, usize, u8),
    Adj(usize, isize),
    Truncate(usize, usize),
    Split(usize, usize),
    Cat(usize, usize),
    Append(usize, Vec<u8>),
    Copyback(usize, usize, Vec<u8>),
    Pulldown(usize, usize, usize, u8),
    Pullup(usize, usize),
    Pullup2(usize, usize),
    Clone(usize),
    Copym(usize, usize, usize),
    FirstMut(usize, u8),
    Copydata(usize, usize, usize),
    Drop(usize),
}

fn data(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..8;
    prop_oneof![
        (i.clone(), 0usize..300, any::<u8>()).prop_map(|(i, n, b)| Op::Prepend(i, n, b)),
        (i.clone(), -400isize..400).prop_map(|(i, n)| Op::Adj(i, n)),
        (i.clone(), 0usize..3000).prop_map(|(i, n)| Op::Truncate(i, n)),
        (i.clone(), 0usize..3000).prop_map(|(i, n)| Op::Split(i, n)),
        (i.clone(), i.clone()).prop_map(|(i, j)| Op::Cat(i, j)),
        (i.clone(), data(2500)).prop_map(|(i, d)| Op::Append(i, d)),
        (i.clone(), 0usize..3000, data(300)).prop_map(|(i, o, d)| Op::Copyback(i, o, d)),
        (i.clone(), 0usize..3000, 0usize..2100, any::<u8>())
            .prop_map(|(i, o, n, b)| Op::Pulldown(i, o, n, b)),
        (i.clone(), 0usize..120).prop_map(|(i, n)| Op::Pullup(i, n)),
        (i.clone(), 0usize..2100).prop_map(|(i, n)| Op::Pullup2(i, n)),
        i.clone().prop_map(Op::Clone),
        (i.clone(), 0usize..3000, 0usize..3000).prop_map(|(i, o, n)| Op::Copym(i, o, n)),
        (i.clone(), any::<u8>()).prop_map(|(i, b)| Op::FirstMut(i, b)),
        (i.clone(), 0usize..3000, 0usize..300).prop_map(|(i, o, n)| Op::Copydata(i, o, n)),
        i.prop_map(Op::Drop),
    ]
}

fn start() -> impl Strategy<Value = (u8, Vec<u8>)> {
    (0u8..3, data(3000))
}

fn build(kind: u8, d: &[u8]) -> Mbuf {
    match kind {
        0 => Mbuf::from_slice(d).unwrap(),
        1 => Mbuf::devget(d).unwrap(),
        _ => {
            let parts: Vec<&[u8]> = d.chunks(77).collect();
            Mbuf::from_parts(&parts).unwrap()
        }
    }
}

fn apply(pkts: &mut Vec<(Mbuf, Vec<u8>)>, op: Op) {
    if pkts.is_empty() {
        pkts.push((Mbuf::new().unwrap(), Vec::new()));
    }
    let n = pkts.len();
    match op {
        Op::Prepend(i, len, b) => {
            let (m, v) = &mut pkts[i % n];
            m.prepend(len).unwrap().fill(b);
            v.splice(0..0, std::iter::repeat_n(b, len));
        }
        Op::Adj(i, k) => {
            let (m, v) = &mut pkts[i % n];
            m.adj(k);
            let c = k.unsigned_abs().min(v.len());
            if k >= 0 {
                v.drain(..c);
            } else {
                v.truncate(v.len() - c);
            }
        }
        Op::Truncate(i, len) => {
            let (m, v) = &mut pkts[i % n];
            m.truncate(len);
            v.truncate(len);
        }
        Op::Split(i, off) => {
            let (m, v) = &mut pkts[i % n];
            let rest = m.split(off).unwrap();
            let vr = v.split_off(off.min(v.len()));
            if n < 6 {
                pkts.push((rest, vr));
            }
        }
        Op::Cat(i, j) => {
            let (i, j) = (i % n, j % n);
            if i != j {
                let (o, vo) = pkts.swap_remove(j);
                let i = if i == n - 1 { j } else { i };
                let (m, v) = &mut pkts[i];
                m.cat(o);
                v.extend(vo);
            }
        }
        Op::Append(i, d) => {
            let (m, v) = &mut pkts[i % n];
            m.append(&d).unwrap();
            v.extend(d);
        }
        Op::Copyback(i, off, d) => {
            let (m, v) = &mut pkts[i % n];
            m.copyback(off, &d).unwrap();
            if v.len() < off + d.len() {
                v.resize(off + d.len(), 0);
            }
            v[off..off + d.len()].copy_from_slice(&d);
        }
        Op::Pulldown(i, off, len, b) => {
            let (m, v) = &mut pkts[i % n];
            let r = m.pulldown(off, len);
            if len > MCLBYTES {
                assert_eq!(r, Err(PullError::TooBig));
            } else if off + len > v.len() {
                assert_eq!(r, Err(PullError::OutOfRange));
            } else {
                let s = r.unwrap();
                assert_eq!(s, &v[off..off + len]);
                s.fill(b);
                v[off..off + len].fill(b);
            }
        }
        Op::Pullup(i, len) | Op::Pullup2(i, len) => {
            let two = matches!(op, Op::Pullup2(..));
            let (m, v) = &mut pkts[i % n];
            let r = if two { m.pullup2(len) } else { m.pullup(len) };
            let limit = if two { MCLBYTES } else { MHLEN };
            if len > limit {
                assert_eq!(r, Err(PullError::TooBig));
            } else if len > v.len() {
                assert_eq!(r, Err(PullError::OutOfRange));
            } else {
                r.unwrap();
                assert!(m.first().len() >= len);
                assert_eq!(&m.first()[..len], &v[..len]);
            }
        }
        Op::Clone(i) => {
            let (m, v) = &pkts[i % n];
            let c = (m.try_clone().unwrap(), v.clone());
            if n < 6 {
                pkts.push(c);
            }
        }
        Op::Copym(i, off, len) => {
            let (m, v) = &pkts[i % n];
            let from = off.min(v.len());
            let to = from + len.min(v.len() - from);
            let c = (m.copym(off, len).unwrap(), v[from..to].to_vec());
            if n < 6 {
                pkts.push(c);
            }
        }
        Op::FirstMut(i, b) => {
            let (m, v) = &mut pkts[i % n];
            if let Some(f) = m.head_mut::<1>() {
                f[0] = b;
                v[0] = b;
            }
        }
        Op::Copydata(i, off, len) => {
            let (m, v) = &pkts[i % n];
            let mut out = vec![0; len];
            let r = m.copydata(off, &mut out);
            if off + len > v.len() {
                assert_eq!(r, Err(PullError::OutOfRange));
            } else {
                r.unwrap();
                assert_eq!(out, &v[off..off + len]);
            }
        }
        Op::Drop(i) => {
            pkts.swap_remove(i % n);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    #[cfg_attr(miri, ignore)]
    fn mbuf_matches_vec_model(
        starts in prop::collection::vec(start(), 1..3),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut pkts: Vec<(Mbuf, Vec<u8>)> =
            starts.iter().map(|(k, d)| (build(*k, d), d.clone())).collect();
        for op in ops {
            apply(&mut pkts, op);
            for (m, v) in &pkts {
                m.check();
                prop_assert_eq!(m.len(), v.len());
                prop_assert_eq!(&m.to_vec(), v);
            }
        }
    }
}
