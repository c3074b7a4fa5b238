//! `permitc`: the permits compiler's command line. Everything lives in [`permits::cli`].

fn main() -> std::process::ExitCode {
    permits::cli::main()
}
