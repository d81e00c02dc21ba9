//! The ipfw(8) rule language → [`Rule`]. Words are split at white space, and `{`/`}`
//! stand alone even when glued to a word; lists (`22,80`, `a,b`) and `table(x,1)`
//! are sub-parsed inside their word. Every error names the line, the column (1-based,
//! in characters) and what was expected, as `LINE:COL: expected X, found Y` — the
//! one shape of every ipfw error here: rules, tables, dummynet's pipes and queues,
//! and the commands that fail after they parse ([`crate::CmdError`]). A file's
//! loader puts the file's name in front (`rules.fw:3:18: ...`).

use crate::rule::*;
use crate::state::LimitMask;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A parse error: where, what was expected, and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub expected: String,
    pub found: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: expected {}, found {}",
            self.line, self.col, self.expected, self.found
        )
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// What `found` says of a word, or of the end of the line (`word` empty).
    pub(crate) fn found_text(word: &str) -> String {
        if word.is_empty() {
            "the end of the line".to_string()
        } else {
            format!("'{word}'")
        }
    }
}

/// Something a rule names that must exist when it is added: a pipe, a queue, a
/// table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ref {
    Pipe(u32),
    Queue(u32),
    Table(String),
}

/// `line` up to its comment (a `#` that starts a word), as [`tokenize`] reads it.
pub(crate) fn strip_comment(line: &str) -> &str {
    let mut in_word = false;
    for (b, c) in line.char_indices() {
        if c == '#' && !in_word {
            return &line[..b];
        }
        in_word = !(c.is_whitespace() || c == '{' || c == '}');
    }
    line
}

#[derive(Clone, Debug)]
pub(crate) struct Tok<'a> {
    pub text: &'a str,
    pub col: usize,
}

/// Splits one line (without its newline) into words; `#` starts a comment.
pub(crate) fn tokenize(line: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, col)
    let mut col = 0;
    for (b, c) in line.char_indices() {
        col += 1;
        if c == '#' && start.is_none() {
            break;
        }
        let brace = c == '{' || c == '}';
        if c.is_whitespace() || brace {
            if let Some((s, sc)) = start.take() {
                out.push(Tok {
                    text: &line[s..b],
                    col: sc,
                });
            }
            if brace {
                out.push(Tok {
                    text: &line[b..b + 1],
                    col,
                });
            }
        } else if start.is_none() {
            start = Some((b, col));
        }
    }
    if let Some((s, sc)) = start {
        out.push(Tok {
            text: &line[s..],
            col: sc,
        });
    }
    out
}

/// A cursor over one line's words.
#[derive(Debug)]
pub(crate) struct Parser<'a> {
    pub toks: Vec<Tok<'a>>,
    pub pos: usize,
    pub line: usize,
    end_col: usize,
    /// The pipes, queues and tables the rule names, each with the column of its
    /// first mention (for the errors of [`crate::Ruleset`]'s checks).
    pub refs: Vec<(Ref, usize)>,
}

type PResult<T> = Result<T, ParseError>;

impl<'a> Parser<'a> {
    pub fn new(text: &'a str, line: usize) -> Self {
        Parser {
            toks: tokenize(text),
            pos: 0,
            line,
            end_col: text.chars().count() + 1,
            refs: Vec::new(),
        }
    }

    /// Notes that the word just taken names `r`.
    fn note(&mut self, r: Ref) {
        let col = self.toks.get(self.pos.wrapping_sub(1)).map_or(0, |t| t.col);
        if !self.refs.iter().any(|(x, _)| *x == r) {
            self.refs.push((r, col));
        }
    }

    /// The column of word `i`, or one past the end of the line.
    pub fn col_of(&self, i: usize) -> usize {
        self.toks.get(i).map_or(self.end_col, |t| t.col)
    }

