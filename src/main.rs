//! `herald`: thin entry point; everything lives in the library (`herald::cli`).

fn main() -> std::process::ExitCode {
    bound_malloc_arenas();
    herald::cli::main()
}

/// glibc gives each thread that allocates its own arena, up to eight per core, and each keeps freed memory for
/// itself. Herald's threads (the HTTP workers, the runtime's, one per SQLite connection) share two: the same work
/// in 1–2 MB less resident memory (see docs/benchmarks.md). Before any other thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn bound_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; it is called before any thread is spawned.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn bound_malloc_arenas() {}
