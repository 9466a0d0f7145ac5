//! `herald`: thin entry point; everything lives in the library (`herald::cli`).

fn main() -> std::process::ExitCode {
    herald::cli::main()
}
