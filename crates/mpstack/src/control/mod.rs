//! The control socket of a running node, and the commands that talk to it.
//!
//! `mpstack run --name NAME` listens on a Unix socket, `RUNDIR/NAME.sock` (mode
//! 0600 before it listens, in a directory that is the node's user's or root's and
//! writable by no one else, made 0700 if missing; RUNDIR is `$MPSTACK_RUN_DIR` or
//! `/run/mpstack`), and answers only root and its own user (`SO_PEERCRED`). `mpstack ifconfig|route|netstat|arp|ndp|ipfw|sysctl [-j NAME]
//! ARGS…` sends its arguments there; the node parses and runs the command against
//! its stack (through the embedded API, as a program embedding mpstack would) and
//! streams the output back. So the commands' syntax, checks and errors live in
//! one place, the node, and a command cannot see a half-changed node.
//!
//! The wire: the request is a count and the arguments, each a little-endian
//! `u32` length and its bytes; the answer is a sequence of frames, a tag byte
//! (`o` output, `e` error text, `x` the exit status, last) and a `u32` length and
//! payload. A batch (`mpstack ipfw /FILE`, `mpstack config apply FILE`) sets the
//! count's top bit ([`BATCH`]): its last argument is the file's text, which the
//! client read and sends (the node opens no file a client names), bounded by
//! [`MAX_BATCH`], one batch at a time. Requests are bounded in size ([`MAX_ARGS`], [`MAX_REQUEST`]) and in
//! time ([`REQUEST_TIME`] for the whole request, [`ANSWER_TIME`] for the whole
//! answer); so are the commands run at once ([`MAX_CLIENTS`]) and the clients
//! waiting to send theirs ([`MAX_PENDING`]). See [`serve`] for why slow clients
//! cannot keep others out, nor keep the node from stopping.
//!
//! What it owns: the socket, its path and the framing. What it may call: the
//! commands ([`cmds`]), which call the stack.
//!
//! The commands' side, which sends a request and prints the answer (`mpstack CMD`,
//! [`call`]), is in `client.rs`.

mod client;
pub mod cmds;
pub mod config;
pub mod log;
pub mod metrics;

pub use client::{call, client};

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Arguments a request may carry.
pub const MAX_ARGS: usize = 1024;
/// Bytes a request may carry.
pub const MAX_REQUEST: usize = 256 * 1024;
/// Bytes a batch's text may carry (the last argument of a request marked
/// [`BATCH`]): 100,000 routes or table entries are some 4 MB. One batch is
/// received or run at a time, so this bounds what batches hold.
pub const MAX_BATCH: usize = 64 << 20;
/// The request's count word's top bit: the last argument is a batch's text.
pub const BATCH: u32 = 1 << 31;
/// Commands run at once; more are answered with an error (exit 75).
pub const MAX_CLIENTS: usize = 16;
/// Connections still sending their request, at most; one more evicts the
/// oldest of them (a client of the `mpstack` commands sends its request in one
/// write, so the oldest is the one dripping).
pub const MAX_PENDING: usize = 64;
/// Time a client has to send its whole request, from its connect.
pub const REQUEST_TIME: Duration = Duration::from_secs(2);
/// Time a command has, from its request, to run and have its whole answer taken
/// by the client. A streaming command (`route monitor`, `netstat -w`) has
/// instead [`WRITE_STALL`] for each write.
pub const ANSWER_TIME: Duration = Duration::from_secs(10);
/// Longest a streaming command waits for its client to take one write.
pub const WRITE_STALL: Duration = Duration::from_secs(5);
/// The node's name when `--name` is not given.
pub const DEFAULT_NAME: &str = "mpstack";

/// The directory of the nodes' sockets.
pub fn run_dir() -> PathBuf {
    std::env::var_os("MPSTACK_RUN_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/run/mpstack"), PathBuf::from)
}

/// Checks a node's name: letters, digits, `-`, `_` and `.`, not starting with a
/// dot, at most 64 bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "node name '{name}': use 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'"
        ))
    }
}

/// The socket of node `name`.
pub fn socket_path(name: &str) -> Result<PathBuf, String> {
    check_name(name)?;
    Ok(run_dir().join(format!("{name}.sock")))
}

