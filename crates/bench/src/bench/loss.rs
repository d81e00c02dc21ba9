//! `mpstack bench loss`: single-flow TCP goodput against random packet loss, for each
//! of mpstack's congestion controls (CUBIC, NewReno, BBR), beside the Mathis et al.
//! model in the same run.
//!
//! Two real [`net::Stack`]s (one worker each) in the simulator ([`sim`]): a
//! point-to-point memory wire of 100 Mbit/s each way, 10 ms each way (a 20 ms round
//! trip), a queue of one bandwidth-delay product, and [`dev::impair::Impairments`]
//! loss at each `--loss` percentage, drawn independently per frame in each direction
//! (data and ACKs). Virtual time: the figure is bytes the receiving application read
//! in `--sim-secs` simulated seconds from the connection's first byte (slow start
//! included), so it is deterministic for a seed and does not depend on this machine
//! or its load; `--rounds` runs that many seeds and the mean is reported.
//!
//! The baseline is a model, not a peer: Mathis, Semke, Mahdavi and Ott (1997),
//! goodput ≤ (MSS / RTT) · C / √p with C = √(3/2), MSS 1460 bytes and RTT the 20 ms
//! of the wire (queueing adds to it), p the loss rate each way. It is Reno's
//! loss-bound rate; the link's 100 Mbit/s bounds everything.

use super::progress;
use crate::BenchArgs;
use net::tcp::CongestionControl;
use sim::Sim;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::time::Duration;

/// The wire: bits a second each way, and delay each way.
const RATE_BPS: u64 = 100_000_000;
const ONE_WAY: Duration = Duration::from_millis(10);
/// The model's segment size: MTU 1500 less 40 bytes of IPv4 and TCP headers.
const MSS: f64 = 1460.0;
/// Loss percentages without --loss.
pub const DEFAULT_LOSS: [f64; 7] = [0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0];
/// The controls, in table order, with their --skip names.
const CCS: [(&str, CongestionControl); 3] = [
    ("cubic", CongestionControl::Cubic),
    ("newreno", CongestionControl::NewReno),
    ("bbr", CongestionControl::Bbr),
];

/// What to run.
#[derive(Clone, Debug)]
pub struct Params {
    /// Loss percentages, each way.
    pub loss: Vec<f64>,
    /// Simulated seconds of each transfer.
    pub secs: f64,
    /// Seeds per point.
    pub rounds: u32,
    /// The controls to run (names from [`CCS`]).
    pub ccs: Vec<&'static str>,
}

/// One measured point.
#[derive(Clone, Debug)]
pub struct Point {
    pub cc: &'static str,
    pub loss_pct: f64,
    /// Mean over the seeds, bits a second of simulated time.
    pub goodput_bps: f64,
    pub min_bps: f64,
    pub max_bps: f64,
    /// Segments retransmitted and retransmission timeouts, summed over the seeds.
    pub retransmits: u64,
    pub timeouts: u64,
}

/// The Mathis et al. bound in bits a second; infinite without loss.
pub fn mathis_bps(loss_pct: f64) -> f64 {
    let p = loss_pct / 100.0;
    let rtt = 2.0 * ONE_WAY.as_secs_f64();
    MSS * 8.0 / rtt * (1.5f64).sqrt() / p.sqrt()
}

