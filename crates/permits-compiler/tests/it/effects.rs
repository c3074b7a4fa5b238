//! Effect inference as the table records it (spec §2): each class of a tool's effect set with whether it is
//! only assumed and the first hop of its witness. Written against the mutants of `effects.rs` that no
//! corpus snapshot told apart (docs/mutants.md).

use permits_compiler::compile::analyze;
use permits_compiler::explain::{Explanation, explain};
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_table::{EffectClass, HopKind};

use crate::common::table_of;

/// A tool with a claim of its own that reaches an effect only through an `extern tool`'s claim: the
/// witness is the call to the extern (the tool's own claim is no evidence, it is what is checked), and it
/// is the call that has the effect, not an earlier call that does not.
#[test]
fn an_assumed_effect_is_witnessed_by_the_call_to_the_extern_that_claims_it() {
    let table = table_of(
        r#"entity Memo { text }
person Pat
agent Clerk "Asks." {
    sponsor Pat
    skills [Ask]
}
skill Ask "Ask." {
    tools [Question]
}
extern tool Search "Search" (q: string) : reaches_out
tool Note "Note" () { read Memo }
tool Question "Ask a question" (q: string) : reads + reaches_out {
    call Note
    call Search
}
"#,
    );
    let effects = &table.tools["Question"].effects;
    let reaches = &effects[&EffectClass::ReachesOut];
    assert!(reaches.assumed);
    assert_eq!((reaches.witness.kind, reaches.witness.text.as_str()), (HopKind::Call, "Search"));
    assert_eq!(reaches.witness.at.line, 14);
    let reads = &effects[&EffectClass::Reads];
    assert!(!reads.assumed);
    assert_eq!((reads.witness.kind, reads.witness.text.as_str()), (HopKind::Call, "Note"));
    let search = &table.tools["Search"].effects[&EffectClass::ReachesOut];
    assert_eq!((search.witness.kind, search.assumed), (HopKind::Claim, true));
}

/// An extern tool's claim as a witness says, in words, what the author claimed: the table held the claim's
/// source as written (`:reads+  sends`, with the comments after a one-class claim), and `explain` said
/// `claim (assumed)`; both now say `claimed by the author: reads + sends`, whatever the layout.
#[test]
fn an_extern_claim_as_a_witness_says_what_the_author_claimed() {
    let text = r#"person Pat
agent Clerk "Posts." {
    sponsor Pat
    skills [Post]
}
skill Post "Post." {
    tools [Announce, Shout, Relay]
}
extern tool Announce "Announce" (text: string) :reads+  sends
extern tool Shout "Shout" (text: string) : sends // trusted: the vendor's docs
// the next tool
tool Relay "Relay" (text: string) : reads + sends { call Announce }
"#;
    let table = table_of(text);
    let announce = &table.tools["Announce"].effects;
    for class in [EffectClass::Reads, EffectClass::Sends] {
        let w = &announce[&class].witness;
        assert_eq!((w.kind, w.text.as_str()), (HopKind::Claim, "claimed by the author: reads + sends"));
    }
    let shout = &table.tools["Shout"].effects[&EffectClass::Sends].witness;
    assert_eq!((shout.kind, shout.text.as_str()), (HopKind::Claim, "claimed by the author: sends"));

    let mut sources = Sources::default();
    sources.add(Source::new("p.permits", text.as_bytes().to_vec()));
    let loaded = parse_sources(sources);
    let (analysis, _) = analyze(&loaded.package, &loaded.sources);
    let analysis = analysis.expect("analyses");
    let Explanation::Offered(relay) = explain(&analysis, "Clerk", "Post", "Relay") else { panic!("offered") };
    let paths: Vec<(&str, &str)> = relay.witnesses.iter().map(|w| (w.effect, w.path.as_str())).collect();
    assert_eq!(
        paths,
        [
            ("reads", "Relay → Announce → claimed by the author: reads + sends"),
            ("sends", "Relay → Announce → claimed by the author: reads + sends"),
        ]
    );
}