/// Checks the directory of the sockets: a directory (not a symbolic link to
/// one), owned by this user or root, that no one else may write to — else
/// someone else could replace the socket between our checks and a client's
/// connect, or have made the directory theirs before the node started.
fn check_dir(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("control socket directory {}: {e}", dir.display()))?;
    let euid = dev::unix::euid();
    let why = if m.file_type().is_symlink() {
        "is a symbolic link".to_string()
    } else if !m.is_dir() {
        "is not a directory".to_string()
    } else if m.uid() != euid && m.uid() != 0 {
        format!("is owned by uid {}, not by this node's uid {euid}", m.uid())
    } else if m.mode() & 0o022 != 0 {
        format!(
            "is writable by others (mode {:o}); make it 0700 (chmod go-w), or set $MPSTACK_RUN_DIR to a directory of your own",
            m.mode() & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(format!(
        "control socket directory {} {why}; refusing to put the socket there",
        dir.display()
    ))
}

/// A node's control socket: the listener, its path, and which file it made
/// there (device and inode), so that on exit it removes only its own.
#[derive(Debug)]
pub struct Socket {
    pub listener: UnixListener,
    pub path: PathBuf,
    id: (u64, u64),
}

impl Drop for Socket {
    fn drop(&mut self) {
        // A node that lost its name (its socket was removed and a newer node of
        // the name made another) leaves the newer node's socket alone.
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Makes the node's socket, mode 0600 before it listens, in a directory checked
/// by [`check_dir`] (made 0700 if missing). Refuses if a node of that name
/// answers there, or if the path is anything but a socket (a symbolic link is
/// not followed); takes the place of a socket nothing answers on.
pub fn listen(name: &str) -> Result<Socket, String> {
    listen_in(&run_dir(), name)
}

/// [`listen`] in directory `dir` instead of the run directory.
pub fn listen_in(dir: &Path, name: &str) -> Result<Socket, String> {
    check_name(name)?;
    let path = dir.join(format!("{name}.sock"));
    let dir = path.parent().unwrap_or(Path::new("/"));
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("control socket directory {}: {e}", dir.display()))?;
    }
    check_dir(dir)?;
    let here = |e: &dyn std::fmt::Display| format!("control socket {}: {e}", path.display());
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(here(&e)),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(here(
                &"is a symbolic link; refusing to follow it (remove it, or give this node another --name)",
            ))
        }
        Ok(m) if !m.file_type().is_socket() => {
            return Err(here(
                &"exists and is not a socket; refusing to replace it (remove it, or give this node another --name)",
            ))
        }
        Ok(_) => match UnixStream::connect(&path) {
            Ok(_) => {
                return Err(format!(
                    "a node named '{name}' is running already (its control socket is {}); give this one another --name",
                    path.display()
                ))
            }
            // Left by a node that did not stop cleanly: nothing listens.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => return Err(here(&format!("a socket is there that cannot be tried ({e}); remove it if no node uses it"))),
        },
    }
    let l = dev::unix::listen_with_mode(&path, 0o600).map_err(|e| here(&e))?;
    l.set_nonblocking(true).map_err(|e| here(&e))?;
    let m = std::fs::symlink_metadata(&path).map_err(|e| here(&e))?;
    Ok(Socket {
        listener: l,
        path,
        id: (m.dev(), m.ino()),
    })
}

