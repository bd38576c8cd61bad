//! The hostile classes of issue #44 (deep `$ref` chains, cycles, `$dynamicRef` loops, huge
//! enums of objects, GBNF rule chains) at fuzzed sizes, through the same checks as
//! `schema_compile` and `gbnf_parse`: no crash, abort or hang at any size.
#![no_main]

use stencil_fuzz::checks::{CaseOptions, SchemaCase};
use stencil_fuzz::gen::HostileInput;

libfuzzer_sys::fuzz_target!(|input: HostileInput| {
    let (name, text) = input.text();
    if input.grammar {
        stencil_fuzz::checks::check_gbnf(text.as_bytes());
        return;
    }
    // serde_json refuses text nested deeper than 128 levels: that is the outcome then.
    let Ok(schema) = serde_json::from_str(&text) else { return };
    let case = SchemaCase { schema, options: CaseOptions { lenient: input.lenient, ..CaseOptions::default() } };
    if std::env::var_os("STENCIL_FUZZ_PRINT").is_some() {
        eprintln!("{name}: {} bytes", text.len());
    }
    stencil_fuzz::checks::check_schema(&case);
});
