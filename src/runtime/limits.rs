//! Process limits probelet adjusts for itself.

/// Raises the soft limit on open files to the hard limit, as Go's runtime does at start since
/// 1.19: the default soft limit (often 1024) is what ran out when idle connections piled up,
/// and probes need descriptors too. Returns the (soft, hard) limits now in force.
pub fn raise_nofile() -> (u64, u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit = raised;
        }
    }
    // `None` means unlimited.
    (
        limit.current.unwrap_or(u64::MAX),
        limit.maximum.unwrap_or(u64::MAX),
    )
}

/// The soft limit on open files now in force.
pub fn nofile() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_nofile_is_raised_to_the_hard_limit() {
        let (soft, hard) = raise_nofile();
        assert_eq!(soft, hard);
        assert_eq!(nofile(), soft);
    }
}
