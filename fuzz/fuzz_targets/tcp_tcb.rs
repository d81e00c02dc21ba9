//! Arbitrary segments into TCP control blocks in every state they reach: an
//! established connection (after a clean handshake) and a fresh passive open. The
//! input is a sequence of segments whose numbers are offsets from what the block
//! expects (so most land near the window, where the bugs live). Nothing may panic,
//! and the buffers and the out-of-order queue stay within their bounds.
#![no_main]

use dev::Instant;
use libfuzzer_sys::fuzz_target;
use mpstack_fuzz::Input;
use net::stats::TcpStat;
use net::tcp::{FoCookie, Payload, SegIn, SegOut, Tcb, TcpConfig, PAYLOAD_PIECES};

fn to_in<'a>(s: &SegOut, data: &'a [u8]) -> SegIn<'a> {
    SegIn::from_out(s, data)
}

fuzz_target!(|data: &[u8]| {
    let cfg = TcpConfig {
        rcvbuf: 8192,
        sndbuf: 8192,
        ooo_max_segs: 8,
        // ECN asked for and granted, so that ECE, CWR and CE reach its code.
        ecn: 1,
        ..TcpConfig::default()
    };
    let mut st = TcpStat::default();
    let mut now = Instant::from_secs(1);
    let mut a = Tcb::connect(cfg, 1000, &mut st);
    let mut out = Vec::new();
    a.output(now, &mut st, &mut out);
    let syn = out[0];
    let mut b = Tcb::accept(cfg, 5000, &to_in(&syn, &[])).unwrap();
    out.clear();
    b.output(now, &mut st, &mut out);
    a.input(&to_in(&out[0], &[]), now, &mut st);
    a.send(&[7u8; 4000]);
    let payload = [0x5au8; 2000];
    let mut inp = Input(data);
    while !inp.0.is_empty() {
        let which = inp.u8();
        let t = if which & 1 == 0 { &mut a } else { &mut b };
        let flags = inp.u8();
        let ecn = inp.u8();
        let seg = SegIn {
            seq: 1000u32
                .wrapping_add(inp.u32())
                .wrapping_add(u32::from(inp.u16())),
            ack: (flags & 1 != 0).then(|| 5000u32.wrapping_add(u32::from(inp.u16()))),
            syn: flags & 2 != 0,
            fin: flags & 4 != 0,
            rst: flags & 8 != 0,
            wnd: inp.u16(),
            mss: (flags & 16 != 0).then(|| inp.u16()),
            wscale: (flags & 32 != 0).then(|| inp.u8()),
            sack_perm: flags & 64 != 0,
            ts: (flags & 128 != 0).then(|| (inp.u32(), inp.u32())),
            sack: [0; 4].map(|_| {
                let l = 1000u32.wrapping_add(u32::from(inp.u16()));
                (inp.u8() & 1 == 1).then(|| (l, l.wrapping_add(u32::from(inp.u16()))))
            }),
            ece: ecn & 1 != 0,
            cwr: ecn & 2 != 0,
            ce: ecn & 4 != 0,
            // A Fast Open option: a request, or a cookie of the length asked for
            // (refused lengths: none).
            fast_open: (ecn & 8 != 0)
                .then(|| FoCookie::new(&[0xc0; 16][..usize::from(inp.u8() % 17)]))
                .flatten(),
            payload: {
                // In one piece or several, as a chained segment arrives.
                let mut p = &payload[..usize::from(inp.u16()) % payload.len()];
                let mut pl = Payload::default();
                for _ in 1..1 + inp.u8() % PAYLOAD_PIECES as u8 {
                    let (h, t) = p.split_at(usize::from(inp.u16()) % (p.len() + 1));
                    pl.push(h);
                    p = t;
                }
                pl.push(p); // at most PAYLOAD_PIECES in all
                pl
            },
        };
        t.input(&seg, now, &mut st);
        now = now + dev::Duration::from_millis(u64::from(inp.u8()) * 10);
        out.clear();
        t.output(now, &mut st, &mut out);
        for o in &out {
            let mut buf = vec![0u8; o.data_len];
            t.copy_payload(o, &mut buf);
        }
        let mut sink = [0u8; 512];
        t.recv(&mut sink);
        assert!(t.recv_available() <= cfg.rcvbuf);
    }
});
