//! Opening a file a remote client named: without following a symbolic link and
//! without blocking on what is not a regular file.
//!
//! Here because the flags are the C library's (`libc`), which only `dev` and
//! `mbuf` depend on; no `unsafe` is needed.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading if it is a regular file, with its length: the open
/// does not follow a symbolic link in the last component (`O_NOFOLLOW`: ELOOP,
/// reported as not found) and does not wait for a writer on a FIFO or for a
/// device (`O_NONBLOCK`); the type is checked on the descriptor (`fstat`), so
/// nothing can be swapped in between the check and the reads. Anything but a
/// regular file is `NotFound`, before any byte is read.
pub fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::ErrorKind::NotFound.into(),
            _ => e,
        })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(io::ErrorKind::NotFound.into());
    }
    Ok((f, m.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open() {
        let d = std::env::temp_dir().join(format!("mpstack-dev-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("f"), "abc").unwrap();
        std::os::unix::fs::symlink("f", d.join("link")).unwrap();
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert_eq!(open_regular(&d.join("f")).unwrap().1, 3);
        for p in ["link", "fifo", "."] {
            let e = open_regular(&d.join(p)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{p}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
