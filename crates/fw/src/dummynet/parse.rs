//! The ipfw(8) text of dummynet's commands, and back: `pipe N config ...`,
//! `queue N config ...`, `sched N config type ...`, `pipe N delete`, `queue N delete`
//! (a leading `ipfw` is allowed). Display writes a configuration in the same syntax,
//! leaving out what is at its default, so that parse → display → parse gives it back.
//!
//! Units (ipfw's `read_bandwidth`, with its decimal K/M/G): `bw N[K|M|G](bit/s|Byte/s)`,
//! also `bps`, `B/s`, `Bps`, or nothing for bit/s. `delay N` in ms, or with a suffix
//! `ms`, `us`, `ns`, `s` (an extension, so any `Duration` of nanoseconds round-trips).
//! `queue N` slots or `N[K|M]Bytes` (also `B`, `bytes`, `KB`; K is 1024). `burst N[K|M|G][B]`
//! (1024-based, as `expand_number`). `plr` a decimal in 0..=1. Numbers take a `0x`
//! prefix, as `strtoul(.., 0)`. `mask` takes `all`, `src-ip M`, `dst-ip M` (M a
//! contiguous mask `0xffffff00` or `/24`), `src-ip6`, `dst-ip6` (`/64` or an IPv6
//! mask), `src-port M`, `dst-port M`, `proto M`.
//!
//! What it owns: the grammar and the errors, each naming the column (1-based, in
//! characters) where it went wrong and what it expected there.

use super::{
    FlowMask, PipeConfig, QueueConfig, QueueLimit, SchedKind, DEFAULT_BUCKETS, DEFAULT_QUEUE,
    MAX_BUCKETS, MAX_NUMBER,
};
use std::fmt;
use std::net::Ipv6Addr;
use std::time::Duration;

/// A parsed command.
#[derive(Clone, Debug, PartialEq)]
pub enum DnCommand {
    /// `pipe N config ...`
    Pipe(u32, PipeConfig),
    /// `queue N config ...`
    Queue(u32, QueueConfig),
    /// `sched N config type ...`: pipe N's scheduler.
    Sched(u32, SchedKind),
    /// `pipe N delete`
    DeletePipe(u32),
    /// `queue N delete`
    DeleteQueue(u32),
}

/// Where the text went wrong: the rules' error ([`crate::ParseError`]), line 1 (a
/// caller reading a file sets the line), the 1-based column of the offending word
/// (or one past the end of the line), what was expected there and what was found.
pub use crate::parse::ParseError;

fn at_end(column: usize, expected: &str) -> ParseError {
    ParseError {
        line: 1,
        col: column,
        expected: expected.to_string(),
        found: ParseError::found_text(""),
    }
}

struct Words<'a> {
    words: Vec<(usize, &'a str)>,
    next: usize,
    end: usize,
}

type Word<'a> = (usize, &'a str);

fn err(w: Word<'_>, expected: &'static str) -> ParseError {
    ParseError {
        line: 1,
        col: w.0,
        expected: expected.to_string(),
        found: ParseError::found_text(w.1),
    }
}

