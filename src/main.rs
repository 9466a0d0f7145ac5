//! `herald`: thin entry point; everything lives in the library (`herald::cli`).

/// mimalloc rather than the system allocator: glibc's malloc and free were a sixth of the ingest's CPU (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    herald::cli::main()
}