    pub fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.text)
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub fn err<T>(&self, expected: &str) -> PResult<T> {
        Err(self.error(expected))
    }

    pub fn error(&self, expected: &str) -> ParseError {
        let (col, found) = match self.toks.get(self.pos) {
            Some(t) => (t.col, ParseError::found_text(t.text)),
            None => (self.end_col, ParseError::found_text("")),
        };
        ParseError {
            line: self.line,
            col,
            expected: expected.to_string(),
            found,
        }
    }

    /// The next word, or an error expecting `what`.
    pub fn next(&mut self, what: &str) -> PResult<&'a str> {
        match self.peek() {
            Some(t) => {
                self.pos += 1;
                Ok(t)
            }
            None => self.err(what),
        }
    }

    pub fn eat(&mut self, word: &str) -> bool {
        if self.peek() == Some(word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub fn expect(&mut self, word: &str) -> PResult<()> {
        if self.eat(word) {
            Ok(())
        } else {
            self.err(&format!("'{word}'"))
        }
    }

    /// Parses the current word with `f`, or fails expecting `what` at it.
    pub fn word<T>(&mut self, what: &str, f: impl FnOnce(&str) -> Option<T>) -> PResult<T> {
        match self.peek().and_then(f) {
            Some(v) => {
                self.pos += 1;
                Ok(v)
            }
            None => self.err(what),
        }
    }

    pub fn number<T: TryFrom<u64>>(&mut self, what: &str) -> PResult<T> {
        self.word(what, |w| {
            w.parse::<u64>().ok().and_then(|n| T::try_from(n).ok())
        })
    }

    pub fn end(&self) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            self.err("the end of the rule")
        }
    }
}

/// Parses one rule (`[num] [set N] [prob p] ACTION ...`, no leading `add`) given as
/// line `line` of its source.
pub fn parse_rule(text: &str, line: usize) -> Result<Rule, ParseError> {
    let mut p = Parser::new(text, line);
    let r = rule(&mut p)?;
    p.end()?;
    Ok(r)
}

pub(crate) fn rule(p: &mut Parser<'_>) -> PResult<Rule> {
    let num = match p.peek() {
        Some(w) if w.bytes().all(|b| b.is_ascii_digit()) => {
            p.number::<u16>("a rule number (1-65534)")?
        }
        _ => 0,
    };
    if num == DEFAULT_RULE {
        p.pos -= 1;
        return p.err("a rule number (1-65534)");
    }
    let mut set = 0;
    if p.eat("set") {
        set = p.word("a set number (0-31)", |w| {
            w.parse::<u8>().ok().filter(|&s| s < SETS)
        })?;
    }
    let mut prob = None;
    if p.eat("prob") {
        prob = Some(p.word("a probability in (0, 1]", |w| {
            let x = w.parse::<f64>().ok()?;
            (x > 0.0 && x <= 1.0).then(|| ((x * PROB_ONE as f64).round() as u32).max(1))
        })?);
    }
    let action = action(p)?;
    let log = p.eat("log");
    let mut log_amount = 0;
    if log && p.eat("logamount") {
        log_amount = p.word("a number of log lines (1 to 65535)", |w| {
            w.parse::<u32>().ok().filter(|n| (1..=65535).contains(n))
        })?;
    }
    // ipfw(8) takes `check-state` alone: it matches every packet's state.
    let mut all = Parser::new("ip from any to any", p.line);
    let body = if p.at_end() && matches!(action, Action::CheckState) {
        &mut all
    } else {
        &mut *p
    };
    let proto = proto(body)?;
    body.expect("from")?;
    let src = endpoint(body)?;
    body.expect("to")?;
    let dst = endpoint(body)?;
    let mut opts = Vec::new();
    while !p.at_end() {
        if p.eat("{") {
            let mut block = vec![opt(p)?];
            while p.eat("or") {
                block.push(opt(p)?);
            }
            p.expect("}")?;
            if block.iter().any(|o| o.kind.is_modifier()) {
                p.pos -= 1;
                return p.err("only match options inside '{ ... or ... }'");
            }
            opts.push(block);
        } else {
            let start = p.pos;
            let o = opt(p)?;
            if o.not && o.kind.is_modifier() {
                p.pos = start;
                return p.err("an option that can be negated");
            }
            opts.push(vec![o]);
        }
    }
    Ok(Rule {
        num,
        set,
        prob,
        action,
        log,
        log_amount,
        proto,
        src,
        dst,
        opts,
    })
}

fn arg(p: &mut Parser<'_>, what: &str) -> PResult<Arg> {
    if p.eat("tablearg") {
        return Ok(Arg::Tablearg);
    }
    p.word(what, |w| w.parse::<u32>().ok().map(Arg::Num))
}