impl<'a> Words<'a> {
    fn new(line: &'a str) -> Self {
        let mut words = Vec::new();
        let mut start = None;
        let mut col = 0;
        for (col0, (i, c)) in line.char_indices().enumerate() {
            col = col0 + 1;
            match (c.is_whitespace(), start) {
                (false, None) => start = Some((col, i)),
                (true, Some((sc, si))) => {
                    words.push((sc, &line[si..i]));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some((sc, si)) = start {
            words.push((sc, &line[si..]));
        }
        Words {
            words,
            next: 0,
            end: col + 1,
        }
    }

    fn peek(&self) -> Option<Word<'a>> {
        self.words.get(self.next).copied()
    }

    /// The next word; at the end of the line, an error expecting `what`.
    fn want(&mut self, what: &'static str) -> Result<Word<'a>, ParseError> {
        let w = self.peek().ok_or_else(|| at_end(self.end, what))?;
        self.next += 1;
        Ok(w)
    }

    fn end_col(&self) -> usize {
        self.end
    }
}

/// Parses one dummynet command as ipfw(8) writes it.
pub fn parse_config(line: &str) -> Result<DnCommand, ParseError> {
    let mut w = Words::new(line);
    if w.peek().is_some_and(|x| x.1 == "ipfw") {
        w.next += 1;
    }
    let what = w.want("'pipe', 'queue' or 'sched'")?;
    if !matches!(what.1, "pipe" | "queue" | "sched") {
        return Err(err(what, "'pipe', 'queue' or 'sched'"));
    }
    let nw = w.want("a number in 1..65535")?;
    let n = number(nw)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=MAX_NUMBER).contains(n))
        .ok_or_else(|| err(nw, "a number in 1..65535"))?;
    let verb = w.want("'config' or 'delete'")?;
    let cmd = match (what.1, verb.1) {
        ("pipe", "delete") => DnCommand::DeletePipe(n),
        ("queue", "delete") => DnCommand::DeleteQueue(n),
        ("pipe", "config") => DnCommand::Pipe(n, pipe_options(&mut w)?),
        ("queue", "config") => DnCommand::Queue(n, queue_options(&mut w)?),
        ("sched", "config") => DnCommand::Sched(n, sched_options(&mut w)?),
        ("sched", _) => return Err(err(verb, "'config'")),
        _ => return Err(err(verb, "'config' or 'delete'")),
    };
    match w.peek() {
        Some(x) => Err(err(x, "the end of the line")),
        None => Ok(cmd),
    }
}

pub(super) const PIPE_OPTION: &str = "a pipe option (bw, delay, plr, queue, burst, type)";
const QUEUE_OPTION: &str = "a queue option (pipe, weight, mask, queue, buckets)";
const MASK_FIELD: &str =
    "a mask field (all, src-ip, dst-ip, src-ip6, dst-ip6, src-port, dst-port, proto)";

fn pipe_options(w: &mut Words<'_>) -> Result<PipeConfig, ParseError> {
    let mut c = PipeConfig::default();
    while let Some(opt) = w.peek() {
        w.next += 1;
        match opt.1 {
            "bw" | "bandwidth" => c.bandwidth = bandwidth(w.want(BW)?)?,
            "delay" => c.delay = delay(w.want(DELAY)?)?,
            "plr" => c.plr = plr(w.want(PLR)?)?,
            "queue" => c.queue = queue_limit(w.want(QUEUE)?)?,
            "burst" => c.burst = burst(w.want(BURST)?)?,
            "type" | "sched" => c.sched = sched_kind(w.want(KIND)?)?,
            _ => return Err(err(opt, PIPE_OPTION)),
        }
    }
    Ok(c)
}

fn queue_options(w: &mut Words<'_>) -> Result<QueueConfig, ParseError> {
    let mut c = QueueConfig::new(0);
    let mut pipe = None;
    while let Some(opt) = w.peek() {
        w.next += 1;
        match opt.1 {
            "pipe" | "sched" => {
                let x = w.want("a pipe number in 1..65535")?;
                let n = number(x)
                    .ok()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| (1..=MAX_NUMBER).contains(n))
                    .ok_or_else(|| err(x, "a pipe number in 1..65535"))?;
                pipe = Some(n);
            }
            "weight" => {
                let x = w.want("a weight in 1..100")?;
                c.weight = number(x)
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| err(x, "a weight in 1..100"))? as u32;
            }
            "queue" => c.queue = queue_limit(w.want(QUEUE)?)?,
            "buckets" => {
                let x = w.want("a bucket count in 1..65536")?;
                c.buckets = number(x)
                    .ok()
                    .filter(|n| (1..=u64::from(MAX_BUCKETS)).contains(n))
                    .ok_or_else(|| err(x, "a bucket count in 1..65536"))?
                    as u32;
            }
            "mask" => c.mask = mask(w)?,
            _ => return Err(err(opt, QUEUE_OPTION)),
        }
    }
    c.pipe = pipe.ok_or_else(|| at_end(w.end_col(), "'pipe N' (the pipe this queue feeds)"))?;
    Ok(c)
}