/// One transfer: bits a second the receiver read, retransmitted segments, timeouts.
fn transfer(cc: CongestionControl, loss_pct: f64, secs: f64, seed: u64) -> (f64, u64, u64) {
    let mut s = Sim::new(seed);
    // The wire's queue limit counts the frames still propagating as well as those
    // waiting: a one-way delay's worth of frames plus a round trip's is a queue of
    // one bandwidth-delay product.
    let frames_in = |d: f64| (RATE_BPS as f64 / 8.0 * d / 1514.0) as usize;
    let one_way = ONE_WAY.as_secs_f64();
    let limit = frames_in(one_way) + frames_in(2.0 * one_way);
    let wire = dev::mem::WireConfig {
        impair: dev::impair::Impairments {
            delay: ONE_WAY,
            rate_bps: RATE_BPS,
            loss: loss_pct / 100.0,
            ..dev::impair::Impairments::default()
        },
        queue_limit: limit.max(16),
        ..dev::mem::WireConfig::default()
    };
    let tcp = net::tcp::TcpConfig {
        cc,
        // Room for the window the path needs (a BDP of 250 KB and as much queued)
        // with loss repair on top: the buffers never bound the rate.
        sndbuf: 4 << 20,
        rcvbuf: 4 << 20,
        ..net::tcp::TcpConfig::default()
    };
    let (a, b) = (s.add_host_tcp("a", 1, tcp), s.add_host_tcp("b", 1, tcp));
    s.link(a, "198.18.0.1/24", b, "198.18.0.2/24", wire);
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001), 4)
        .expect("listen");
    l.set_nonblocking(true).expect("nonblocking");
    let c = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 5001))
        .expect("connect");
    c.set_nonblocking(true).expect("nonblocking");
    // The handshake may lose its SYN at high loss: wait for it (RTOs included)
    // before the clock starts.
    let mut srv = None;
    s.run_until(Duration::from_secs(60), |_| {
        srv = l.accept().ok().map(|(x, _)| x);
        srv.is_some()
    });
    let Some(srv) = srv else {
        return (0.0, 0, 0);
    };
    srv.set_nonblocking(true).expect("nonblocking");
    let chunk = vec![0x5au8; 64 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let mut got: u64 = 0;
    let t0 = s.now();
    s.run_until(Duration::from_secs_f64(secs), |_| {
        while (&c).write(&chunk).is_ok_and(|n| n == chunk.len()) {}
        while let Ok(n) = (&srv).read(&mut buf) {
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        false
    });
    let took = s.now().saturating_duration_since(t0).as_secs_f64();
    let st = s.host(a).stats().tcp;
    (
        got as f64 * 8.0 / took.max(1e-9),
        st.sndrexmitpack,
        st.rexmttimeo,
    )
}

/// Every point of `p`, in loss order, each control in [`CCS`] order.
pub fn measure(p: &Params, mut progress: impl FnMut(&str)) -> Vec<Point> {
    let mut out = Vec::new();
    for &loss in &p.loss {
        for (name, cc) in CCS.iter().filter(|(n, _)| p.ccs.contains(n)) {
            let runs: Vec<(f64, u64, u64)> = (0..p.rounds)
                .map(|r| transfer(*cc, loss, p.secs, 0x6c6f_7373 + u64::from(r)))
                .collect();
            let rates = runs.iter().map(|r| r.0);
            let pt = Point {
                cc: name,
                loss_pct: loss,
                goodput_bps: rates.clone().sum::<f64>() / runs.len().max(1) as f64,
                min_bps: rates.clone().fold(f64::INFINITY, f64::min),
                max_bps: rates.fold(0.0, f64::max),
                retransmits: runs.iter().map(|r| r.1).sum(),
                timeouts: runs.iter().map(|r| r.2).sum(),
            };
            progress(&format!(
                "loss: {loss}% {name}: {:.2} Mbit/s",
                pt.goodput_bps / 1e6
            ));
            out.push(pt);
        }
    }
    out
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    if let Some(s) = a
        .skip
        .iter()
        .find(|s| !CCS.iter().any(|c| c.0 == s.as_str()))
    {
        return Err(format!(
            "bench loss: --skip: unknown '{s}' (known: cubic, newreno, bbr)"
        ));
    }
    let loss = if a.loss.is_empty() {
        DEFAULT_LOSS.to_vec()
    } else {
        a.loss.clone()
    };
    if let Some(l) = loss.iter().find(|l| !(0.0..=50.0).contains(*l)) {
        return Err(format!("bench loss: --loss: {l} is not 0 to 50 percent"));
    }
    let p = Params {
        loss,
        secs: a.sim_secs,
        rounds: a.rounds,
        ccs: CCS
            .iter()
            .map(|c| c.0)
            .filter(|n| !a.skip.iter().any(|s| s == n))
            .collect(),
    };
    let pts = measure(&p, |m| progress(a, m));
    if let Some(path) = &a.plot {
        plot(path, &p, &pts)?;
    }
    let rtt_ms = 2.0 * ONE_WAY.as_secs_f64() * 1e3;
    if a.json {
        for pt in &pts {
            println!(
                "{{\"bench\":\"loss\",\"cc\":\"{}\",\"loss_pct\":{},\"rtt_ms\":{rtt_ms},\"link_mbps\":{},\"sim_secs\":{},\"seeds\":{},\"goodput_mbps\":{:.3},\"min_mbps\":{:.3},\"max_mbps\":{:.3},\"retransmits\":{},\"timeouts\":{},\"mathis_mbps\":{}}}",
                pt.cc,
                pt.loss_pct,
                RATE_BPS / 1_000_000,
                p.secs,
                p.rounds,
                pt.goodput_bps / 1e6,
                pt.min_bps / 1e6,
                pt.max_bps / 1e6,
                pt.retransmits,
                pt.timeouts,
                fmt_model(pt.loss_pct, "null")
            );
        }
        for &l in &p.loss {
            println!(
                "{{\"bench\":\"loss\",\"model\":\"mathis\",\"loss_pct\":{l},\"rtt_ms\":{rtt_ms},\"mss\":{MSS},\"goodput_mbps\":{}}}",
                fmt_model(l, "null")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "one TCP flow between two mpstack stacks in the simulator: {} Mbit/s each way, {rtt_ms} ms round trip, a queue of one BDP, random loss each way; goodput over {} simulated s, mean of {} seed(s)",
        RATE_BPS / 1_000_000,
        p.secs,
        p.rounds
    );
    println!("mathis: the Mathis et al. model, MSS/RTT * sqrt(3/2)/sqrt(p), MSS 1460, RTT 20 ms: a model, not a measurement");
    println!("rexmt: segments the sender retransmitted, summed over the seeds");
    println!();
    print!("{:>7}", "loss%");
    for cc in &p.ccs {
        print!(" {:>10} {:>7}", format!("{cc} Mb/s"), "rexmt");
    }
    println!(" {:>12}", "mathis Mb/s");
    for &l in &p.loss {
        print!("{l:>7}");
        for cc in &p.ccs {
            match pts.iter().find(|pt| pt.cc == *cc && pt.loss_pct == l) {
                Some(pt) => print!(" {:>10.2} {:>7}", pt.goodput_bps / 1e6, pt.retransmits),
                None => print!(" {:>10} {:>7}", "-", "-"),
            }
        }
        println!(" {:>12}", fmt_model(l, "-"));
    }
    if let Some(path) = &a.plot {
        println!();
        println!("plot: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The model's Mbit/s with two decimals, or `none` where it has no value (no loss).
fn fmt_model(loss_pct: f64, none: &str) -> String {
    let m = mathis_bps(loss_pct);
    if m.is_finite() {
        format!("{:.2}", m / 1e6)
    } else {
        none.into()
    }
}

/// Goodput against loss (categorical: the percentages as given), a line a control,
/// the model dashed, the link rate dashed.
fn plot(path: &std::path::Path, p: &Params, pts: &[Point]) -> Result<(), String> {
    use crate::plot::{lines, Axes, Series};
    let x = |l: f64| p.loss.iter().position(|&v| v == l).unwrap_or(0) as f64;
    let mut series: Vec<Series> = p
        .ccs
        .iter()
        .map(|cc| Series {
            name: format!("mpstack {cc}"),
            points: pts
                .iter()
                .filter(|pt| pt.cc == *cc)
                .map(|pt| (x(pt.loss_pct), pt.goodput_bps / 1e6))
                .collect(),
            reference: false,
        })
        .collect();
    series.push(Series {
        name: "Mathis et al. model (not a measurement)".into(),
        points: p
            .loss
            .iter()
            .map(|&l| (x(l), mathis_bps(l) / 1e6))
            .collect(),
        reference: true,
    });
    lines(
        path,
        &Axes {
            title: format!(
                "TCP goodput against loss: {} Mbit/s, {} ms RTT, simulated",
                RATE_BPS / 1_000_000,
                2 * ONE_WAY.as_millis()
            ),
            x_desc: "random loss each way, %".into(),
            y_desc: "goodput, Mbit/s".into(),
            x_labels: Some(p.loss.iter().map(|l| l.to_string()).collect()),
        },
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_costs_goodput_and_the_model_falls_with_the_square_root() {
        let p = Params {
            loss: vec![0.0, 5.0],
            secs: 0.5,
            rounds: 1,
            ccs: vec!["cubic", "bbr"],
        };
        let pts = measure(&p, |_| {});
        assert_eq!(pts.len(), 4);
        let at = |cc: &str, l: f64| {
            pts.iter()
                .find(|pt| pt.cc == cc && pt.loss_pct == l)
                .unwrap()
                .goodput_bps
        };
        for cc in ["cubic", "bbr"] {
            assert!(at(cc, 0.0) > 0.0 && at(cc, 0.0) <= RATE_BPS as f64, "{cc}");
        }
        assert!(at("cubic", 5.0) < at("cubic", 0.0), "{pts:?}");
        assert!(mathis_bps(0.0).is_infinite());
        let ratio = mathis_bps(1.0) / mathis_bps(4.0);
        assert!((ratio - 2.0).abs() < 1e-9);
    }
}