fn action(p: &mut Parser<'_>) -> PResult<Action> {
    const WHAT: &str = "an action (allow, deny, reject, unreach, reset, count, skipto, call, \
                        return, check-state, pipe, queue, fwd)";
    let w = p.next(WHAT)?;
    Ok(match w {
        "allow" | "accept" | "pass" | "permit" => Action::Allow,
        "deny" | "drop" => Action::Deny,
        "reject" => Action::Reject,
        "unreach" => Action::Unreach(unreach_code(p, false)?),
        "unreach6" => Action::Unreach6(unreach_code(p, true)?),
        "reset" => Action::Reset,
        "count" => Action::Count,
        "skipto" => Action::Skipto(arg(p, "a rule number or 'tablearg'")?),
        "call" => Action::Call(p.number("a rule number")?),
        "return" => Action::Return,
        "check-state" => Action::CheckState,
        "pipe" => {
            let a = arg(p, "a pipe number or 'tablearg'")?;
            if let Arg::Num(n) = a {
                p.note(Ref::Pipe(n));
            }
            Action::Pipe(a)
        }
        "queue" => {
            let a = arg(p, "a queue number or 'tablearg'")?;
            if let Arg::Num(n) = a {
                p.note(Ref::Queue(n));
            }
            Action::Queue(a)
        }
        "fwd" | "forward" => fwd_addr(p)?,
        _ => {
            p.pos -= 1;
            return p.err(WHAT);
        }
    })
}

/// `fwd`'s operand, `ADDR[,PORT]` as ipfw(8) writes it (the comma also for IPv6,
/// whose address has colons): a unicast next hop of either family.
fn fwd_addr(p: &mut Parser<'_>) -> PResult<Action> {
    p.word("a next-hop address (ADDR[,PORT])", |w| {
        let (a, port) = match w.split_once(',') {
            Some((a, port)) => (a, Some(port.parse::<u16>().ok()?)),
            None => (w, None),
        };
        let a: IpAddr = a.parse().ok()?;
        let unicast = match a {
            IpAddr::V4(a) => !a.is_unspecified() && !a.is_multicast() && !a.is_broadcast(),
            IpAddr::V6(a) => !a.is_unspecified() && !a.is_multicast(),
        };
        unicast.then_some(Action::Fwd(a, port))
    })
}

const UNREACH: &[(&str, u8)] = &[
    ("net", 0),
    ("host", 1),
    ("protocol", 2),
    ("port", 3),
    ("needfrag", 4),
    ("srcfail", 5),
    ("net-unknown", 6),
    ("host-unknown", 7),
    ("isolated", 8),
    ("net-prohib", 9),
    ("host-prohib", 10),
    ("tosnet", 11),
    ("toshost", 12),
    ("filter-prohib", 13),
    ("host-precedence", 14),
    ("precedence-cutoff", 15),
];
const UNREACH6: &[(&str, u8)] = &[
    ("no-route", 0),
    ("admin-prohib", 1),
    ("beyond-scope", 2),
    ("address", 3),
    ("port", 4),
];

fn unreach_code(p: &mut Parser<'_>, v6: bool) -> PResult<u8> {
    let names = if v6 { UNREACH6 } else { UNREACH };
    p.word("an unreachable code (number or name)", |w| {
        w.parse::<u8>()
            .ok()
            .or_else(|| names.iter().find(|(n, _)| *n == w).map(|x| x.1))
    })
}

fn proto_num(w: &str) -> Option<u8> {
    w.parse::<u8>()
        .ok()
        .or_else(|| PROTO_NAMES.iter().find(|(n, _)| *n == w).map(|x| x.1))
}

fn proto(p: &mut Parser<'_>) -> PResult<Proto> {
    const WHAT: &str = "a protocol (ip, all, ip4, ip6, tcp, udp, icmp, ipv6-icmp, a number)";
    if p.eat("{") {
        let mut l = vec![p.word(WHAT, proto_num)?];
        while p.eat("or") {
            l.push(p.word(WHAT, proto_num)?);
        }
        p.expect("}")?;
        return Ok(Proto::List(l));
    }
    p.word(WHAT, |w| match w {
        "ip" | "all" => Some(Proto::Any),
        "ip4" | "ipv4" => Some(Proto::Ip4),
        "ip6" | "ipv6" => Some(Proto::Ip6),
        _ => proto_num(w).map(|n| Proto::List(vec![n])),
    })
}

const ADDR_WHAT: &str = "an address, 'any', 'me' or 'table(NAME)'";

