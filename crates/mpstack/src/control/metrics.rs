//! `mpstack run --metrics ADDR:PORT`: the node's counters in Prometheus's text
//! exposition format (version 0.0.4), served over HTTP by the host's own sockets
//! (not the stack's) at `/metrics`: every counter of `netstat -s` (one metric each,
//! `mpstack_<group>_<name>_total`), each stage's runtime (`mpstack_stage_*_total`
//! by stage, VPP's `show runtime`), each interface's packets and bytes, and the
//! routes per family. Off unless asked for; scrapes served at once up to a bound,
//! each bounded in size and, as a whole, in time; none delays the node's exit.
//!
//! What it owns: the listener and the format. What it may call: the stack's
//! counters.

use super::cmds::Node;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes of a request read at most.
const MAX_REQUEST: usize = 8192;

/// A label value, escaped as the format asks.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The exposition: every metric with its HELP and TYPE.
pub fn exposition(node: &Node<'_>, name: &str) -> String {
    let mut s = String::new();
    let n = esc(name);
    let st = node.stack.stats();
    st.for_each(|g, c, v| {
        let m = format!("mpstack_{g}_{c}_total");
        let _ = writeln!(s, "# HELP {m} netstat -s counter {g}.{c}");
        let _ = writeln!(s, "# TYPE {m} counter");
        let _ = writeln!(s, "{m}{{node=\"{n}\"}} {v}");
    });
    let rt = node.stack.runtime();
    for (what, help) in [
        ("calls", "times the stage ran"),
        ("vectors", "times the stage ran with packets"),
        ("packets", "packets through the stage"),
        ("cycles", "time-stamp counter ticks spent in the stage"),
    ] {
        let m = format!("mpstack_stage_{what}_total");
        let _ = writeln!(s, "# HELP {m} {help}");
        let _ = writeln!(s, "# TYPE {m} counter");
        for (stage, t) in rt.iter() {
            let v = match what {
                "calls" => t.calls,
                "vectors" => t.vectors,
                "packets" => t.packets,
                _ => t.cycles,
            };
            let _ = writeln!(s, "{m}{{node=\"{n}\",stage=\"{}\"}} {v}", stage.name());
        }
    }
    let ifs = node.stack.interfaces();
    let mut per_if = vec![dev::QueueStats::default(); ifs.len()];
    for (_, ifx, q) in node.stack.queue_stats() {
        if let Some(t) = per_if.get_mut(ifx.get()) {
            *t += q;
        }
    }
    type Get = fn(&dev::QueueStats) -> u64;
    let fields: [(&str, &str, Get); 8] = [
        ("receive_packets", "packets received", |q| q.ipackets),
        ("receive_bytes", "bytes received", |q| q.ibytes),
        (
            "receive_drops",
            "frames the device dropped on receive",
            |q| q.idrops,
        ),
        ("receive_errors", "receive errors", |q| q.ierrors),
        ("transmit_packets", "packets sent", |q| q.opackets),
        ("transmit_bytes", "bytes sent", |q| q.obytes),
        (
            "transmit_drops",
            "frames the device dropped on transmit",
            |q| q.odrops,
        ),
        ("transmit_errors", "transmit errors", |q| q.oerrors),
    ];
    for (f, help, get) in fields {
        let m = format!("mpstack_interface_{f}_total");
        let _ = writeln!(s, "# HELP {m} {help}, per interface");
        let _ = writeln!(s, "# TYPE {m} counter");
        for (i, q) in ifs.iter().zip(&per_if) {
            let _ = writeln!(
                s,
                "{m}{{node=\"{n}\",interface=\"{}\"}} {}",
                esc(&i.name),
                get(q)
            );
        }
    }
    let (r4, r6) = node.stack.route_counts();
    let _ = writeln!(s, "# HELP mpstack_routes routes in the table, per family");
    let _ = writeln!(s, "# TYPE mpstack_routes gauge");
    for (fam, k) in [("inet", r4), ("inet6", r6)] {
        let _ = writeln!(s, "mpstack_routes{{node=\"{n}\",family=\"{fam}\"}} {k}");
    }
    if let Some(f) = node.fpm {
        let f = *f.lock().unwrap_or_else(|e| e.into_inner());
        for (c, v) in f.fields() {
            let (m, kind) = match c {
                "connected" | "routes" | "last_commit_ns" | "pending" => {
                    (format!("mpstack_fpm_{c}"), "gauge")
                }
                _ => (format!("mpstack_fpm_{c}_total"), "counter"),
            };
            let _ = writeln!(s, "# HELP {m} the routing daemon's feed (--fpm): {c}");
            let _ = writeln!(s, "# TYPE {m} {kind}");
            let _ = writeln!(s, "{m}{{node=\"{n}\"}} {v}");
        }
    }
    s
}

