//! The commands' side of the control socket: `mpstack CMD [-j NAME] ARGS…` (and
//! [`call`], for programs that drive a node) sends a request to a node's socket and
//! reads its answer's frames.

use super::{cmds, encode_request, socket_path, DEFAULT_NAME, MAX_BATCH};
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;

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
    // A batch: the client reads the file and sends its text; the node never
    // opens a file a client names.
    let batch = match cmds::batch_form(&rest) {
        Some((_, _, f)) => Some(read_batch(cmd, f)?),
        None if cmd == "config" => return Err(
            "config: usage: mpstack config [-j NODE] [-q] apply FILE|- (see mpstack config --help)"
                .to_string(),
        ),
        None => None,
    };
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
    let req = encode_request(&rest, batch.as_deref());
    s.write_all(&req)
        .map_err(|e| format!("{cmd}: sending to node '{name}': {e}"))?;
    let (out, err) = (io::stdout(), io::stderr());
    let code = read_answer(
        &mut s,
        |p| {
            let mut o = out.lock();
            o.write_all(p).and_then(|_| o.flush()).is_ok()
        },
        |p| {
            let _ = err.lock().write_all(p);
        },
    )
    .map_err(|e| format!("{cmd}: node '{name}' {e}"))?;
    Ok(ExitCode::from(code))
}

/// Reads a node's answer until its exit status: each output frame to `out`
/// (false: whoever reads it has gone, a closed pipe, `| head`, which ends the
/// command quietly, status 0), each error frame to `err`.
pub(super) fn read_answer(
    s: &mut impl Read,
    mut out: impl FnMut(&[u8]) -> bool,
    mut err: impl FnMut(&[u8]),
) -> Result<u8, String> {
    loop {
        let mut head = [0u8; 5];
        s.read_exact(&mut head)
            .map_err(|e| format!("went away ({e})"))?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut p = vec![0u8; len];
        s.read_exact(&mut p)
            .map_err(|e| format!("went away ({e})"))?;
        match head[0] {
            b'o' => {
                if !out(&p) {
                    return Ok(0);
                }
            }
            b'e' => err(&p),
            b'x' => return Ok(p.first().copied().unwrap_or(1)),
            t => return Err(format!("sent a bad frame ({t})")),
        }
    }
}

/// Sends a request to the socket at `path` and takes the whole answer, as
/// [`client`] does: (the exit status, the output, the error text). For programs
/// that drive a node (the benchmarks).
pub fn call(
    path: &Path,
    args: &[String],
    batch: Option<&str>,
) -> Result<(u8, String, String), String> {
    let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    s.write_all(&encode_request(args, batch))
        .map_err(|e| format!("sending: {e}"))?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = read_answer(
        &mut s,
        |p| {
            out.extend_from_slice(p);
            true
        },
        |p| err.extend_from_slice(p),
    )
    .map_err(|e| format!("the node {e}"))?;
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    Ok((code, text(out), text(err)))
}

/// A batch's file (`-`: standard input), at most [`MAX_BATCH`] bytes of UTF-8.
fn read_batch(cmd: &str, f: &str) -> Result<String, String> {
    let mut b = Vec::new();
    let r = if f == "-" {
        io::stdin()
            .lock()
            .take(MAX_BATCH as u64 + 1)
            .read_to_end(&mut b)
    } else {
        std::fs::File::open(f).and_then(|h| h.take(MAX_BATCH as u64 + 1).read_to_end(&mut b))
    };
    r.map_err(|e| format!("{cmd}: {f}: {e}"))?;
    if b.len() > MAX_BATCH {
        return Err(format!(
            "{cmd}: {f}: over {} MiB; the node takes a batch of at most that (split the file)",
            MAX_BATCH >> 20
        ));
    }
    String::from_utf8(b).map_err(|_| format!("{cmd}: {f}: not UTF-8 text"))
}