fn sched_options(w: &mut Words<'_>) -> Result<SchedKind, ParseError> {
    let mut kind = SchedKind::default();
    while let Some(opt) = w.peek() {
        w.next += 1;
        match opt.1 {
            "type" => kind = sched_kind(w.want(KIND)?)?,
            _ => return Err(err(opt, "'type'")),
        }
    }
    Ok(kind)
}

const IP4: &str = "a contiguous IPv4 mask like 0xffffff00 or /24";
const IP6: &str = "an IPv6 prefix length like /64, or a contiguous IPv6 mask";

fn mask(w: &mut Words<'_>) -> Result<FlowMask, ParseError> {
    let mut m = FlowMask::NONE;
    let mut any = false;
    while let Some(f) = w.peek() {
        if !matches!(
            f.1,
            "all" | "src-ip" | "dst-ip" | "src-ip6" | "dst-ip6" | "src-port" | "dst-port" | "proto"
        ) {
            break;
        }
        w.next += 1;
        any = true;
        match f.1 {
            "all" => m = FlowMask::ALL,
            "src-ip" => m.src_ip = ip4_mask(w.want(IP4)?)?,
            "dst-ip" => m.dst_ip = ip4_mask(w.want(IP4)?)?,
            "src-ip6" => m.src_ip6 = ip6_mask(w.want(IP6)?)?,
            "dst-ip6" => m.dst_ip6 = ip6_mask(w.want(IP6)?)?,
            "src-port" => m.src_port = port_mask(w.want(PORT)?)?,
            "dst-port" => m.dst_port = port_mask(w.want(PORT)?)?,
            _ => {
                let x = w.want("a protocol mask like 0xff")?;
                m.proto = number(x)
                    .ok()
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(|| err(x, "a protocol mask like 0xff"))?;
            }
        }
    }
    if !any {
        let x = w.want(MASK_FIELD)?;
        return Err(err(x, MASK_FIELD));
    }
    Ok(m)
}

const PORT: &str = "a port mask like 0xffff";

fn port_mask(x: Word<'_>) -> Result<u16, ParseError> {
    number(x)
        .ok()
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| err(x, PORT))
}

fn prefix_len(x: Word<'_>, max: u32) -> Option<u8> {
    let n: u32 = x.1.strip_prefix('/')?.parse().ok()?;
    (n <= max).then_some(n as u8)
}

fn ip4_mask(x: Word<'_>) -> Result<u8, ParseError> {
    if x.1.starts_with('/') {
        return prefix_len(x, 32).ok_or_else(|| err(x, IP4));
    }
    let m = number(x)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| err(x, IP4))?;
    let len = m.leading_ones();
    if m != u32::MAX.checked_shl(32 - len).unwrap_or(0) {
        return Err(err(x, IP4));
    }
    Ok(len as u8)
}

fn ip6_mask(x: Word<'_>) -> Result<u8, ParseError> {
    if x.1.starts_with('/') {
        return prefix_len(x, 128).ok_or_else(|| err(x, IP6));
    }
    let m = u128::from(x.1.parse::<Ipv6Addr>().map_err(|_| err(x, IP6))?);
    let len = m.leading_ones();
    if m != u128::MAX.checked_shl(128 - len).unwrap_or(0) {
        return Err(err(x, IP6));
    }
    Ok(len as u8)
}

/// ipfw's numbers: decimal, or hexadecimal after `0x`.
fn number(x: Word<'_>) -> Result<u64, ()> {
    let s = x.1;
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(h, 16).map_err(|_| ())
        }
        Some(_) => Err(()),
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().map_err(|_| ()),
        None => Err(()),
    }
}

/// Splits `12Mbit/s` into 12 and `Mbit/s`.
fn split_number(s: &str) -> Option<(u64, &str)> {
    let i = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Some((s[..i].parse().ok()?, &s[i..]))
}

const BW: &str = "a bandwidth like 10Mbit/s, 512Kbit/s or 1MByte/s";

