//! Digests are stable (spec §4, §5): the definition and entry digests of a known package are pinned, so an
//! accidental change to what a digest covers fails here (standing rules and waiting proposals in deployed
//! ledgers are bound to them). A deliberate change updates these values and says so in the README's
//! upgrade notes. Reformatting and comments change none of them.

use permits_compiler::compile::compile_loaded;
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_table::Table;

const PACKAGE: &str = r#"entity Repair { price, revision }
person Noor { roles [Manager] }
person Mia
role Manager
queue Finance { decided_by [Manager] }
budget Parts { currency: "EUR", unit: cents, ceiling: 50000, alone_up_to: 1000 }
tool Quote "Look up a quote" (part: string) : reads { read Repair }
fn tell(to: string) { send "mail:\"ops\"\tdesk" }
tool SetPrice "Set the price" (repair: Repair, price: money) {
    write Repair.price
    version repair.revision
    call tell
}
tool Order "Order parts" (part: string, amount: money) {
    spend Parts by amount
    reach "parts.example"
    subject part
}
may { spends: propose }
agent Estimator "Estimates repairs." {
    sponsor Noor
    may {
        changes_alone
        alone [Order when amount <= 1000]
        never [SetPrice when price > 100000]
    }
    skills [Estimate]
}
skill Estimate "Estimate." {
    tools [Quote, SetPrice, Order]
    route Order to queue Finance
}
"#;

fn compile(text: &str) -> Table {
    let mut sources = Sources::default();
    sources.add(Source::new("p.permits", text.as_bytes().to_vec()));
    let out = compile_loaded(parse_sources(sources));
    out.table.unwrap_or_else(|| {
        panic!("compiles: {}", permits_compiler::diagnostics::render_plain(&out.diagnostics, &out.sources))
    })
}

fn digests(t: &Table) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        t.tools.iter().map(|(n, x)| (format!("definition {n}"), x.definition_digest.clone())).collect();
    for (tool, e) in &t.entries["Estimator"]["Estimate"] {
        out.push((format!("entry {tool}"), e.entry_digest.clone()));
    }
    out.push(("rules Estimate".into(), t.skills["Estimate"].rules_digest.clone()));
    out
}

#[test]
fn the_digests_of_a_known_package_are_pinned() {
    let pinned = [
        ("definition Order", "525e1219687848d7f118f31552023b3b0c1c01e0bbed1a451f977409145bf7e0"),
        ("definition Quote", "6e1c6fec08cea14fbece341bcc06f7eccc6e6ba2ff03bb9c35157dcfa6c957a5"),
        ("definition SetPrice", "50dc3f3917f68f801d2b9cec9642f91d919d7beef08676a141256ca104d1ce9a"),
        ("entry Order", "22a99d757a75484f4b7818d89761fa31f67a444917cd4f326c4ab64043522d98"),
        ("entry Quote", "7681cf36df46ee2aa1dfe429466b614309e62e22e2d094c12091a224dcb40948"),
        ("entry SetPrice", "2f99ce6a8241abc7777ab04019870c3edd076cdd4a47d5b036f20418c738fd12"),
        ("rules Estimate", "d53ec46f227de92ca63e7846a7ed7fdb739e2b2660f420b0b6d0ccaed91a6b1a"),
    ];
    let found = digests(&compile(PACKAGE));
    let found: Vec<(&str, &str)> = found.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(found, pinned);
}

#[test]
fn reformatting_changes_no_digest_that_binds_a_decision() {
    // Blank lines and a comment between every two lines, and a body written without spaces.
    let reformatted =
        PACKAGE.replace('\n', "\n\n// a comment that changes nothing\n").replace(" { read Repair }", "{read Repair}");
    assert_ne!(PACKAGE, reformatted);
    assert_eq!(digests(&compile(&reformatted)), digests(&compile(PACKAGE)));
}

/// A pin and an optional mark are part of an extern tool's `definition_digest` (spec §2): a server that
/// changes its tool object changes the pin, so every standing rule bound to the old digest stops applying.
#[test]
fn a_pin_and_an_optional_mark_are_part_of_the_definition_digest() {
    let with = |params: &str, pin: &str| {
        let text = format!(
            "person Pat\nagent A \"a\" {{ sponsor Pat skills [S] }}\nskill S \"s\" {{ tools [Search] }}\n\
             extern tool Search \"Search\" ({params}) : reaches_out{pin}\n"
        );
        compile(&text).tools["Search"].clone()
    };
    let a = format!(" pinned \"sha256:{}\"", "a".repeat(64));
    let b = format!(" pinned \"sha256:{}\"", "b".repeat(64));
    let unpinned = with("q: string", "");
    let pinned_a = with("q: string", &a);
    let pinned_b = with("q: string", &b);
    let optional = with("q?: string", &a);
    assert_eq!(pinned_a.pinned.as_deref(), Some(format!("sha256:{}", "a".repeat(64)).as_str()));
    assert_eq!(unpinned.pinned, None);
    let digests = [&unpinned, &pinned_a, &pinned_b, &optional].map(|t| t.definition_digest.clone());
    for i in 0..digests.len() {
        for j in i + 1..digests.len() {
            assert_ne!(digests[i], digests[j], "tools {i} and {j} share a definition digest");
        }
    }
    assert!(optional.params[0].optional);
    assert!(!pinned_a.params[0].optional);
    // The same source compiled twice gives the same digest.
    assert_eq!(with("q: string", &a).definition_digest, pinned_a.definition_digest);
}