/// Writes one answer frame.
fn frame(w: &mut impl Write, tag: u8, payload: &[u8]) -> io::Result<()> {
    let mut head = [0u8; 5];
    head[0] = tag;
    head[1..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    w.write_all(&head)?;
    w.write_all(payload)
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// A request: the command's words and, for a batch, the text of its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub args: Vec<String>,
    pub batch: Option<String>,
}

/// The count word's arguments and whether the request is a batch, checked
/// against the bounds.
fn count(word: u32) -> Result<(usize, bool), String> {
    let batch = word & BATCH != 0;
    let n = (word & !BATCH) as usize;
    if n > MAX_ARGS {
        return Err(format!("request of {n} arguments: at most {MAX_ARGS}"));
    }
    if batch && n < 2 {
        return Err("a batch has its command and its text".into());
    }
    Ok((n, batch))
}

/// Checks argument `i`'s length `len` of a request of `n`, `total` the bytes
/// of the arguments before the batch's text.
fn check_len(i: usize, n: usize, batch: bool, len: usize, total: &mut usize) -> Result<(), String> {
    if batch && i + 1 == n {
        if len > MAX_BATCH {
            return Err(format!("a batch over {MAX_BATCH} bytes"));
        }
        return Ok(());
    }
    *total += len;
    if *total > MAX_REQUEST {
        return Err(format!("request over {MAX_REQUEST} bytes"));
    }
    Ok(())
}

/// Reads a request: its arguments (a count, then each as a length and UTF-8 bytes,
/// lengths little-endian `u32`), bounded by `MAX_ARGS` and `MAX_REQUEST` (and a
/// batch's text by `MAX_BATCH`).
pub fn read_request(r: &mut impl Read) -> Result<Request, String> {
    let word = read_u32(r).map_err(|e| format!("reading the request: {e}"))?;
    let (n, batch) = count(word)?;
    let mut total = 0usize;
    let mut args = Vec::with_capacity(n);
    for i in 0..n {
        let len = read_u32(r).map_err(|e| format!("reading the request: {e}"))? as usize;
        check_len(i, n, batch, len, &mut total)?;
        let mut b = vec![0u8; len];
        r.read_exact(&mut b)
            .map_err(|e| format!("reading the request: {e}"))?;
        args.push(String::from_utf8(b).map_err(|_| "an argument is not UTF-8".to_string())?);
    }
    let batch = if batch { args.pop() } else { None };
    Ok(Request { args, batch })
}

/// A request from the bytes come so far: `None` while it is incomplete, an
/// error as soon as the bytes break a bound.
fn parse_request(b: &[u8]) -> Result<Option<Request>, String> {
    let u32_at = |at: usize| {
        b.get(at..at + 4)
            .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
    };
    let Some(word) = u32_at(0) else {
        return Ok(None);
    };
    let (n, batch) = count(word)?;
    let (mut at, mut total) = (4, 0usize);
    for i in 0..n {
        let Some(len) = u32_at(at) else {
            return Ok(None);
        };
        let len = len as usize;
        check_len(i, n, batch, len, &mut total)?;
        at += 4 + len;
    }
    if b.len() < at {
        return Ok(None);
    }
    read_request(&mut &b[..at]).map(Some)
}

/// The request's bytes, as a client sends them.
pub fn encode_request(args: &[String], batch: Option<&str>) -> Vec<u8> {
    let n = args.len() + usize::from(batch.is_some());
    let word = n as u32 | if batch.is_some() { BATCH } else { 0 };
    let mut req = Vec::with_capacity(16 + batch.map_or(0, str::len));
    req.extend_from_slice(&word.to_le_bytes());
    for a in args.iter().map(String::as_str).chain(batch) {
        req.extend_from_slice(&(a.len() as u32).to_le_bytes());
        req.extend_from_slice(a.as_bytes());
    }
    req
}

/// Bytes a complete request may take, framing included.
const MAX_REQUEST_BYTES: usize = MAX_REQUEST + 4 * (MAX_ARGS + 1);

/// Whether the bytes come so far start a batch.
fn is_batch(b: &[u8]) -> bool {
    b.len() >= 4 && u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & BATCH != 0
}

/// Where a command writes: the client's connection, or (a config file's lines)
/// a buffer.
pub struct Conn {
    stream: Option<UnixStream>,
    buf: String,
    /// When the whole answer must have been taken; `None` once the command
    /// streams (each write then has [`WRITE_STALL`]).
    deadline: Option<Instant>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Conn")
    }
}

/// A client's connection written under a deadline for the whole of what is
/// written through it, not for each write: a client that takes one byte now and
/// then cannot hold the command past it.
struct Timed<'a> {
    s: &'a UnixStream,
    until: Instant,
}