fn bandwidth(x: Word<'_>) -> Result<u64, ParseError> {
    let (n, rest) = split_number(x.1).ok_or_else(|| err(x, BW))?;
    let (mul, unit) = match rest.as_bytes().first() {
        Some(b'K' | b'k') => (1_000, &rest[1..]),
        Some(b'M' | b'm') => (1_000_000, &rest[1..]),
        Some(b'G' | b'g') => (1_000_000_000, &rest[1..]),
        _ => (1, rest),
    };
    let lower = unit.to_ascii_lowercase();
    let bytes = if matches!(unit, "" | "bps" | "b/s") || matches!(&*lower, "bit/s" | "bits/s") {
        false
    } else if matches!(unit, "B/s" | "Bps" | "B") || matches!(&*lower, "byte/s" | "bytes/s") {
        true
    } else {
        return Err(err(x, BW));
    };
    n.checked_mul(mul)
        .and_then(|b| if bytes { b.checked_mul(8) } else { Some(b) })
        .ok_or_else(|| err(x, BW))
}

const DELAY: &str = "a delay in ms, like 20 or 20ms (or with us, ns, s)";

fn delay(x: Word<'_>) -> Result<Duration, ParseError> {
    let (n, unit) = split_number(x.1).ok_or_else(|| err(x, DELAY))?;
    Ok(match unit {
        "" | "ms" => Duration::from_millis(n),
        "us" => Duration::from_micros(n),
        "ns" => Duration::from_nanos(n),
        "s" => Duration::from_secs(n),
        _ => return Err(err(x, DELAY)),
    })
}

const PLR: &str = "a loss probability in 0..1, like 0.01";

fn plr(x: Word<'_>) -> Result<f64, ParseError> {
    x.1.parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| err(x, PLR))
}

const QUEUE: &str = "a queue size in slots, like 50, or in bytes, like 20Kbytes";

fn queue_limit(x: Word<'_>) -> Result<QueueLimit, ParseError> {
    let (n, unit) = split_number(x.1).ok_or_else(|| err(x, QUEUE))?;
    let lim = match &*unit.to_ascii_lowercase() {
        "" => Some(QueueLimit::Slots(n as usize)),
        "b" | "byte" | "bytes" => Some(QueueLimit::Bytes(n as usize)),
        "k" | "kb" | "kbyte" | "kbytes" => n
            .checked_mul(1 << 10)
            .map(|b| QueueLimit::Bytes(b as usize)),
        "m" | "mb" | "mbyte" | "mbytes" => n
            .checked_mul(1 << 20)
            .map(|b| QueueLimit::Bytes(b as usize)),
        _ => None,
    };
    lim.filter(|l| l.is_valid()).ok_or_else(|| err(x, QUEUE))
}

const BURST: &str = "a burst size in bytes, like 100KB";

fn burst(x: Word<'_>) -> Result<u64, ParseError> {
    let (n, unit) = split_number(x.1).ok_or_else(|| err(x, BURST))?;
    let shift = match &*unit.to_ascii_lowercase() {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        _ => return Err(err(x, BURST)),
    };
    n.checked_mul(1 << shift).ok_or_else(|| err(x, BURST))
}

const KIND: &str = "a scheduler type: fifo or wf2q+ (qfq, rr and prio are not implemented)";

fn sched_kind(x: Word<'_>) -> Result<SchedKind, ParseError> {
    match &*x.1.to_ascii_lowercase() {
        "fifo" => Ok(SchedKind::Fifo),
        "wf2q+" | "wf2qp" | "wf2q" => Ok(SchedKind::Wf2q),
        _ => Err(err(x, KIND)),
    }
}

