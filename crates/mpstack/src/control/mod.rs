//! The control socket of a running node, and the commands that talk to it.
//!
//! `mpstack run --name NAME` listens on a Unix socket, `RUNDIR/NAME.sock` (mode
//! 0600, in a directory of mode 0700; RUNDIR is `$MPSTACK_RUN_DIR` or
//! `/run/mpstack`). `mpstack ifconfig|route|netstat|arp|ndp|ipfw|sysctl [-j NAME]
//! ARGS…` sends its arguments there; the node parses and runs the command against
//! its stack (through the embedded API, as a program embedding mpstack would) and
//! streams the output back. So the commands' syntax, checks and errors live in
//! one place, the node, and a command cannot see a half-changed node.
//!
//! The wire: the request is a count and the arguments, each a little-endian
//! `u32` length and its bytes; the answer is a sequence of frames, a tag byte
//! (`o` output, `e` error text, `x` the exit status, last) and a `u32` length and
//! payload. Requests are bounded ([`MAX_ARGS`], [`MAX_REQUEST`]); so are the
//! connections served at once ([`MAX_CLIENTS`]).
//!
//! What it owns: the socket, its path and the framing. What it may call: the
//! commands ([`cmds`]), which call the stack.

pub mod cmds;
pub mod config;
pub mod log;
pub mod metrics;

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Arguments a request may carry.
pub const MAX_ARGS: usize = 1024;
/// Bytes a request may carry.
pub const MAX_REQUEST: usize = 256 * 1024;
/// Connections served at once; more are answered with an error.
pub const MAX_CLIENTS: usize = 16;
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

/// Makes the node's socket: refuses if a node of that name answers there, takes
/// the place of a stale one.
pub fn listen(name: &str) -> Result<(UnixListener, PathBuf), String> {
    let path = socket_path(name)?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("control socket directory {}: {e}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(&path).is_ok() {
            return Err(format!(
                "a node named '{name}' is running already (its control socket is {}); give this one another --name",
                path.display()
            ));
        }
        // Left by a node that did not stop cleanly.
        let _ = std::fs::remove_file(&path);
    }
    let l =
        UnixListener::bind(&path).map_err(|e| format!("control socket {}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("control socket {}: {e}", path.display()))?;
    l.set_nonblocking(true)
        .map_err(|e| format!("control socket {}: {e}", path.display()))?;
    Ok((l, path))
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

/// Reads a request: its arguments (a count, then each as a length and UTF-8 bytes,
/// lengths little-endian `u32`), bounded by `MAX_ARGS` and `MAX_REQUEST`.
pub fn read_request(r: &mut impl Read) -> Result<Vec<String>, String> {
    let n = read_u32(r).map_err(|e| format!("reading the request: {e}"))? as usize;
    if n > MAX_ARGS {
        return Err(format!("request of {n} arguments: at most {MAX_ARGS}"));
    }
    let mut total = 0usize;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let len = read_u32(r).map_err(|e| format!("reading the request: {e}"))? as usize;
        total += len;
        if total > MAX_REQUEST {
            return Err(format!("request over {MAX_REQUEST} bytes"));
        }
        let mut b = vec![0u8; len];
        r.read_exact(&mut b)
            .map_err(|e| format!("reading the request: {e}"))?;
        args.push(String::from_utf8(b).map_err(|_| "an argument is not UTF-8".to_string())?);
    }
    Ok(args)
}

/// Where a command writes: the client's connection, or (a config file's lines)
/// a buffer.
pub struct Conn {
    stream: Option<UnixStream>,
    buf: String,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Conn")
    }
}

impl Conn {
    /// Output kept in memory.
    pub fn buffer() -> Conn {
        Conn {
            stream: None,
            buf: String::new(),
        }
    }

    /// What was written to a [`Conn::buffer`] (nothing, for a client's connection).
    pub fn into_output(self) -> String {
        self.buf
    }

