//! Writes a synthetic policy package: `cargo run --release --example gen -- TOOLS [EDGES] [SEED] [delegation]
//! > big.permits`. `delegation` adds a chain of `delegates` entries through the agents (BENCHMARKS.md).
//! Seeded and deterministic (see `permits::generate`).

fn main() {
    let mut args = std::env::args().skip(1);
    let tools: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mut config = permits_testkit::generate::Config::sized(tools);
    if let Some(edges) = args.next().and_then(|a| a.parse().ok()) {
        config.edges = edges;
    }
    if let Some(seed) = args.next().and_then(|a| a.parse().ok()) {
        config.seed = seed;
    }
    config.delegation = args.next().as_deref() == Some("delegation");
    print!("{}", permits_testkit::generate::generate(&config));
}