impl Write for Timed<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not take its answer in time",
            ));
        }
        self.s.set_write_timeout(Some(left))?;
        (&mut &*self.s).write(b)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Conn {
    /// Output kept in memory.
    pub fn buffer() -> Conn {
        Conn {
            stream: None,
            buf: String::new(),
            deadline: None,
        }
    }

    /// What was written to a [`Conn::buffer`] (nothing, for a client's connection).
    pub fn into_output(self) -> String {
        self.buf
    }

    /// Says the command streams until its client goes (`route monitor`,
    /// `netstat -w`): from now on each write, not the whole answer, is bounded.
    pub fn streaming(&mut self) {
        self.deadline = None;
    }

    fn send(&mut self, tag: u8, payload: &[u8]) -> io::Result<()> {
        let Some(s) = &self.stream else {
            return Ok(());
        };
        let until = self
            .deadline
            .unwrap_or_else(|| Instant::now() + WRITE_STALL);
        frame(&mut Timed { s, until }, tag, payload)
    }

    /// Sends output text.
    pub fn print(&mut self, s: &str) -> io::Result<()> {
        match &self.stream {
            _ if s.is_empty() => Ok(()),
            Some(_) => self.send(b'o', s.as_bytes()),
            None => {
                self.buf.push_str(s);
                Ok(())
            }
        }
    }

    /// Whether the client has gone (a streaming command's cue to stop).
    pub fn closed(&mut self) -> bool {
        let Some(st) = &mut self.stream else {
            return false;
        };
        let mut b = [0u8; 1];
        let _ = st.set_nonblocking(true);
        let r = st.read(&mut b);
        let _ = st.set_nonblocking(false);
        !matches!(r, Err(ref e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// What the control socket did, for the node's summary when it stops.
#[derive(Debug, Default)]
pub struct ControlStats {
    /// Commands run.
    pub commands: AtomicU64,
    /// Connections refused for their peer: not root, not the node's user.
    pub refused: AtomicU64,
    /// Requests not complete within [`REQUEST_TIME`].
    pub request_timeouts: AtomicU64,
    /// Connections waiting for their request evicted by newer ones.
    pub evicted: AtomicU64,
    /// Commands refused because [`MAX_CLIENTS`] were running.
    pub busy: AtomicU64,
    /// Answers cut because the client did not take them in time.
    pub answer_timeouts: AtomicU64,
}

impl ControlStats {
    /// One line for the node's summary.
    pub fn summary(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "control socket: {} command(s), {} refused (peer not root or the node's user), {} request timeout(s) ({}s), {} evicted (over {MAX_PENDING} waiting), {} busy (over {MAX_CLIENTS}), {} answer timeout(s) ({}s)",
            g(&self.commands),
            g(&self.refused),
            g(&self.request_timeouts),
            REQUEST_TIME.as_secs(),
            g(&self.evicted),
            g(&self.busy),
            g(&self.answer_timeouts),
            ANSWER_TIME.as_secs(),
        )
    }
}

/// Answers a connection that will not run a command: an error and its status,
/// written without waiting (the socket's buffer is empty, the frames are small).
fn refuse(mut s: UnixStream, code: u8, msg: &str) {
    let _ = s.set_nonblocking(true);
    let _ = frame(&mut s, b'e', msg.as_bytes());
    let _ = frame(&mut s, b'x', &[code]);
}

/// A connection whose request is still coming.
struct Pending<'a> {
    stream: UnixStream,
    buf: Vec<u8>,
    until: Instant,
    /// The batch slot, once the request says it is a batch ([`BatchSlot`]).
    batch: Option<BatchHold<'a>>,
}

/// The one batch received or run at a time ([`MAX_BATCH`] bounds what it holds).
#[derive(Default)]
struct BatchSlot(AtomicBool);

/// The batch slot, taken; let go when dropped (the request refused, or its
/// command over).
struct BatchHold<'a>(&'a BatchSlot);

impl BatchSlot {
    fn take(&self) -> Option<BatchHold<'_>> {
        (!self.0.swap(true, Ordering::AcqRel)).then_some(BatchHold(self))
    }
}

impl Drop for BatchHold<'_> {
    fn drop(&mut self) {
        self.0 .0.store(false, Ordering::Release);
    }
}

enum Arrival {
    Waiting,
    /// Bytes came, the request is not complete yet.
    Moving,
    /// A batch while another is received or run.
    BatchBusy,
    Request(Request),
    Bad(String),
    Late,
    Gone,
}

