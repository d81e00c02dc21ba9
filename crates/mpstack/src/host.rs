//! What the host offers a test or a benchmark that needs it: root, and tools on the
//! PATH. One place for the checks that decide whether a case runs or says why it
//! skips.

use std::path::Path;

/// Effective uid 0, read from /proc so that no `unsafe` libc call is needed.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// True if `tool` is an executable file in a directory of the PATH.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| Path::new(&d).join(tool).is_file()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sh_is_on_the_path_and_a_made_up_tool_is_not() {
        assert!(super::on_path("sh"));
        assert!(!super::on_path("no-such-tool-mpstack"));
    }
}