    /// Sends output text.
    pub fn print(&mut self, s: &str) -> io::Result<()> {
        match &mut self.stream {
            _ if s.is_empty() => Ok(()),
            Some(st) => frame(st, b'o', s.as_bytes()),
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

/// Serves the control socket until `stop`: a thread per connection (at most
/// [`MAX_CLIENTS`]), each running one command.
pub fn serve(listener: &UnixListener, node: &cmds::Node<'_>, stop: &AtomicBool) {
    let busy = AtomicUsize::new(0);
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            let stream = match listener.accept() {
                Ok((st, _)) => st,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut stream = stream;
            if busy.load(Ordering::Relaxed) >= MAX_CLIENTS {
                let _ = frame(
                    &mut stream,
                    b'e',
                    format!("the node serves {MAX_CLIENTS} commands at once; try again\n")
                        .as_bytes(),
                );
                let _ = frame(&mut stream, b'x', &[75]);
                continue;
            }
            busy.fetch_add(1, Ordering::Relaxed);
            let busy = &busy;
            s.spawn(move || {
                handle(stream, node, stop);
                busy.fetch_sub(1, Ordering::Relaxed);
            });
        }
    });
}

/// Runs one connection's command and sends its status.
fn handle(stream: UnixStream, node: &cmds::Node<'_>, stop: &AtomicBool) {
    let mut conn = Conn {
        stream: Some(stream),
        buf: String::new(),
    };
    let req = match &mut conn.stream {
        Some(st) => read_request(st),
        None => return,
    };
    let (code, msg) = match req {
        Ok(args) => {
            if let Some(st) = &conn.stream {
                let _ = st.set_read_timeout(None);
            }
            match cmds::execute(node, &args, &mut conn, stop) {
                Ok(()) => (0, String::new()),
                Err(f) => (f.code, f.msg),
            }
        }
        Err(e) => (64, e),
    };
    let Some(st) = &mut conn.stream else { return };
    if !msg.is_empty() {
        let mut m = msg;
        if !m.ends_with('\n') {
            m.push('\n');
        }
        let _ = frame(st, b'e', m.as_bytes());
    }
    let _ = frame(st, b'x', &[code]);
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
];

/// `mpstack CMD [-j NAME] ARGS…`: sends the command to the node named and prints
/// its answer; the exit status is the command's.
pub fn client(cmd: &str, args: &[OsString]) -> Result<ExitCode, String> {
    let mut name = std::env::var("MPSTACK_NODE").unwrap_or_else(|_| DEFAULT_NAME.to_string());
    let mut rest: Vec<String> = Vec::with_capacity(args.len() + 1);
    rest.push(cmd.to_string());
    let mut it = args.iter();
    let mut leading = true;
    while let Some(a) = it.next() {
        let a = a
            .to_str()
            .ok_or_else(|| format!("{cmd}: an argument is not UTF-8"))?;
        // `-j NAME` (as FreeBSD's commands take a jail) among the leading options.
        if leading && a == "-j" {
            name = it
                .next()
                .and_then(|n| n.to_str())
                .ok_or_else(|| format!("{cmd}: -j needs a node name"))?
                .to_string();
            continue;
        }
        if leading {
            if let Some(n) = a.strip_prefix("-j").filter(|n| !n.is_empty()) {
                name = n.to_string();
                continue;
            }
        }
        if leading && (a == "-h" || a == "--help") && rest.len() == 1 {
            print!("{}", cmds::help(cmd));
            return Ok(ExitCode::SUCCESS);
        }
        if !a.starts_with('-') {
            leading = false;
        }
        rest.push(a.to_string());
    }
    let path = socket_path(&name)?;
    let mut s = UnixStream::connect(&path).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                "no node of that name is running (start one with `mpstack run --name NAME …`; $MPSTACK_RUN_DIR moves the sockets)".to_string()
            }
            io::ErrorKind::PermissionDenied => {
                "permission denied (the socket is its owner's alone)".to_string()
            }
            _ => e.to_string(),
        };
        format!("{cmd}: node '{name}' ({}): {why}", path.display())
    })?;
    let mut req = Vec::new();
    req.extend_from_slice(&(rest.len() as u32).to_le_bytes());
    for a in &rest {
        req.extend_from_slice(&(a.len() as u32).to_le_bytes());
        req.extend_from_slice(a.as_bytes());
    }
    s.write_all(&req)
        .map_err(|e| format!("{cmd}: sending to node '{name}': {e}"))?;
    let out = io::stdout();
    let err = io::stderr();
    loop {
        let mut head = [0u8; 5];
        if let Err(e) = s.read_exact(&mut head) {
            return Err(format!("{cmd}: node '{name}' went away ({e})"));
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut p = vec![0u8; len];
        s.read_exact(&mut p)
            .map_err(|e| format!("{cmd}: node '{name}' went away ({e})"))?;
        match head[0] {
            b'o' => {
                let mut o = out.lock();
                // A closed pipe (`| head`) ends the command quietly.
                if o.write_all(&p).and_then(|_| o.flush()).is_err() {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            b'e' => {
                let _ = err.lock().write_all(&p);
            }
            b'x' => return Ok(ExitCode::from(p.first().copied().unwrap_or(1))),
            t => return Err(format!("{cmd}: node '{name}' sent a bad frame ({t})")),
        }
    }
}

#[cfg(test)]
mod tests {
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
            read_request(&mut &r[..]).unwrap(),
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