impl<'a> Pending<'a> {
    /// Takes what the client has sent, without waiting.
    fn poll(&mut self, now: Instant, slot: &'a BatchSlot) -> Arrival {
        let mut chunk = [0u8; 65536];
        let mut moved = false;
        loop {
            if self.batch.is_none() && is_batch(&self.buf) {
                match slot.take() {
                    Some(h) => self.batch = Some(h),
                    None => return Arrival::BatchBusy,
                }
            }
            let max = if self.batch.is_some() {
                MAX_REQUEST_BYTES + MAX_BATCH
            } else {
                MAX_REQUEST_BYTES
            };
            // Four bytes first: the count says whether the bound is a batch's.
            let room = if self.buf.len() < 4 {
                4 - self.buf.len()
            } else {
                max - self.buf.len().min(max)
            };
            if room == 0 {
                break;
            }
            let want = room.min(chunk.len());
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => return Arrival::Gone,
                Ok(k) => {
                    self.buf.extend_from_slice(&chunk[..k]);
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Arrival::Gone,
            }
        }
        match parse_request(&self.buf) {
            Ok(Some(req)) => Arrival::Request(req),
            Err(e) => Arrival::Bad(e),
            Ok(None) if now >= self.until => Arrival::Late,
            Ok(None) if moved => Arrival::Moving,
            Ok(None) => Arrival::Waiting,
        }
    }
}

/// Serves the control socket until `stop`.
///
/// One thread takes the connections and their requests, without blocking on
/// any: a client still sending its request holds no command slot, so clients
/// that drip their bytes (or send nothing) cannot keep a 17th command out. They
/// wait at most [`REQUEST_TIME`], at most [`MAX_PENDING`] of them (the oldest
/// goes first). Each complete request runs on a thread of its own, at most
/// [`MAX_CLIENTS`] at once, under [`ANSWER_TIME`] for its whole answer. Only root
/// and the node's own user are served (`SO_PEERCRED`): the socket's mode says
/// the same, and this holds even if the mode was widened. On `stop` every
/// client still connected is cut (`shutdown(2)`), so no client delays the
/// node's exit.
pub fn serve(
    listener: &UnixListener,
    node: &cmds::Node<'_>,
    stop: &AtomicBool,
    stats: &ControlStats,
) {
    let euid = dev::unix::euid();
    // The commands running, cut on stop.
    let sessions: Sessions<UnixStream> = Sessions::new(MAX_CLIENTS);
    let slot = BatchSlot::default();
    let mut pending: VecDeque<Pending<'_>> = VecDeque::new();
    let clock = std::time::Instant::now();
    let mut refused_log = net::loglimit::LogLimit::new(5, Duration::from_secs(60));
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            let mut idle = true;
            loop {
                let stream = match listener.accept() {
                    Ok((st, _)) => st,
                    // Nothing waiting, or out of descriptors: the next round.
                    Err(_) => break,
                };
                idle = false;
                let _ = stream.set_nonblocking(true);
                match dev::unix::peer_cred(&stream) {
                    Ok(c) if c.uid == 0 || c.uid == euid => {}
                    who => {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        let you = who.map_or_else(
                            |e| format!("unknown ({e})"),
                            |c| format!("uid {} (pid {})", c.uid, c.pid),
                        );
                        let now = dev::Instant::from_nanos(clock.elapsed().as_nanos() as u64);
                        if let net::loglimit::LogCheck::Log { held } = refused_log.check(now) {
                            if held > 0 {
                                tracing::warn!(target: "control", "suppressed {held} refused-client message(s)");
                            }
                            tracing::warn!(target: "control", "refused a client: {you} is not root or the node's user (uid {euid})");
                        }
                        refuse(
                            stream,
                            77,
                            &format!("permission denied: the node answers root and its own user (uid {euid}) only; you are {you}\n"),
                        );
                        continue;
                    }
                }
                if pending.len() >= MAX_PENDING {
                    if let Some(old) = pending.pop_front() {
                        stats.evicted.fetch_add(1, Ordering::Relaxed);
                        refuse(old.stream, 75, "too many clients waiting to send their requests; yours was the oldest\n");
                    }
                }
                pending.push_back(Pending {
                    stream,
                    buf: Vec::new(),
                    until: Instant::now() + REQUEST_TIME,
                    batch: None,
                });
            }
            let now = Instant::now();
            let mut i = 0;
            while i < pending.len() {
                let arrival = pending[i].poll(now, &slot);
                match arrival {
                    Arrival::Waiting => {
                        i += 1;
                        continue;
                    }
                    // A batch's bytes keep coming: no sleep before the next round.
                    Arrival::Moving => {
                        idle = false;
                        i += 1;
                        continue;
                    }
                    _ => {}
                }
                idle = false;
                let Some(p) = pending.remove(i) else { break };
                let req = match arrival {
                    Arrival::Request(req) => req,
                    Arrival::BatchBusy => {
                        stats.busy.fetch_add(1, Ordering::Relaxed);
                        refuse(
                            p.stream,
                            75,
                            "another batch is being received or applied; try again\n",
                        );
                        continue;
                    }
                    Arrival::Bad(e) => {
                        refuse(p.stream, 64, &format!("{e}\n"));
                        continue;
                    }
                    Arrival::Late => {
                        stats.request_timeouts.fetch_add(1, Ordering::Relaxed);
                        refuse(
                            p.stream,
                            64,
                            &format!(
                                "the request did not arrive within {}s\n",
                                REQUEST_TIME.as_secs()
                            ),
                        );
                        continue;
                    }
                    Arrival::Gone | Arrival::Waiting | Arrival::Moving => continue,
                };
                if sessions.full() {
                    stats.busy.fetch_add(1, Ordering::Relaxed);
                    refuse(
                        p.stream,
                        75,
                        &format!("the node serves {MAX_CLIENTS} commands at once; try again\n"),
                    );
                    continue;
                }
                let (stream, hold) = (p.stream, p.batch);
                let _ = stream.set_nonblocking(false);
                stats.commands.fetch_add(1, Ordering::Relaxed);
                sessions.spawn(s, stream, move |stream| {
                    handle(stream, req, node, stop, stats);
                    drop(hold);
                });
            }
            if idle {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Stopping: a command blocked writing to (or reading from) its client
        // returns at once, so the scope's join below waits on no client.
        sessions.cut_all();
    });
}