/// `NAME` or `NAME,value` inside `table(...)`.
fn table_ref(w: &str) -> Option<(String, Option<u32>)> {
    let inner = w.strip_prefix("table(")?.strip_suffix(')')?;
    let (name, val) = match inner.split_once(',') {
        Some((n, v)) => (n, Some(v.parse::<u32>().ok()?)),
        None => (inner, None),
    };
    valid_name(name).then(|| (name.to_string(), val))
}

pub(crate) fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

fn v4_mask(len: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(
        u32::MAX.checked_shl(32 - len as u32).unwrap_or(0),
    ))
}

fn v6_mask(len: u8) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(
        u128::MAX.checked_shl(128 - len as u32).unwrap_or(0),
    ))
}

pub(crate) fn apply_mask(a: IpAddr, m: IpAddr) -> Option<IpAddr> {
    match (a, m) {
        (IpAddr::V4(a), IpAddr::V4(m)) => Some(IpAddr::V4((u32::from(a) & u32::from(m)).into())),
        (IpAddr::V6(a), IpAddr::V6(m)) => Some(IpAddr::V6((u128::from(a) & u128::from(m)).into())),
        _ => None,
    }
}

/// `a`, `a/len` or `a:mask` (IPv4 only for `:mask`, since `:` is IPv6's separator).
pub(crate) fn addr_mask(w: &str) -> Option<AddrMask> {
    let (a, mask) = if let Some((a, l)) = w.split_once('/') {
        let addr: IpAddr = a.parse().ok()?;
        let len: u8 = l.parse().ok()?;
        let m = match addr {
            IpAddr::V4(_) if len <= 32 => v4_mask(len),
            IpAddr::V6(_) if len <= 128 => v6_mask(len),
            _ => return None,
        };
        (addr, m)
    } else if let Ok(addr) = w.parse::<IpAddr>() {
        let m = if addr.is_ipv4() {
            v4_mask(32)
        } else {
            v6_mask(128)
        };
        (addr, m)
    } else {
        let (a, m) = w.split_once(':')?;
        let a: Ipv4Addr = a.parse().ok()?;
        let m: Ipv4Addr = m.parse().ok()?;
        (IpAddr::V4(a), IpAddr::V4(m))
    };
    Some(AddrMask {
        addr: apply_mask(a, mask)?,
        mask,
    })
}

fn addr_list(w: &str) -> Option<Vec<AddrMask>> {
    w.split(',').map(addr_mask).collect()
}

fn endpoint(p: &mut Parser<'_>) -> PResult<Endpoint> {
    let not = p.eat("not");
    let addr = if p.eat("{") {
        let mut l = p.word(ADDR_WHAT, addr_list)?;
        while p.eat("or") {
            l.extend(p.word(ADDR_WHAT, addr_list)?);
        }
        p.expect("}")?;
        AddrSpec::List(l)
    } else {
        p.word(ADDR_WHAT, |w| match w {
            "any" => Some(AddrSpec::Any),
            "me" => Some(AddrSpec::Me),
            "me6" => Some(AddrSpec::Me6),
            _ => table_ref(w)
                .map(|(n, v)| AddrSpec::Table(n, v))
                .or_else(|| addr_list(w).map(AddrSpec::List)),
        })?
    };
    if let AddrSpec::Table(n, _) = &addr {
        p.note(Ref::Table(n.clone()));
    }
    let ports = match p.peek() {
        Some(w)
            if w.starts_with(|c: char| c.is_ascii_digit())
                || w.split([',', '-']).next().and_then(port_name).is_some() =>
        {
            Some(ranges(
                p,
                "a port list (22,80,1000-2000)",
                65535,
                port_name,
            )?)
        }
        _ => None,
    };
    Ok(Endpoint { not, addr, ports })
}

fn port_name(w: &str) -> Option<u32> {
    const NAMES: &[(&str, u32)] = &[
        ("ftp-data", 20),
        ("ftp", 21),
        ("ssh", 22),
        ("telnet", 23),
        ("smtp", 25),
        ("domain", 53),
        ("http", 80),
        ("ntp", 123),
        ("https", 443),
    ];
    NAMES.iter().find(|(n, _)| *n == w).map(|x| x.1)
}

fn no_names(_: &str) -> Option<u32> {
    None
}

