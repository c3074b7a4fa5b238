//! `permitd`: see the crate documentation of `permits_service`.

fn main() -> std::process::ExitCode {
    permits_service::cli::main()
}