/// Binds the metrics listener (before the node starts, so a taken port stops it).
pub fn listen(addr: &str) -> Result<TcpListener, String> {
    let a: std::net::SocketAddr = addr
        .parse()
        .map_err(|_| format!("--metrics '{addr}': expected ADDRESS:PORT, e.g. 127.0.0.1:9100"))?;
    let l = TcpListener::bind(a).map_err(|e| format!("--metrics {a}: {e}"))?;
    l.set_nonblocking(true)
        .map_err(|e| format!("--metrics {a}: {e}"))?;
    Ok(l)
}

/// Scrapes served at once; one more is answered `503` at once.
pub const MAX_SCRAPES: usize = 8;
/// Time a scraper has, from its connect, to send its request.
pub const REQUEST_TIME: Duration = Duration::from_secs(2);
/// Time a scrape has, from its connect, to send its request and take its whole
/// answer.
pub const SCRAPE_TIME: Duration = Duration::from_secs(5);

/// Answers scrapes until `stop`: each on a thread of its own, at most
/// [`MAX_SCRAPES`] at once, each under a deadline for the whole request and the
/// whole answer (not for each read or write, which a scraper sending a byte now
/// and then would stretch for ever). On `stop` the scrapes still running are cut
/// (`shutdown(2)`), so none delays the node's exit.
pub fn serve(l: &TcpListener, node: &Node<'_>, name: &str, stop: &AtomicBool) {
    let sessions: super::Sessions<TcpStream> = super::Sessions::new(MAX_SCRAPES);
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut c, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            if sessions.full() {
                let _ = c.set_nonblocking(true);
                let _ = c.write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            }
            let _ = c.set_nonblocking(false);
            sessions.spawn(s, c, move |c| scrape(c, node, name));
        }
        sessions.cut_all();
    });
}

/// Time left until `until`, or a timed-out error.
fn left(until: Instant) -> std::io::Result<Duration> {
    let d = until.saturating_duration_since(Instant::now());
    if d.is_zero() {
        return Err(std::io::ErrorKind::TimedOut.into());
    }
    Ok(d)
}

/// Answers one scrape.
fn scrape(mut c: TcpStream, node: &Node<'_>, name: &str) {
    let t0 = Instant::now();
    let (read_by, done_by) = (t0 + REQUEST_TIME, t0 + SCRAPE_TIME);
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while req.len() < MAX_REQUEST && !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let Ok(d) = left(read_by) else { return };
        let _ = c.set_read_timeout(Some(d));
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => req.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
    let line = req.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_string(),
        )
    } else if path == "/metrics" || path.starts_with("/metrics?") {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            exposition(node, name),
        )
    } else {
        (
            "404 Not Found",
            "text/plain",
            "the metrics are at /metrics\n".to_string(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = head.into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    let mut at = 0;
    while at < out.len() {
        let Ok(d) = left(done_by) else { return };
        let _ = c.set_write_timeout(Some(d));
        match c.write(&out[at..]) {
            Ok(0) => return,
            Ok(k) => at += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
