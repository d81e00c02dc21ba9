//! A sequence of mbuf operations decoded from the input, on up to six packets
//! that share buffers through clones and splits, each checked against a
//! `Vec<u8>` model after every step: contents, length, segment sum, and every
//! pulldown/pullup/copydata result. Any mismatch or panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mbuf::{Mbuf, PullError, MCLBYTES, MHLEN};
use mpstack_fuzz::Input;

fn build(kind: u8, d: &[u8]) -> Option<Mbuf> {
    match kind % 3 {
        0 => Mbuf::from_slice(d).ok(),
        1 => Mbuf::devget(d).ok(),
        _ => {
            let parts: Vec<&[u8]> = d.chunks(61).collect();
            Mbuf::from_parts(&parts).ok()
        }
    }
}

fn check(m: &Mbuf, v: &[u8]) {
    assert_eq!(m.len(), v.len());
    assert_eq!(m.segments().map(<[u8]>::len).sum::<usize>(), v.len());
    assert_eq!(m.to_vec(), v);
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let kind = inp.u8();
    let first = inp.bytes(4096);
    let Some(m) = build(kind, &first) else { return };
    let mut pkts: Vec<(Mbuf, Vec<u8>)> = vec![(m, first)];
    let mut steps = 0;
    while !inp.0.is_empty() && steps < 200 {
        steps += 1;
        if pkts.is_empty() {
            pkts.push((Mbuf::new().unwrap(), Vec::new()));
        }
        let n = pkts.len();
        let op = inp.u8();
        let i = usize::from(inp.u8()) % n;
        match op % 14 {
            0 => {
                let (len, b) = (usize::from(inp.u16()) % 300, inp.u8());
                let (m, v) = &mut pkts[i];
                m.prepend(len).unwrap().fill(b);
                v.splice(0..0, std::iter::repeat_n(b, len));
            }
            1 => {
                let k = inp.u16() as i16 as isize;
                let (m, v) = &mut pkts[i];
                m.adj(k);
                let c = k.unsigned_abs().min(v.len());
                if k >= 0 {
                    v.drain(..c);
                } else {
                    v.truncate(v.len() - c);
                }
            }
            2 => {
                let len = usize::from(inp.u16()) % 5000;
                let (m, v) = &mut pkts[i];
                m.truncate(len);
                v.truncate(len);
            }
            3 => {
                let off = usize::from(inp.u16()) % 5000;
                let (m, v) = &mut pkts[i];
                let rest = m.split(off).unwrap();
                let vr = v.split_off(off.min(v.len()));
                if n < 6 {
                    pkts.push((rest, vr));
                }
            }
            4 => {
                let j = usize::from(inp.u8()) % n;
                if i != j {
                    let (o, vo) = pkts.swap_remove(j);
                    let i = if i == n - 1 { j } else { i };
                    let (m, v) = &mut pkts[i];
                    m.cat(o);
                    v.extend(vo);
                }
            }
            5 => {
                let d = inp.bytes(3000);
                let (m, v) = &mut pkts[i];
                m.append(&d).unwrap();
                v.extend(d);
            }
            6 => {
                let off = usize::from(inp.u16()) % 5000;
                let d = inp.bytes(400);
                let (m, v) = &mut pkts[i];
                m.copyback(off, &d).unwrap();
                if v.len() < off + d.len() {
                    v.resize(off + d.len(), 0);
                }
                v[off..off + d.len()].copy_from_slice(&d);
            }
            7 => {
                let (off, len, b) = (
                    usize::from(inp.u16()) % 5000,
                    usize::from(inp.u16()) % 2200,
                    inp.u8(),
                );
                let (m, v) = &mut pkts[i];
                match m.pulldown(off, len) {
                    Ok(s) => {
                        assert_eq!(s, &v[off..off + len]);
                        s.fill(b);
                        v[off..off + len].fill(b);
                    }
                    Err(PullError::TooBig) => assert!(len > MCLBYTES),
                    Err(PullError::OutOfRange) => assert!(off + len > v.len()),
                    Err(PullError::NoBufs) => panic!("pool exhausted"),
                }
            }
            8 | 9 => {
                let two = op % 14 == 9;
                let len = usize::from(inp.u16()) % 2200;
                let (m, v) = &mut pkts[i];
                let r = if two { m.pullup2(len) } else { m.pullup(len) };
                match r {
                    Ok(()) => assert_eq!(&m.first()[..len], &v[..len]),
                    Err(PullError::TooBig) => assert!(len > if two { MCLBYTES } else { MHLEN }),
                    Err(PullError::OutOfRange) => assert!(len > v.len()),
                    Err(PullError::NoBufs) => panic!("pool exhausted"),
                }
            }
            10 => {
                let (m, v) = &pkts[i];
                let c = (m.try_clone().unwrap(), v.clone());
                if n < 6 {
                    pkts.push(c);
                }
            }
            11 => {
                let b = inp.u8();
                let (m, v) = &mut pkts[i];
                // A pool with no buffer for the copy is an error, never a panic.
                if let Ok([f, ..]) = m.try_first_mut() {
                    *f = b;
                    v[0] = b;
                }
            }
            12 => {
                let (off, len) = (usize::from(inp.u16()) % 5000, usize::from(inp.u16()) % 400);
                let (m, v) = &pkts[i];
                let mut out = vec![0; len];
                match m.copydata(off, &mut out) {
                    Ok(()) => assert_eq!(out, &v[off..off + len]),
                    Err(_) => assert!(off + len > v.len()),
                }
            }
            _ => {
                pkts.swap_remove(i);
            }
        }
        for (m, v) in &pkts {
            check(m, v);
        }
    }
});
