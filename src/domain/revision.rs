//! How a revision is quoted to people, one rule for every place that shortens one: a commit (hex) by its first
//! characters, anything else (a chart version, a tag, a branch) whole.

/// A commit as Git hosts quote it: commit statuses, annotations, change events.
pub const QUOTED: usize = 7;

/// A commit as messages and digests show it, long enough to tell two apart at a glance.
pub const SHOWN: usize = 12;

/// `revision` cut to its first `len` characters when it is a commit (hex) longer than that; otherwise whole.
pub fn short_revision(revision: &str, len: usize) -> &str {
    match revision.get(..len) {
        Some(head) if revision.len() > len && revision.chars().all(|c| c.is_ascii_hexdigit()) => head,
        _ => revision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_cut_and_anything_else_is_quoted_whole() {
        let commit = "2222222222222222222222222222222222222222";
        assert_eq!(short_revision(commit, QUOTED), "2222222");
        assert_eq!(short_revision(commit, SHOWN), "222222222222");
        assert_eq!(short_revision("6.9.0", QUOTED), "6.9.0");
        assert_eq!(short_revision("release-2026-01-15", SHOWN), "release-2026-01-15");
        assert_eq!(short_revision("abc1234", QUOTED), "abc1234");
    }
}
