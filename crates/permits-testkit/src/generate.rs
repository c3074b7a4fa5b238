//! A synthetic policy generator for benchmarks and property tests: N tools with a random call graph of
//! E edges (cycles included), extern tools, functions, A agents with S skills each, layered `may` blocks
//! and conditions. Seeded and deterministic: the same [`Config`] always gives the same text.

use std::fmt::Write;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The seed of the pseudo-random generator.
    pub seed: u64,
    /// How many tools (about a tenth of them `extern`).
    pub tools: usize,
    /// How many call edges in all (some backwards, so the graph has cycles).
    pub edges: usize,
    /// How many agents.
    pub agents: usize,
    /// How many skills each agent has (each skill is its own).
    pub skills_per_agent: usize,
    /// How many tools each skill lists.
    pub tools_per_skill: usize,
    /// A delegation structure (spec §3b): every skill of agent `A{a}` delegates to the first skill of the
    /// next agent, so the agents form one chain and a skill's descendants are every later agent's first
    /// skill (the transitive closure the table carries rows for).
    pub delegation: bool,
}

impl Config {
    /// A package of `tools` tools with ten call edges per tool, 20 agents of 5 skills of 20 tools.
    pub fn sized(tools: usize) -> Config {
        Config {
            seed: 7,
            tools,
            edges: tools * 10,
            agents: 20,
            skills_per_agent: 5,
            tools_per_skill: 20,
            delegation: false,
        }
    }
}

/// SplitMix64: small, fast, and good enough to shape a graph.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// The source text of one `.permits` file for `config`. Tool `Ti` is extern when `i % 10 == 9`; every
/// other tool has a body with one operation and its share of the calls. Nine in ten edges go from a
/// tool to a lower-numbered one (a deep, mostly acyclic graph); one in ten goes upwards, making cycles.
pub fn generate(config: &Config) -> String {
    let mut rng = Rng(config.seed);
    let n = config.tools.max(1);
    let mut calls: Vec<Vec<usize>> = vec![Vec::new(); n];
    for _ in 0..config.edges {
        let from = rng.below(n);
        if from % 10 == 9 {
            continue; // extern tools have no body
        }
        let to = if rng.below(10) == 0 || from == 0 { rng.below(n) } else { rng.below(from) };
        if to != from {
            calls[from].push(to);
        }
    }
    let mut out = String::with_capacity(n * 80);
    out.push_str("entity Record { body, owner }\nrole Reviewer\nperson Owner { roles [Reviewer] }\n");
    out.push_str("queue Review { decided_by [Reviewer] }\n");
    out.push_str("may {\n    spends: never\n}\n");
    out.push_str("fn notify() { send email }\n");
    const OPS: [&str; 4] = ["read Record", "write Record.body", "call notify", "reach api"];
    for (i, callees) in calls.iter_mut().enumerate() {
        if i % 10 == 9 {
            let claim = ["reads", "changes", "sends", "reaches_out"][rng.below(4)];
            let _ = writeln!(out, "extern tool T{i} \"Tool {i}\" (amount: money, to: string) : {claim}");
            continue;
        }
        let _ = write!(out, "tool T{i} \"Tool {i}\" (amount: money, to: string) {{ {}", OPS[rng.below(OPS.len())]);
        callees.sort_unstable();
        callees.dedup();
        for c in callees.iter() {
            let _ = write!(out, " call T{c}");
        }
        out.push_str(" }\n");
    }
    for a in 0..config.agents {
        let _ = writeln!(out, "agent A{a} {{\n    sponsor Owner\n    may {{");
        if a % 2 == 0 {
            out.push_str("        changes_alone\n");
        }
        let _ = writeln!(out, "        alone [T{} when amount <= 10000]", rng.below(n));
        let _ = writeln!(out, "        never [T{} when to matches \"*@rival.example\"]", rng.below(n));
        let _ = writeln!(out, "        propose [T{}]", rng.below(n));
        out.push_str("    }\n    skills [");
        for s in 0..config.skills_per_agent {
            let _ = write!(out, "{}A{a}S{s}", if s > 0 { ", " } else { "" });
        }
        out.push_str("]\n}\n");
        for s in 0..config.skills_per_agent {
            let mut tools: Vec<usize> = (0..config.tools_per_skill).map(|_| rng.below(n)).collect();
            tools.sort_unstable();
            tools.dedup();
            let _ = write!(out, "skill A{a}S{s} {{\n    tools [");
            for (k, t) in tools.iter().enumerate() {
                let _ = write!(out, "{}T{t}", if k > 0 { ", " } else { "" });
            }
            out.push_str("]\n");
            if s % 2 == 1 {
                let _ = writeln!(out, "    may {{\n        sends: propose_every_time\n    }}");
            }
            if let Some(t) = tools.first() {
                let _ = writeln!(out, "    route T{t} to queue Review");
            }
            if config.delegation && a + 1 < config.agents {
                let _ = writeln!(out, "    delegates [A{}.A{}S0]", a + 1, a + 1);
            }
            out.push_str("}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_text_and_another_seed_another() {
        let c = Config::sized(200);
        assert_eq!(generate(&c), generate(&c));
        assert_ne!(generate(&c), generate(&Config { seed: 8, ..c }));
    }

    #[test]
    fn a_generated_package_compiles_without_errors() {
        let text = generate(&Config::sized(500));
        let mut sources = permits_compiler::syntax::Sources::default();
        sources.add(permits_compiler::syntax::Source::new("gen.permits", text.into_bytes()));
        let out = permits_compiler::compile::compile_loaded(permits_compiler::syntax::parse_sources(sources));
        let errors: Vec<_> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        let table = out.table.expect("a table");
        assert_eq!(table.agents.len(), 20);
        assert!(table.entries.values().flat_map(|s| s.values()).map(|t| t.len()).sum::<usize>() > 1000);
        assert!(table.links.is_empty());
    }

    #[test]
    fn a_generated_delegation_structure_compiles_with_link_rows() {
        let text = generate(&Config { delegation: true, ..Config::sized(500) });
        let mut sources = permits_compiler::syntax::Sources::default();
        sources.add(permits_compiler::syntax::Source::new("gen.permits", text.into_bytes()));
        let out = permits_compiler::compile::compile_loaded(permits_compiler::syntax::parse_sources(sources));
        let errors: Vec<_> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        let table = out.table.expect("a table");
        // Every agent but the last delegates; the last agent's skills have no descendants.
        assert_eq!(table.links.len(), 19);
        assert_eq!(table.skills["A0S3"].delegates, vec!["A1.A1S0".to_string()]);
    }
}