/// `a`, `a-b`, comma separated, each at most `max`; `names` gives named values.
fn ranges(
    p: &mut Parser<'_>,
    what: &str,
    max: u32,
    names: fn(&str) -> Option<u32>,
) -> PResult<Vec<Range>> {
    let one = |s: &str| -> Option<u32> {
        s.parse::<u32>()
            .ok()
            .or_else(|| names(s))
            .filter(|&n| n <= max)
    };
    p.word(what, |w| {
        w.split(',')
            .map(|item| {
                // A whole name first: `ftp-data` is a port, not a range.
                let (lo, hi) = match (one(item), item.split_once('-')) {
                    (Some(n), _) => (n, n),
                    (None, Some((a, b))) if !a.is_empty() => (one(a)?, one(b)?),
                    _ => return None,
                };
                (lo <= hi).then_some(Range { lo, hi })
            })
            .collect()
    })
}

fn flags(p: &mut Parser<'_>, what: &str, names: &[(&str, u8)]) -> PResult<FlagSpec> {
    p.word(what, |w| {
        let mut s = FlagSpec::default();
        for item in w.split(',') {
            let (neg, name) = match item.strip_prefix('!') {
                Some(n) => (true, n),
                None => (false, item),
            };
            let bit = names.iter().find(|(n, _)| *n == name)?.1;
            if (s.set | s.clear) & bit != 0 {
                return None;
            }
            if neg {
                s.clear |= bit;
            } else {
                s.set |= bit;
            }
        }
        Some(s)
    })
}

fn ifpat(p: &mut Parser<'_>) -> PResult<IfPat> {
    let i = p.word("an interface name, 'any' or 'table(NAME)'", |w| {
        if w == "any" {
            Some(IfPat::Any)
        } else if let Some((n, v)) = table_ref(w) {
            v.is_none().then_some(IfPat::Table(n))
        } else {
            valid_name(w).then(|| IfPat::Name(w.to_string()))
        }
    })?;
    if let IfPat::Table(n) = &i {
        p.note(Ref::Table(n.clone()));
    }
    Ok(i)
}

fn mac(w: &str) -> Option<MacPat> {
    if w == "any" {
        return Some(MacPat::Any);
    }
    let mut m = [0u8; 6];
    let mut it = w.split(':');
    for b in m.iter_mut() {
        let s = it.next()?;
        if s.is_empty() || s.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(s, 16).ok()?;
    }
    it.next().is_none().then_some(MacPat::Addr(m))
}