/// The largest unit of `units` (`(divisor, suffix)`, largest first) that divides `n`.
fn scaled(n: u64, units: &[(u64, &'static str)]) -> (u64, &'static str) {
    units
        .iter()
        .find(|(d, _)| n.is_multiple_of(*d))
        .map_or((n, ""), |&(d, s)| (n / d, s))
}

impl fmt::Display for PipeConfig {
    /// The options of `pipe N config`, defaults left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        let mut word = |f: &mut fmt::Formatter<'_>, a: fmt::Arguments<'_>| {
            let r = write!(f, "{sep}{a}");
            sep = " ";
            r
        };
        if self.bandwidth != 0 {
            let (n, u) = scaled(
                self.bandwidth,
                &[
                    (1_000_000_000, "Gbit/s"),
                    (1_000_000, "Mbit/s"),
                    (1_000, "Kbit/s"),
                    (1, "bit/s"),
                ],
            );
            word(f, format_args!("bw {n}{u}"))?;
        }
        if !self.delay.is_zero() {
            let ns = self.delay.as_nanos();
            if ns.is_multiple_of(1_000_000) {
                word(f, format_args!("delay {}ms", ns / 1_000_000))?;
            } else if ns.is_multiple_of(1_000) {
                word(f, format_args!("delay {}us", ns / 1_000))?;
            } else {
                word(f, format_args!("delay {ns}ns"))?;
            }
        }
        if self.plr != 0.0 {
            word(f, format_args!("plr {}", self.plr))?;
        }
        if self.queue != DEFAULT_QUEUE {
            word(f, format_args!("queue {}", self.queue))?;
        }
        if self.burst != 0 {
            let (n, u) = scaled(
                self.burst,
                &[(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB"), (1, "")],
            );
            word(f, format_args!("burst {n}{u}"))?;
        }
        if self.sched != SchedKind::default() {
            word(f, format_args!("type {}", self.sched))?;
        }
        Ok(())
    }
}

impl fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QueueLimit::Slots(n) => write!(f, "{n}"),
            QueueLimit::Bytes(b) => {
                let (n, u) = scaled(
                    b as u64,
                    &[(1 << 20, "MBytes"), (1 << 10, "KBytes"), (1, "Bytes")],
                );
                write!(f, "{n}{u}")
            }
        }
    }
}

impl fmt::Display for SchedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchedKind::Fifo => "fifo",
            SchedKind::Wf2q => "wf2q+",
        })
    }
}

impl fmt::Display for FlowMask {
    /// The fields after `mask`, unmasked ones left out (empty for [`FlowMask::NONE`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let m4 = |len: u8| u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        if self.src_ip != 0 {
            parts.push(format!("src-ip 0x{:08x}", m4(self.src_ip)));
        }
        if self.dst_ip != 0 {
            parts.push(format!("dst-ip 0x{:08x}", m4(self.dst_ip)));
        }
        if self.src_ip6 != 0 {
            parts.push(format!("src-ip6 /{}", self.src_ip6));
        }
        if self.dst_ip6 != 0 {
            parts.push(format!("dst-ip6 /{}", self.dst_ip6));
        }
        if self.src_port != 0 {
            parts.push(format!("src-port 0x{:04x}", self.src_port));
        }
        if self.dst_port != 0 {
            parts.push(format!("dst-port 0x{:04x}", self.dst_port));
        }
        if self.proto != 0 {
            parts.push(format!("proto 0x{:02x}", self.proto));
        }
        f.write_str(&parts.join(" "))
    }
}

impl fmt::Display for QueueConfig {
    /// The options of `queue N config`, defaults left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pipe {}", self.pipe)?;
        if self.weight != 1 {
            write!(f, " weight {}", self.weight)?;
        }
        if self.mask != FlowMask::NONE {
            write!(f, " mask {}", self.mask)?;
        }
        if self.queue != DEFAULT_QUEUE {
            write!(f, " queue {}", self.queue)?;
        }
        if self.buckets != DEFAULT_BUCKETS {
            write!(f, " buckets {}", self.buckets)?;
        }
        Ok(())
    }
}

impl fmt::Display for DnCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnCommand::Pipe(n, c) => {
                write!(f, "pipe {n} config")?;
                let opts = c.to_string();
                if !opts.is_empty() {
                    write!(f, " {opts}")?;
                }
                Ok(())
            }
            DnCommand::Queue(n, c) => write!(f, "queue {n} config {c}"),
            DnCommand::Sched(n, k) => write!(f, "sched {n} config type {k}"),
            DnCommand::DeletePipe(n) => write!(f, "pipe {n} delete"),
            DnCommand::DeleteQueue(n) => write!(f, "queue {n} delete"),
        }
    }
}