/// A stream a [`Sessions`] can keep a handle of and cut.
pub(crate) trait Cut: Sized {
    fn handle(&self) -> io::Result<Self>;
    /// `shutdown(2)` both ways: a thread blocked on it returns at once.
    fn cut(&self);
}

impl Cut for UnixStream {
    fn handle(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn cut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

impl Cut for std::net::TcpStream {
    fn handle(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn cut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

/// The connections a surface serves (control commands, metrics scrapes), each on a
/// thread of its own in a scope: at most `max` at once, and every one still served
/// cut when the node stops ([`Sessions::cut_all`]), so that the scope's join waits
/// on no client.
pub(crate) struct Sessions<S> {
    max: usize,
    running: AtomicUsize,
    live: Mutex<Vec<(u64, S)>>,
    next: AtomicU64,
}

impl<S: Cut + Send> Sessions<S> {
    pub(crate) fn new(max: usize) -> Self {
        Sessions {
            max,
            running: AtomicUsize::new(0),
            live: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        }
    }

    /// Whether `max` are being served.
    pub(crate) fn full(&self) -> bool {
        self.running.load(Ordering::Relaxed) >= self.max
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Vec<(u64, S)>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves `c` with `f` on a thread of scope `s`, kept in the list to cut
    /// until `f` returns.
    pub(crate) fn spawn<'scope, 'env>(
        &'env self,
        s: &'scope std::thread::Scope<'scope, 'env>,
        c: S,
        f: impl FnOnce(S) + Send + 'scope,
    ) where
        S: 'scope,
    {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(h) = c.handle() {
            self.live().push((id, h));
        }
        self.running.fetch_add(1, Ordering::Relaxed);
        s.spawn(move || {
            f(c);
            self.live().retain(|(k, _)| *k != id);
            self.running.fetch_sub(1, Ordering::Relaxed);
        });
    }

    /// Cuts every connection still served.
    pub(crate) fn cut_all(&self) {
        for (_, c) in self.live().iter() {
            c.cut();
        }
    }
}

/// Runs one connection's command and sends its status.
fn handle(
    stream: UnixStream,
    req: Request,
    node: &cmds::Node<'_>,
    stop: &AtomicBool,
    stats: &ControlStats,
) {
    let mut conn = Conn {
        stream: Some(stream),
        buf: String::new(),
        deadline: Some(Instant::now() + ANSWER_TIME),
    };
    let (code, msg) = match run_request(node, &req, &mut conn, stop) {
        Ok(()) => (0, String::new()),
        Err(f) => (f.code, f.msg),
    };
    let mut r = Ok(());
    if !msg.is_empty() {
        let mut m = msg;
        if !m.ends_with('\n') {
            m.push('\n');
        }
        r = conn.send(b'e', m.as_bytes());
    }
    let sent = r.is_ok() && conn.send(b'x', &[code]).is_ok();
    if !sent && conn.deadline.is_some_and(|d| Instant::now() >= d) {
        stats.answer_timeouts.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs a client's request: a batch holds the node alone while it runs
/// (`Stack::changes_alone`); any other change waits for a reload or batch under
/// way, so that one refused does not take it back. A command that streams
/// (route monitor, netstat -w) or only reads (netstat) takes nothing. The others'
/// answers are kept in memory while they hold the lock and sent after it: a
/// client slow to read its `ipfw show` cannot hold the lock for the answer's
/// deadline, and with it a reload waiting for the lock and the FPM feed behind.
pub fn run_request(
    node: &cmds::Node<'_>,
    req: &Request,
    conn: &mut Conn,
    stop: &AtomicBool,
) -> Result<(), cmds::Fail> {
    if let Some(text) = &req.batch {
        return cmds::batch(node, &req.args, text, conn);
    }
    let reads = match req.args.first().map(String::as_str) {
        Some("netstat") => true,
        Some("route") => req.args.iter().any(|a| a == "monitor"),
        _ => false,
    };
    if reads {
        return cmds::execute(node, &req.args, conn, stop);
    }
    let mut answer = Conn::buffer();
    let r = {
        let _c = node.stack.changes_shared();
        cmds::execute(node, &req.args, &mut answer, stop)
    };
    cmds::put(conn, &answer.into_output())?;
    r
}

/// The commands the node answers, and their one-line summaries.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "ifconfig",
        "list interfaces; add or delete addresses; set the MTU; up, down; bridge members",
    ),
    (
        "route",
        "add, delete, change, get, show, flush routes; monitor routing messages",
    ),
    (
        "netstat",
        "connections (-an), routes (-rn), counters (-s), interfaces (-i), rates (-w N)",
    ),
    ("arp", "the IPv4 neighbour table: -a, -d HOST, -s HOST MAC"),
    ("ndp", "the IPv6 neighbour table: -a, -d HOST, -s HOST MAC"),
    (
        "ipfw",
        "the firewall: add, delete, show, list, zero, set, table, pipe, queue",
    ),
    (
        "sysctl",
        "read and write the tunables by their FreeBSD names",
    ),
    (
        "config",
        "apply FILE: many changes (a config file's lines) in one batch, all or nothing",
    ),
];

#[cfg(test)]
mod tests {
    use super::client::read_answer;
    use super::*;

    fn request(args: &[&[u8]]) -> Vec<u8> {
        let mut v = (args.len() as u32).to_le_bytes().to_vec();
        for a in args {
            v.extend_from_slice(&(a.len() as u32).to_le_bytes());
            v.extend_from_slice(a);
        }
        v
    }

    #[test]
    fn a_request_reads_back_and_bad_ones_are_refused() {
        let r = request(&[b"route", b"add", b"default", b"198.18.0.1"]);
        assert_eq!(
            read_request(&mut &r[..]).unwrap().args,
            ["route", "add", "default", "198.18.0.1"]
        );
        // Cut short, too many arguments, too many bytes, not UTF-8.
        assert!(read_request(&mut &r[..r.len() - 1]).is_err());
        let many = ((MAX_ARGS + 1) as u32).to_le_bytes();
        assert!(read_request(&mut &many[..])
            .unwrap_err()
            .contains("at most"));
        let mut big = 1u32.to_le_bytes().to_vec();
        big.extend_from_slice(&((MAX_REQUEST + 1) as u32).to_le_bytes());
        assert!(read_request(&mut &big[..]).unwrap_err().contains("over"));
        let bad = request(&[b"\xff\xfe"]);
        assert!(read_request(&mut &bad[..]).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn a_request_arriving_in_pieces_is_complete_only_at_its_last_byte() {
        let r = request(&[b"netstat", b"-rn"]);
        for cut in 0..r.len() {
            assert_eq!(parse_request(&r[..cut]), Ok(None), "{cut} bytes");
        }
        assert_eq!(
            parse_request(&r),
            Ok(Some(Request {
                args: vec!["netstat".into(), "-rn".into()],
                batch: None
            }))
        );
        // A bound is broken as soon as its length is in, not after the bytes.
        let mut big = 1u32.to_le_bytes().to_vec();
        big.extend_from_slice(&((MAX_REQUEST + 1) as u32).to_le_bytes());
        assert!(parse_request(&big).unwrap_err().contains("over"));
        let many = ((MAX_ARGS + 1) as u32).to_le_bytes();
        assert!(parse_request(&many).unwrap_err().contains("at most"));
    }

    /// A batch's text may be larger than a request, up to its own bound; its
    /// other arguments keep theirs.
    #[test]
    fn a_batch_carries_its_text_under_its_own_bound() {
        let text = "route add 198.19.0.0/16 198.18.2.2\n".repeat(20_000);
        assert!(text.len() > MAX_REQUEST);
        let args = vec!["config".to_string(), "apply".into(), "f".into()];
        let r = encode_request(&args, Some(&text));
        assert_eq!(
            parse_request(&r),
            Ok(Some(Request {
                args: args.clone(),
                batch: Some(text.clone())
            }))
        );
        assert!(is_batch(&r) && !is_batch(&request(&[b"netstat"])));
        // The same bytes as a plain argument break the request's bound.
        let plain = encode_request(&[args, vec![text]].concat(), None);
        assert!(parse_request(&plain).unwrap_err().contains("over"));
        // Past MAX_BATCH, refused as soon as the length is in.
        let mut big = (2 | BATCH).to_le_bytes().to_vec();
        big.extend_from_slice(&1u32.to_le_bytes());
        big.push(b'x');
        big.extend_from_slice(&((MAX_BATCH + 1) as u32).to_le_bytes());
        assert!(parse_request(&big).unwrap_err().contains("batch over"));
        // A batch of one argument has no text.
        let one = (1 | BATCH).to_le_bytes();
        assert!(parse_request(&one).is_err());
    }

    /// The answer's frames, as the client and [`call`] read them.
    #[test]
    fn an_answer_reads_to_its_exit_status() {
        let frame = |t: u8, p: &[u8]| {
            let mut f = vec![t];
            f.extend_from_slice(&(p.len() as u32).to_le_bytes());
            f.extend_from_slice(p);
            f
        };
        let a = [
            frame(b'o', b"one\n"),
            frame(b'e', b"two\n"),
            frame(b'x', &[3]),
        ]
        .concat();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = read_answer(
            &mut &a[..],
            |p| {
                out.extend_from_slice(p);
                true
            },
            |p| err.extend_from_slice(p),
        );
        assert_eq!(
            (code, &out[..], &err[..]),
            (Ok(3), &b"one\n"[..], &b"two\n"[..])
        );
        // Output nobody reads ends it quietly; a bad tag and a cut answer are errors.
        assert_eq!(read_answer(&mut &a[..], |_| false, |_| {}), Ok(0));
        let bad = frame(b'?', b"");
        assert!(read_answer(&mut &bad[..], |_| true, |_| {})
            .unwrap_err()
            .contains("bad frame"));
        assert!(read_answer(&mut &a[..4], |_| true, |_| {})
            .unwrap_err()
            .contains("went away"));
    }

    #[test]
    fn names_are_checked() {
        for good in ["mpstack", "r1", "edge-2.lab_a"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "sp ace", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn frames_carry_their_tag_and_length() {
        let mut v = Vec::new();
        frame(&mut v, b'o', b"hello").unwrap();
        assert_eq!(v, [b'o', 5, 0, 0, 0, b'h', b'e', b'l', b'l', b'o']);
    }
}
