//! Effect inference as the table records it (spec §2): each class of a tool's effect set with whether it is
//! only assumed and the first hop of its witness. Written against the mutants of `effects.rs` that no
//! corpus snapshot told apart (docs/mutants.md).

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