fn ethertype_name(w: &str) -> Option<u32> {
    match w {
        "ip" | "ipv4" => Some(0x0800),
        "arp" => Some(0x0806),
        "vlan" => Some(0x8100),
        "ipv6" => Some(0x86dd),
        // ipfw(8): "decimal or hexadecimal (if prefixed by 0x)".
        _ => w
            .strip_prefix("0x")
            .or_else(|| w.strip_prefix("0X"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .filter(|&v| v <= 0xffff),
    }
}

fn dscp_name(w: &str) -> Option<u32> {
    match w {
        "be" => Some(0),
        "ef" => Some(46),
        "va" => Some(44),
        _ => {
            if let Some(n) = w.strip_prefix("cs") {
                let n: u32 = n.parse().ok()?;
                (n <= 7).then_some(n << 3)
            } else if let Some(n) = w.strip_prefix("af") {
                let (c, d) = n.split_at_checked(1)?;
                let (c, d): (u32, u32) = (c.parse().ok()?, d.parse().ok()?);
                ((1..=4).contains(&c) && (1..=3).contains(&d)).then_some(c * 8 + d * 2)
            } else {
                None
            }
        }
    }
}

const OPT_WHAT: &str = "an option (in, out, via, recv, xmit, setup, established, tcpflags, \
                        frag, icmptypes, icmp6types, ip4, ip6, tagged, iplen, ipttl, iptos, \
                        dscp, tcpoptions, tcpwin, tcpdatalen, mac, mac-type, layer2, \
                        antispoof, verrevpath, lookup, flow, keep-state, limit, tag, untag)";

fn opt(p: &mut Parser<'_>) -> PResult<Opt> {
    let not = p.eat("not");
    let w = p.next(OPT_WHAT)?;
    let kind = match w {
        "in" => OptKind::In,
        "out" => OptKind::Out,
        "via" => OptKind::Via(ifpat(p)?),
        "recv" => OptKind::Recv(ifpat(p)?),
        "xmit" => OptKind::Xmit(ifpat(p)?),
        "setup" => OptKind::Setup,
        "established" => OptKind::Established,
        "tcpflags" | "tcpflag" => {
            OptKind::TcpFlags(flags(p, "TCP flags (syn,!ack,...)", TCP_FLAGS)?)
        }
        "frag" => OptKind::Frag,
        "icmptypes" => OptKind::IcmpTypes(ranges(p, "ICMP types (0-31)", 31, no_names)?),
        "icmp6types" => OptKind::Icmp6Types(ranges(p, "ICMPv6 types (0-255)", 255, no_names)?),
        "ip4" | "ipv4" => OptKind::Ip4,
        "ip6" | "ipv6" => OptKind::Ip6,
        "tagged" => OptKind::Tagged(ranges(p, "tag numbers (1-65534)", 65534, no_names)?),
        "iplen" => OptKind::IpLen(ranges(p, "IP lengths", 65535, no_names)?),
        "ipttl" => OptKind::IpTtl(ranges(p, "TTL values", 255, no_names)?),
        "iptos" => OptKind::IpTos(flags(p, "TOS flags (lowdelay,!mincost,...)", IP_TOS)?),
        "dscp" => OptKind::Dscp(ranges(
            p,
            "DSCP values (0-63, ef, af11, cs1, ...)",
            63,
            dscp_name,
        )?),
        "tcpoptions" | "tcpopts" => {
            OptKind::TcpOptions(flags(p, "TCP options (mss,window,sack,ts,cc)", TCP_OPTS)?)
        }
        "tcpwin" => OptKind::TcpWin(ranges(p, "TCP window sizes", 65535, no_names)?),
        "tcpdatalen" => OptKind::TcpDataLen(ranges(p, "TCP data lengths", 65535, no_names)?),
        "mac" => {
            let d = p.word("a destination MAC address or 'any'", mac)?;
            let s = p.word("a source MAC address or 'any'", mac)?;
            OptKind::Mac(d, s)
        }
        "mac-type" => OptKind::MacType(ranges(
            p,
            "ethertypes (number, 0xHEX, ip, ipv6, arp, vlan)",
            65535,
            ethertype_name,
        )?),
        "layer2" => OptKind::Layer2,
        "antispoof" => OptKind::Antispoof,
        "verrevpath" => OptKind::Verrevpath,
        "lookup" => {
            let k = p.word("'src-port' or 'dst-port'", |w| match w {
                "src-port" => Some(LookupKey::SrcPort),
                "dst-port" => Some(LookupKey::DstPort),
                _ => None,
            })?;
            let t = p.word("a table name", |w| valid_name(w).then(|| w.to_string()))?;
            p.note(Ref::Table(t.clone()));
            OptKind::Lookup(k, t)
        }
        "flow" => {
            let t = p.word("'table(NAME)'", |w| {
                table_ref(w).and_then(|(n, v)| v.is_none().then_some(n))
            })?;
            p.note(Ref::Table(t.clone()));
            OptKind::Flow(t)
        }
        "keep-state" => OptKind::KeepState,
        "limit" => {
            let mut m = LimitMask::default();
            loop {
                match p.peek() {
                    Some("src-addr") => m.src_addr = true,
                    Some("src-port") => m.src_port = true,
                    Some("dst-addr") => m.dst_addr = true,
                    Some("dst-port") => m.dst_port = true,
                    _ => break,
                }
                p.pos += 1;
            }
            if m == LimitMask::default() {
                return p.err("'src-addr', 'src-port', 'dst-addr' or 'dst-port'");
            }
            let n = p.word("a state limit (1-65535)", |w| {
                w.parse::<u32>().ok().filter(|n| (1..=65535).contains(n))
            })?;
            OptKind::Limit(m, n)
        }
        "tag" => OptKind::Tag(tag_arg(p)?),
        "untag" => OptKind::Untag(tag_arg(p)?),
        _ => {
            p.pos -= 1;
            return p.err(OPT_WHAT);
        }
    };
    Ok(Opt { not, kind })
}

fn tag_arg(p: &mut Parser<'_>) -> PResult<Arg> {
    if p.eat("tablearg") {
        return Ok(Arg::Tablearg);
    }
    p.word("a tag number (1-65534) or 'tablearg'", |w| {
        w.parse::<u32>()
            .ok()
            .filter(|n| (1..=65534).contains(n))
            .map(Arg::Num)
    })
}
